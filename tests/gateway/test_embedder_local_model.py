"""Loading a local sentence-transformers model: the weights are checked before loading.

None of these tests needs the real model or torch: the hash check runs first and refuses a
mismatching file with a clear error. The last test builds a tiny random model and loads it
through the real library when sentence-transformers is installed (skipped otherwise).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from memoryos_actors.config import MemoryConfig
from memoryos_actors.errors import ConfigError
from memoryos_actors.gateway.embedders import (
    KNOWN_MODEL_SHA256,
    MINILM_L6_V2_SHA256,
    ModelIntegrityError,
    SentenceTransformerEmbedder,
    file_sha256,
    make_embedder,
    verify_model_dir,
)


def _model_dir(root: Path, name: str = "tiny-model", weights: bytes | None = b"weights") -> Path:
    d = root / name
    d.mkdir()
    if weights is not None:
        (d / "model.safetensors").write_bytes(weights)
    return d


def test_file_sha256_is_the_hex_digest_of_the_whole_file(tmp_path: Path) -> None:
    f = tmp_path / "blob"
    f.write_bytes(b"x" * 3_000_001)
    assert file_sha256(f, chunk=4096) == hashlib.sha256(b"x" * 3_000_001).hexdigest()


def test_matching_weights_are_accepted_and_their_digest_returned(tmp_path: Path) -> None:
    d = _model_dir(tmp_path)
    digest = hashlib.sha256(b"weights").hexdigest()
    assert verify_model_dir(d, digest) == digest
    assert verify_model_dir(d, digest.upper()) == digest


def test_mismatching_weights_are_refused_naming_both_digests(tmp_path: Path) -> None:
    d = _model_dir(tmp_path, weights=b"tampered")
    with pytest.raises(ModelIntegrityError) as info:
        verify_model_dir(d, MINILM_L6_V2_SHA256)
    assert MINILM_L6_V2_SHA256 in str(info.value)
    assert hashlib.sha256(b"tampered").hexdigest() in str(info.value)
    assert isinstance(info.value, ConfigError)


def test_a_known_model_name_is_checked_against_its_known_digest(tmp_path: Path) -> None:
    assert KNOWN_MODEL_SHA256["all-MiniLM-L6-v2"] == MINILM_L6_V2_SHA256
    d = _model_dir(tmp_path, "all-MiniLM-L6-v2", weights=b"not the real weights")
    with pytest.raises(ModelIntegrityError, match="does not match"):
        verify_model_dir(d)


def test_missing_weights_are_refused_when_a_digest_is_expected(tmp_path: Path) -> None:
    d = _model_dir(tmp_path, "all-MiniLM-L6-v2", weights=None)
    with pytest.raises(ModelIntegrityError, match="missing"):
        verify_model_dir(d)


def test_an_unknown_model_without_expected_digest_is_not_checked(tmp_path: Path) -> None:
    assert verify_model_dir(_model_dir(tmp_path)) is None


def test_a_missing_directory_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ModelIntegrityError, match="not a directory"):
        verify_model_dir(tmp_path / "nowhere", MINILM_L6_V2_SHA256)


def test_the_embedder_refuses_tampered_weights_before_loading_anything(tmp_path: Path) -> None:
    d = _model_dir(tmp_path, weights=b"tampered")
    with pytest.raises(ModelIntegrityError):
        SentenceTransformerEmbedder(str(d), expected_sha256=MINILM_L6_V2_SHA256)


def test_config_passes_the_expected_digest_to_the_embedder(tmp_path: Path) -> None:
    d = _model_dir(tmp_path, weights=b"tampered")
    cfg = MemoryConfig(
        embedder="sentence-transformers",
        embedding_model=str(d),
        embedding_sha256=MINILM_L6_V2_SHA256,
    )
    with pytest.raises(ModelIntegrityError):
        make_embedder(cfg)


def test_config_rejects_a_digest_that_is_not_64_hex_digits() -> None:
    with pytest.raises(ConfigError, match="embedding_sha256"):
        MemoryConfig(embedding_sha256="abc")


def test_a_tiny_local_model_loads_and_embeds_after_its_digest_is_checked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("sentence_transformers")
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("torch")
    import importlib

    import tqdm

    st_models = importlib.import_module("sentence_transformers.models")
    st_core = importlib.import_module("sentence_transformers")
    # tqdm's monitor thread outlives the loading progress bar: keep the leak check honest.
    monkeypatch.setattr(tqdm.tqdm, "monitor_interval", 0)
    src = tmp_path / "build"
    src.mkdir()
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "quokka", "ridge", "violin"]
    (src / "vocab.txt").write_text("\n".join(vocab) + "\n")
    tokenizer = transformers.BertTokenizerFast(vocab_file=str(src / "vocab.txt"))
    config = transformers.BertConfig(
        vocab_size=len(vocab),
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=32,
    )
    bert = transformers.BertModel(config)
    bert.save_pretrained(src / "hf", safe_serialization=True)
    tokenizer.save_pretrained(src / "hf")
    word = st_models.Transformer(str(src / "hf"), max_seq_length=16)
    pool = st_models.Pooling(word.get_word_embedding_dimension())
    model_dir = tmp_path / "tiny-st"
    st_core.SentenceTransformer(modules=[word, pool]).save(str(model_dir))
    digest = file_sha256(model_dir / "model.safetensors")
    torch = importlib.import_module("torch")
    threads = torch.get_num_threads()
    try:
        embedder = SentenceTransformerEmbedder(
            str(model_dir), device="cpu", expected_sha256=digest, num_threads=1
        )
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(threads)  # process-wide: leave it as the test found it
    assert embedder.sha256 == digest and embedder.dim == 16
    out = embedder.embed(["quokka ridge", "violin"])
    assert out.shape == (2, 16)
    assert abs(float((out[0] ** 2).sum()) - 1.0) < 1e-5


def test_embedding_threads_defaults_to_one_and_must_be_positive() -> None:
    assert MemoryConfig().embedding_threads == 1
    assert MemoryConfig(embedding_threads=None).embedding_threads is None
    with pytest.raises(ConfigError, match="embedding_threads"):
        MemoryConfig(embedding_threads=0)


def test_the_embedder_refuses_a_thread_count_below_one(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="num_threads"):
        SentenceTransformerEmbedder(str(_model_dir(tmp_path)), num_threads=0)


def test_config_passes_the_thread_count_to_the_embedder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from memoryos_actors.gateway import embedders

    seen: list[dict[str, object]] = []

    class _Recorder:
        def __init__(self, model: str, **kwargs: object) -> None:
            seen.append({"model": model, **kwargs})

    monkeypatch.setattr(embedders, "SentenceTransformerEmbedder", _Recorder)
    d = str(_model_dir(tmp_path))
    make_embedder(MemoryConfig(embedder="sentence-transformers", embedding_model=d))
    make_embedder(
        MemoryConfig(embedder="sentence-transformers", embedding_model=d, embedding_threads=None)
    )
    assert [s["num_threads"] for s in seen] == [1, None]
