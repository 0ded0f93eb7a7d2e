"""HashingEmbedder properties and embedder construction."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from gwhelpers import gateway_config
from hypothesis import given, settings
from hypothesis import strategies as st

from memoryos_actors.errors import ConfigError, InvalidInput
from memoryos_actors.gateway.embedders import HashingEmbedder, make_embedder

EMB = HashingEmbedder(128)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.text(max_size=80), min_size=1, max_size=6))
def test_hashing_rows_are_unit_float32(texts: list[str]) -> None:
    out = EMB.embed(texts)
    assert out.shape == (len(texts), 128) and out.dtype == np.float32
    assert np.allclose(np.linalg.norm(out, axis=1), 1.0, atol=1e-5)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.text(max_size=60), min_size=1, max_size=5))
def test_hashing_is_deterministic_and_batch_independent(texts: list[str]) -> None:
    together = HashingEmbedder(128).embed(texts)
    one_by_one = np.vstack([EMB.embed([t]) for t in texts])
    assert np.array_equal(together, one_by_one)


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.sampled_from(["hiking", "trail", "boots", "mountain", "summit", "camp"]),
        min_size=4,
        max_size=8,
    ),
    st.lists(
        st.sampled_from(["violin", "orchestra", "cello", "symphony", "tempo", "bow"]),
        min_size=4,
        max_size=8,
    ),
)
def test_similar_texts_are_closer_than_unrelated(a: list[str], b: list[str]) -> None:
    base = " ".join(a)
    similar = " ".join(a[:-1] + ["weekend"])
    unrelated = " ".join(b)
    e = EMB.embed([base, similar, unrelated])
    assert float(e[0] @ e[1]) > float(e[0] @ e[2])


def test_hashing_vectors_are_stable_across_processes() -> None:
    # Python's str hash is salted per process; the embedder must not depend on it.
    code = (
        "from memoryos_actors.gateway.embedders import HashingEmbedder;"
        "print(HashingEmbedder(32).embed(['stable across runs'])[0].round(6).tolist())"
    )
    outs = {
        subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            check=True,
            env={"PYTHONHASHSEED": seed},
        ).stdout
        for seed in ("1", "2")
    }
    assert len(outs) == 1
    assert outs.pop().strip() == str(
        EMB.__class__(32).embed(["stable across runs"])[0].round(6).tolist()
    )


def test_empty_text_still_gets_a_unit_vector() -> None:
    out = EMB.embed(["", "   ", "!!!"])
    assert np.allclose(np.linalg.norm(out, axis=1), 1.0)


def test_hashing_rejects_a_bare_string_and_non_strings() -> None:
    with pytest.raises(InvalidInput):
        EMB.embed("not a list")
    with pytest.raises(InvalidInput):
        EMB.embed(["ok", 3])  # type: ignore[list-item]


def test_embedder_name_and_dim_follow_config() -> None:
    emb = make_embedder(gateway_config(embedding_dim=96))
    assert (emb.name, emb.dim) == ("hashing-v1-96", 96)
    with pytest.raises(ConfigError):
        make_embedder(gateway_config(embedder="word2vec"))
    with pytest.raises(ConfigError):
        HashingEmbedder(2)


def test_sentence_transformers_without_the_extra_is_a_config_error() -> None:
    try:
        import sentence_transformers  # noqa: F401
    except ImportError:
        with pytest.raises(ConfigError, match="st"):
            make_embedder(gateway_config(embedder="sentence-transformers", embedding_model="m"))
    else:  # pragma: no cover - only where the extra is installed
        pytest.skip("sentence-transformers is installed")


def _reference_hashing(texts: list[str], dim: int, bigram_weight: float) -> np.ndarray:
    """HashingEmbedder's documented algorithm written plainly: BLAKE2b of each unigram and
    bigram picks a column (hash mod dim) and a sign (top bit), weight 1 + log tf (bigrams
    scaled), summed per column in float64, then float32 rows L2-normalised."""
    import hashlib
    import itertools
    import math
    from collections import Counter

    from memoryos_actors.text import tokenize

    out = np.zeros((len(texts), dim), dtype=np.float64)
    for row, text in enumerate(texts):
        toks = tokenize(text) or ["\x00empty"]
        grams = Counter(a + " " + b for a, b in itertools.pairwise(toks))
        for counts, scale in ((Counter(toks), 1.0), (grams, bigram_weight)):
            for feature, tf in counts.items():
                h = int.from_bytes(
                    hashlib.blake2b(feature.encode("utf-8"), digest_size=8).digest(), "little"
                )
                out[row, h % dim] += (-1.0 if h >> 63 else 1.0) * (scale * (1.0 + math.log(tf)))
    f32 = out.astype(np.float32)
    return f32 / np.sqrt(np.einsum("ij,ij->i", f32, f32))[:, None]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.lists(st.sampled_from(["a", "tea", "tea", "green", "I'm", "\u00e9t\u00e9", "7", "."]))
        .map(" ".join)
        .filter(lambda t: any(c.isalnum() for c in t)),
        min_size=1,
        max_size=6,
    ),
    st.sampled_from([(16, 0.5), (128, 0.0), (256, 1.5)]),
)
def test_hashing_vectors_are_exactly_the_documented_algorithms(
    texts: list[str], shape: tuple[int, float]
) -> None:
    dim, bw = shape
    assert np.array_equal(
        HashingEmbedder(dim, bigram_weight=bw).embed(texts), _reference_hashing(texts, dim, bw)
    )
