"""Embedders: a fast local hashing embedder and two optional model-backed ones.

``HashingEmbedder`` needs only numpy and no network (the default). ``LiteLLMEmbedder``
calls any provider litellm supports; ``SentenceTransformerEmbedder`` runs a local
sentence-transformers model (the ``st`` extra). Both import their library lazily, on first
use, so ``import memoryos_actors`` stays light.
"""

from __future__ import annotations

import hashlib
import math
import os
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from memoryos_actors import smallvec
from memoryos_actors.errors import ConfigError, GatewayError, InvalidInput, ProviderConfigError
from memoryos_actors.gateway.base import Embedder, ProviderCallError, cfg
from memoryos_actors.prerequisites import install_hint
from memoryos_actors.text import tokenize

__all__ = [
    "KNOWN_MODEL_SHA256",
    "MINILM_L6_V2_SHA256",
    "HashingEmbedder",
    "LiteLLMEmbedder",
    "ModelIntegrityError",
    "SentenceTransformerEmbedder",
    "file_sha256",
    "make_embedder",
    "verify_model_dir",
]

MINILM_L6_V2_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
"""sha256 of ``model.safetensors`` of the official sentence-transformers/all-MiniLM-L6-v2."""

KNOWN_MODEL_SHA256: dict[str, str] = {"all-MiniLM-L6-v2": MINILM_L6_V2_SHA256}
"""Expected ``model.safetensors`` digests of models known by directory name."""

_WEIGHTS_FILE = "model.safetensors"


class ModelIntegrityError(ConfigError):
    """A local model's weights are missing or do not match the expected sha256."""


def file_sha256(path: str | os.PathLike[str], chunk: int = 1 << 20) -> str:
    """Hex sha256 of a file, read in ``chunk``-byte pieces."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def verify_model_dir(
    model_dir: str | os.PathLike[str], expected_sha256: str | None = None
) -> str | None:
    """Check a local model directory before anything loads it.

    The expected digest is ``expected_sha256``, else the one :data:`KNOWN_MODEL_SHA256`
    lists for the directory's name. When there is one, ``model.safetensors`` must exist and
    match it; returns the verified digest (``None`` when nothing was known to check).

    Raises:
        ModelIntegrityError: the directory or its weights are missing, or the digest differs.
    """
    path = os.fspath(model_dir)
    if not os.path.isdir(path):
        raise ModelIntegrityError(f"embedding_model {path!r} is not a directory")
    expected = expected_sha256
    if expected is None:
        expected = KNOWN_MODEL_SHA256.get(os.path.basename(path.rstrip(os.sep)))
    if expected is None:
        return None
    weights = os.path.join(path, _WEIGHTS_FILE)
    if not os.path.isfile(weights):
        raise ModelIntegrityError(
            f"{weights}: missing; a sha256 is expected for this model, so only a "
            f"{_WEIGHTS_FILE} file is loaded"
        )
    actual = file_sha256(weights)
    if actual != expected.lower():
        raise ModelIntegrityError(
            f"{weights}: sha256 {actual} does not match the expected {expected.lower()}; "
            "refusing to load these weights"
        )
    return actual


# Stands in for a text with no tokens, so even "" gets a deterministic unit vector.
_EMPTY_TOKEN = "\x00empty"
_HASH_CACHE_MAX = 200_000


class HashingEmbedder:
    """Signed feature hashing of word unigrams and bigrams; numpy only, deterministic.

    Each feature (a token, or two adjacent tokens joined by a space) is hashed with
    BLAKE2b (stable across processes, unlike ``hash()``); the hash picks a column and a
    sign. Term frequencies are dampened to ``1 + log(tf)`` and rows are L2-normalised.
    ``dim`` is the vector length (columns). Token hashes are cached (bounded) because
    conversation vocabularies repeat heavily.
    """

    def __init__(self, dim: int = 512, *, bigram_weight: float = 0.5) -> None:
        if not isinstance(dim, int) or dim < 8:
            raise ConfigError(f"embedding_dim must be an int >= 8, got {dim!r}")
        self.dim = dim
        self.name = f"hashing-v1-{dim}"
        self._bigram_weight = float(bigram_weight)
        self._cache: dict[str, tuple[int, float]] = {}
        self._cache_lock = threading.Lock()

    def _hash(self, feature: str) -> int:
        return int.from_bytes(
            hashlib.blake2b(feature.encode("utf-8"), digest_size=8).digest(), "little"
        )

    def _slot(self, feature: str) -> tuple[int, float]:
        """The column and sign of ``feature`` (cached)."""
        slot = self._cache.get(feature)
        if slot is None:
            h = self._hash(feature)
            slot = (h % self.dim, -1.0 if (h >> 63) & 1 else 1.0)
            with self._cache_lock:
                if len(self._cache) >= _HASH_CACHE_MAX:
                    self._cache.clear()  # cheap bound; the vocabulary refills quickly
                self._cache[feature] = slot
        return slot

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts`` into an ``(n, dim)`` float32 array of unit rows."""
        if isinstance(texts, str):
            raise InvalidInput("embed() takes a sequence of texts, not a single string")
        n = len(texts)
        dim = self.dim
        if n == 0:
            return np.zeros((n, dim), dtype=np.float32)
        # Each row's signed feature weights summed per column (float64) in the order the
        # features are met, then stored as float32: the same bits as one np.bincount over
        # all rows and a cast, without numpy's loops over every column of every row, which
        # let go of the interpreter lock (see memoryos_actors.smallvec) for a few
        # microseconds of work.
        out = smallvec.zeros((n, dim), np.float32)
        for row, text in enumerate(texts):
            if not isinstance(text, str):
                raise InvalidInput(f"texts[{row}] is {type(text).__name__}, not str")
            sums = self._column_sums(text)
            # np.put on the row: a fancy assignment would let go of the lock to cast.
            np.put(
                out[row],
                np.fromiter(sums, dtype=np.intp, count=len(sums)),
                np.fromiter(sums.values(), dtype=np.float64, count=len(sums)),
            )
        norms = np.sqrt(np.einsum("ij,ij->i", out, out))
        # A row can cancel to zero only by an astronomically unlikely collision pattern;
        # fall back to the empty-text vector so every row stays a unit vector.
        for row in range(n):
            norm = float(norms[row])
            if norm == 0:
                smallvec.set_row(out, row, self._empty_row())
            else:
                smallvec.divide_into(out[row], norm)
        return out

    def _column_sums(self, text: str) -> dict[int, float]:
        """Column -> summed signed weight of ``text``'s features (float64), each column's
        weights added in the order its features are met."""
        cache = self._cache
        slot_of = self._slot
        bw = self._bigram_weight
        log = math.log
        toks = tokenize(text) or [_EMPTY_TOKEN]
        # Each distinct feature once, in first-seen order, with a dampened term frequency
        # (1 + log tf; exactly 1.0 for tf 1), before features that collide are folded into
        # the same column. Unigrams and bigrams never share a feature string (a bigram has
        # a space, a token never does). Plain dicts count faster than Counter for a
        # sentence's few tokens.
        unigrams: dict[str, int] = {}
        for tok in toks:
            unigrams[tok] = unigrams.get(tok, 0) + 1
        bigrams: dict[str, int] = {}
        before = toks[0]
        for tok in toks[1:]:
            gram = before + " " + tok
            bigrams[gram] = bigrams.get(gram, 0) + 1
            before = tok
        sums: dict[int, float] = {}
        for feature, tf in unigrams.items():
            col, sign = cache.get(feature) or slot_of(feature)
            sums[col] = sums.get(col, 0.0) + (sign if tf == 1 else sign * (1.0 + log(tf)))
        for feature, tf in bigrams.items():
            col, sign = cache.get(feature) or slot_of(feature)
            sums[col] = sums.get(col, 0.0) + sign * (bw if tf == 1 else bw * (1.0 + log(tf)))
        return sums

    def _empty_row(self) -> np.ndarray:
        h = self._hash(_EMPTY_TOKEN)
        row = np.zeros(self.dim, dtype=np.float32)
        row[h % self.dim] = -1.0 if (h >> 63) & 1 else 1.0
        return row

    def __repr__(self) -> str:
        return f"HashingEmbedder(dim={self.dim})"


def _normalise(mat: np.ndarray) -> np.ndarray:
    mat = np.asarray(mat, dtype=np.float32)
    if mat.ndim != 2:
        raise GatewayError(f"embedder returned an array of shape {mat.shape}, expected 2-D")
    norms = np.linalg.norm(mat, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return mat / norms


class _TruthyZero(int):
    """The integer 0 that is truthy.

    litellm's OpenAI embedding path does ``max_retries or DEFAULT_MAX_RETRIES``, which turns
    an explicit 0 into its default of 2 retries inside the OpenAI client; those hidden
    retries would defeat the gateway's own retry, breaker and latency accounting. A truthy
    zero passes through that ``or`` unchanged and still means "no retries" to the client,
    without changing any litellm global.
    """

    def __bool__(self) -> bool:
        return True


_NO_RETRIES = _TruthyZero(0)


class LiteLLMEmbedder:
    """Embeddings from any provider litellm supports (``litellm.embedding``).

    ``model`` is litellm's model name (e.g. ``"openai/text-embedding-3-small"``),
    ``api_base`` an optional base URL, ``api_key_env`` the name of the environment variable
    holding the key (read at each call, never stored), ``timeout`` seconds per call. ``dim``
    is learned from the first answer when not given. Failures raise
    :class:`ProviderCallError` (the gateway service retries them).
    """

    def __init__(
        self,
        model: str,
        *,
        api_base: str | None = None,
        api_key_env: str | None = None,
        timeout: float = 30.0,
        dim: int | None = None,
    ) -> None:
        if not model:
            raise ConfigError("embedding_model must be set for the litellm embedder")
        self.model = model
        self.api_base = api_base
        self.api_key_env = api_key_env
        self.timeout = float(timeout)
        self.name = f"litellm:{model}"
        self._dim = dim

    @property
    def dim(self) -> int:
        """Vector length; asks the provider once (embedding a probe text) when unknown."""
        if self._dim is None:
            self._dim = int(self.embed(["dimension probe"]).shape[1])
        return self._dim

    def config_error(self, exc: ProviderCallError) -> ProviderConfigError:
        """The typed error for a configuration-class failure of this embedder's calls."""
        from memoryos_actors.gateway.failures import config_error

        return config_error(
            exc,
            model=self.model,
            api_base=self.api_base,
            api_key_env=self.api_key_env,
            setting="embedding_model",
        )

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts`` with one provider call; rows are re-normalised to unit length."""
        if len(texts) == 0:
            return np.zeros((0, self._dim or 0), dtype=np.float32)
        from memoryos_actors.gateway.failures import classify_error
        from memoryos_actors.gateway.litellm_backend import import_litellm

        litellm = import_litellm()
        kwargs: dict[str, Any] = {
            "model": self.model,
            "input": list(texts),
            "timeout": self.timeout,
            "max_retries": _NO_RETRIES,
        }
        if self.api_base:
            kwargs["api_base"] = self.api_base
        if self.api_key_env:
            kwargs["api_key"] = os.environ.get(self.api_key_env, "")
        try:
            resp = litellm.embedding(**kwargs)
        except Exception as exc:  # noqa: BLE001 - every provider error is classified
            key = kwargs.get("api_key")
            raise classify_error(exc, [key] if key else None) from None
        try:
            items = sorted(resp.data, key=lambda d: _get(d, "index"))
            mat = np.array([_get(d, "embedding") for d in items], dtype=np.float32)
        except Exception:  # noqa: BLE001 - a malformed body is a retryable provider fault
            raise ProviderCallError(
                "embedding answer was malformed", category="malformed"
            ) from None
        if mat.shape[0] != len(texts):
            raise ProviderCallError(
                f"provider returned {mat.shape[0]} embeddings for {len(texts)} texts",
                category="malformed",
            )
        if self._dim is None:
            self._dim = int(mat.shape[1])
        elif mat.shape[1] != self._dim:
            raise GatewayError(f"provider returned dim {mat.shape[1]}, expected {self._dim}")
        return _normalise(mat)


def _get(obj: Any, key: str) -> Any:
    return obj[key] if isinstance(obj, dict) else getattr(obj, key)


class SentenceTransformerEmbedder:
    """A local sentence-transformers model (install the ``st`` extra).

    ``model`` is a local model directory (or a model name already in the local cache);
    nothing is downloaded. A directory's ``model.safetensors`` is checked with
    :func:`verify_model_dir` before it is loaded (against ``expected_sha256``, or the
    known digest of a model of that directory name) and a mismatch raises
    :class:`ModelIntegrityError`. ``device`` is passed through (e.g. ``"cpu"``).

    ``num_threads`` (>= 1) sets torch's CPU thread count, for the whole process, before the
    model loads; ``None`` leaves torch as it is (by default one thread per core). This
    embedder is called from the memory system's own threads, one page at a time: torch's
    threads then compete with them for the cores, and on a small loaded machine one thread
    is several times faster per page than one per core (measured in ``bench/README.md``).
    """

    def __init__(
        self,
        model: str,
        *,
        device: str | None = None,
        expected_sha256: str | None = None,
        num_threads: int | None = None,
    ) -> None:
        if not model:
            raise ConfigError("embedding_model must be set for sentence-transformers")
        if num_threads is not None and (not isinstance(num_threads, int) or num_threads < 1):
            raise ConfigError(f"num_threads must be an int >= 1 or None, got {num_threads!r}")
        self.sha256: str | None = None
        if os.path.isdir(model) or expected_sha256 is not None:
            self.sha256 = verify_model_dir(model, expected_sha256)
        try:
            from sentence_transformers import SentenceTransformer  # type: ignore[import-not-found]
        except ImportError as exc:
            raise ConfigError(
                f"embedder='sentence-transformers' needs the 'st' extra: {install_hint('st')}"
            ) from exc
        if num_threads is not None:
            _set_torch_threads(num_threads)
        kwargs: dict[str, Any] = {"device": device}
        if os.path.isdir(model):
            kwargs["local_files_only"] = True
        try:
            self._model = SentenceTransformer(model, **kwargs)
        except TypeError:  # older sentence-transformers without local_files_only
            kwargs.pop("local_files_only", None)
            self._model = SentenceTransformer(model, **kwargs)
        get_dim = (
            getattr(self._model, "get_embedding_dimension", None)
            or self._model.get_sentence_embedding_dimension
        )
        dim = get_dim()
        if dim is None:
            dim = int(self._model.encode(["dimension probe"]).shape[1])
        self.dim = int(dim)
        self.name = f"st:{os.path.basename(model.rstrip('/')) or model}"
        self._lock = threading.Lock()  # torch modules are not safe to call concurrently

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts`` locally; rows are L2-normalised float32."""
        if len(texts) == 0:
            return np.zeros((0, self.dim), dtype=np.float32)
        with self._lock:
            mat = self._model.encode(list(texts), convert_to_numpy=True, normalize_embeddings=True)
        return _normalise(mat)


def _set_torch_threads(n: int) -> None:
    """Set torch's intra-op CPU threads to ``n`` (process-wide)."""
    import torch  # type: ignore[import-not-found]  # installed with sentence-transformers

    if torch.get_num_threads() != n:
        torch.set_num_threads(n)


def make_embedder(config: Any) -> Embedder:
    """Build the embedder named by ``config.embedder`` (``hashing`` when config is None)."""
    kind = cfg(config, "embedder", "hashing")
    if kind == "hashing":
        return HashingEmbedder(int(cfg(config, "embedding_dim", 512)))
    if kind == "litellm":
        return LiteLLMEmbedder(
            cfg(config, "embedding_model", None) or "",
            api_base=cfg(config, "llm_base_url", None),
            api_key_env=cfg(config, "llm_api_key_env", None),
            timeout=float(cfg(config, "llm_timeout_seconds", 30.0)),
        )
    if kind == "sentence-transformers":
        return SentenceTransformerEmbedder(
            cfg(config, "embedding_model", None) or "",
            expected_sha256=cfg(config, "embedding_sha256", None),
            num_threads=cfg(config, "embedding_threads", 1),
        )
    raise ConfigError(f"embedder must be hashing, litellm or sentence-transformers, got {kind!r}")
