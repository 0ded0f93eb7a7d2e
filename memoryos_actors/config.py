"""``MemoryConfig``: every hyperparameter of memoryos-actors, with the paper's defaults.

A config is a frozen dataclass validated when built (:class:`~memoryos_actors.errors.ConfigError`
names the offending field). Sources, later ones winning: the defaults, a TOML file
(:meth:`MemoryConfig.from_toml`), then ``MEMORYOS_<FIELD>`` environment variables
(:meth:`MemoryConfig.from_env`); :func:`load` applies them in that order.

Environment values are parsed by the field's type: booleans accept ``true/false/1/0/yes/no``
(any case); optional fields take ``""`` or ``none`` for None. Unknown keys in a TOML file and
unknown ``MEMORYOS_*`` variables are errors, so a typo never goes unnoticed. The few
``MEMORYOS_*`` variables that are not config fields are listed in :data:`OTHER_ENV_VARS`
and skipped.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import tomllib
import types
import typing
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal

from memoryos_actors.errors import ConfigError

__all__ = [
    "DATA_DIR_ENV",
    "ENV_PREFIX",
    "FINGERPRINT_FIELDS",
    "KEYS_FILE_ENV",
    "MTMRules",
    "MemoryConfig",
    "OTHER_ENV_VARS",
    "from_env",
    "from_toml",
    "load",
    "parse_settings",
]

ENV_PREFIX = "MEMORYOS_"

DATA_DIR_ENV = "MEMORYOS_DATA_DIR"
"""Environment variable naming the ``memoryos`` command's data directory (after
``--data-dir``, before ``./memoryos-data``). The library itself always takes the data
directory as an argument of :meth:`MemoryOS.open`."""

KEYS_FILE_ENV = "MEMORYOS_KEYS_FILE"
"""Environment variable naming the server's API key file (after ``--keys-file``, before
``<data-dir>/server-keys.json``)."""

OTHER_ENV_VARS: Mapping[str, str] = MappingProxyType(
    {
        DATA_DIR_ENV: "data directory of the `memoryos` command (after `--data-dir`, before "
        "`./memoryos-data`)",
        "MEMORYOS_TENANT": "tenant whose user ids the `memoryos` command reads and writes (`--tenant`)",
        KEYS_FILE_ENV: "API key file of `memoryos serve`, `mcp`, `keys` and `doctor` (after `--keys-file`, "
        "before `<data-dir>/server-keys.json`)",
        "MEMORYOS_LOCOMO_PATH": "LoCoMo data file of `bench/locomo.py` (after `--data`)",
        "MEMORYOS_LONGMEMEVAL_PATH": "LongMemEval data file of `bench/longmemeval.py` and "
        "`bench/retrieve_bench.py` (after `--data`)",
        "MEMORYOS_MINILM_DIR": "folder of the all-MiniLM-L6-v2 weights for the benchmarks' "
        "`--embedder minilm` (after `--model-dir`)",
    }
)
"""Every ``MEMORYOS_*`` environment variable that is not a config field (name -> what it
sets): the one table of them. :meth:`MemoryConfig.from_env` skips these instead of calling
them unknown, and the table of environment variables in ``docs/configuration.md`` is
generated from it (with one row for the ``MEMORYOS_<FIELD>`` variables of the config fields)."""

RetrievalMode = Literal["paper", "hybrid"]
EmbedderName = Literal["hashing", "litellm", "sentence-transformers"]
LLMBackendName = Literal["offline", "litellm"]
LLMClientName = Literal["auto", "http", "litellm"]
JSONMode = Literal["auto", "on", "off"]
FsyncMode = Literal["always", "interval", "never"]
LogFormat = Literal["console", "json"]
LogLevel = Literal["debug", "info", "warning", "error", "critical"]

# Fields whose change makes existing stored data mean something else (another embedding
# space, other segment boundaries, other FIFO bounds). The store records the fingerprint of
# these so a changed setting on an old data directory is noticed.
FINGERPRINT_FIELDS: tuple[str, ...] = (
    "embedder",
    "embedding_dim",
    "embedding_model",
    "stm_capacity",
    "mtm_capacity",
    "segment_max_pages",
    "fscore_threshold",
    "kb_capacity",
    "agent_traits_capacity",
    "chain_affinity",
    "shared_agent_persona",
    "segment_keyword_limit",
    "paper_exact",
)

# Fields added to FINGERPRINT_FIELDS later: they enter the fingerprint only when they differ
# from their default, so data directories written before them keep their fingerprint.
_FINGERPRINT_IF_CHANGED = frozenset({"segment_keyword_limit", "paper_exact"})


def _f(default: Any, doc: str) -> Any:
    return field(default=default, metadata={"doc": doc})


@dataclass(frozen=True, slots=True)
class MemoryConfig:
    """All settings of a memory system; immutable. Change with :meth:`evolve`.

    Times are in seconds unless the name says otherwise (``*_ms``); capacities count
    pages, segments or entries as named.
    """

    stm_capacity: int = _f(7, "pages in STM")
    mtm_capacity: int = _f(200, "segments in MTM before eviction")
    segment_max_pages: int = _f(64, "pages one segment holds; older pages go to the archive")
    fscore_threshold: float = _f(0.6, "θ: join a segment when F_score > θ")
    chain_affinity: bool = _f(
        True, "a page continuing a dialogue chain joins the chain's segment (if not full)"
    )
    segment_keyword_limit: int = _f(
        24, "most frequent page keywords kept in a segment's K_s; 0 = all (their union)"
    )
    heat_alpha: float = _f(1.0, "α, heat weight of N_visit (retrievals)")
    heat_beta: float = _f(1.0, "β, heat weight of L_interaction (pages since promotion)")
    heat_gamma: float = _f(1.0, "γ, heat weight of recency")
    recency_mu: float = _f(1e7, "μ, recency decay constant, seconds")
    promotion_threshold: float = _f(5.0, "τ: promote a segment to LPM when heat > τ")
    promotion_needs_new_page: bool = _f(
        True, "promote only a segment that gathered a page since its last promotion"
    )
    promote_on_retrieval: bool = _f(
        False, "check promotion after a retrieval raises heat too (else on insert and tick)"
    )
    heat_tick_seconds: float = _f(60.0, "period of the heat tick, seconds")
    top_m_segments: int = _f(5, "retrieval stage 1: segments")
    top_k_pages: int = _f(10, "retrieval stage 2: pages")
    kb_capacity: int = _f(100, "user knowledge-base facts kept (FIFO)")
    agent_traits_capacity: int = _f(100, "agent traits kept per assistant (FIFO)")
    kb_top_k: int = _f(10, "knowledge-base facts retrieved")
    agent_traits_top_k: int = _f(10, "agent traits retrieved")
    retrieval_mode: RetrievalMode = _f("hybrid", '"paper" (two-stage only) or "hybrid"')
    rerank: bool = _f(
        False,
        "reorder retrieval's best rerank_candidates pages by the configured LLM and keep "
        "top_k_pages of them (one LLM call per retrieve; for real providers)",
    )
    rerank_candidates: int = _f(20, "with rerank: past pages retrieved for the LLM to reorder")
    cold_tier: bool = _f(
        True, 'hybrid retrieval also searches the archive (the cold tier); "paper" never does'
    )
    paper_exact: bool = _f(
        False,
        'with retrieval_mode "paper": exact F_score over all segments, promotion '
        "after retrievals, every extension off",
    )
    shared_agent_persona: bool = _f(
        False, "one agent persona per assistant, shared by all its users (else per user)"
    )
    summary_debounce_seconds: float = _f(1.0, "segment summary refresh debounce, seconds")
    summary_every_pages: int = _f(6, "new pages in a segment before its summary is refreshed")
    persona_debounce_seconds: float = _f(
        5.0, "promoted segments gathered into one persona update for, seconds"
    )
    embedder: EmbedderName = _f("hashing", '"hashing", "litellm" or "sentence-transformers"')
    embedding_dim: int = _f(512, "hashing embedder dimension")
    embedding_model: str | None = _f(None, "model name/path for litellm or sentence-transformers")
    embedding_sha256: str | None = _f(
        None, "sentence-transformers: expected sha256 of the model directory's model.safetensors"
    )
    embedding_threads: int | None = _f(
        1,
        "sentence-transformers: torch CPU threads, set process-wide when the model loads; "
        "None = torch's default (one per core)",
    )
    llm_backend: LLMBackendName = _f("offline", '"offline" or "litellm"')
    llm_model: str | None = _f(None, "litellm model name")
    llm_base_url: str | None = _f(None, "litellm base URL")
    llm_api_key_env: str | None = _f(None, "name of the environment variable holding the API key")
    llm_timeout_seconds: float = _f(30.0, "per LLM call, seconds")
    llm_max_retries: int = _f(3, "retries per LLM call")
    llm_max_concurrency: int = _f(
        16, "provider calls in flight at once (the provider's limit, not a thread count)"
    )
    llm_requests_per_minute: int | None = _f(None, "provider request limit; None = unlimited")
    llm_tokens_per_minute: int | None = _f(None, "provider token limit; None = unlimited")
    llm_client: LLMClientName = _f(
        "auto",
        '"auto" (plain HTTP for openai/ models, litellm otherwise), "http" or "litellm"',
    )
    llm_json_mode: JSONMode = _f(
        "auto", '"auto" (ask for JSON when the provider supports it), "on" or "off"'
    )
    llm_validation_retries: int = _f(
        2, "asks again after an answer that fails validation (not a provider outage)"
    )
    meta_batch_max_pages: int = _f(
        8, "pages of one user whose chain meta may be asked for in one LLM call"
    )
    meta_batch_catchup_pages: int = _f(
        24,
        "pages of one user whose chain meta one LLM call may ask for while pages pushed "
        "out of STM wait for theirs (a user behind a slow provider catches up); "
        "a real provider reads and writes that many pages in one call; "
        "<= meta_batch_max_pages: never more than that",
    )
    breaker_failure_threshold: int = _f(5, "consecutive failures to open the circuit breaker")
    breaker_reset_seconds: float = _f(30.0, "circuit breaker open -> half-open, seconds")
    cache_size: int = _f(4096, "LRU cache entries")
    embed_coalesce_ms: float = _f(2.0, "window to batch embedding requests, milliseconds")
    gateway_workers: int = _f(
        2, "gateway worker actors: their backlog slots bound the jobs in flight (not a call limit)"
    )
    retrieval_workers: int = _f(4, "retrieval actors (retrievals served in parallel)")
    fsync: FsyncMode = _f("interval", '"always", "interval" or "never"')
    fsync_interval_seconds: float = _f(0.1, "WAL flush period in interval mode, seconds")
    snapshot_every_turns: int = _f(500, "snapshot period per user, turns")
    archive_enabled: bool = _f(True, "keep evicted segments in an append-only archive")
    max_text_bytes: int = _f(65536, "per query/response, UTF-8 bytes")
    max_active_users: int = _f(500, "live user groups")
    idle_timeout_seconds: float = _f(300.0, "passivate an idle user group after, seconds")
    max_inflight_per_user: int = _f(64, "requests in flight per user")
    max_inflight_total: int = _f(4096, "requests in flight overall")
    placement_backlog_seconds: float = _f(
        0.5,
        "placement work a user's queue admits, and all users' queues together, seconds "
        "(what a flush waits under a flood)",
    )
    overload_timeout_seconds: float = _f(
        5.0, "how long a wait for capacity may see no progress before Overloaded, seconds"
    )
    log_format: LogFormat = _f("console", '"console" or "json"')
    log_level: LogLevel = _f("warning", "debug, info, warning, error or critical")
    seed: int = _f(0, "seed of all randomness (hnswlib)")

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            value = _check_type(f.name, getattr(self, f.name))
            # Frozen: normalised values (int -> float, lower-cased enums) go in directly.
            object.__setattr__(self, f.name, value)
        self._check_ranges()

    def _check_ranges(self) -> None:
        positive_int = (
            "stm_capacity",
            "mtm_capacity",
            "segment_max_pages",
            "top_m_segments",
            "top_k_pages",
            "kb_capacity",
            "agent_traits_capacity",
            "embedding_dim",
            "llm_max_concurrency",
            "breaker_failure_threshold",
            "gateway_workers",
            "retrieval_workers",
            "meta_batch_max_pages",
            "meta_batch_catchup_pages",
            "snapshot_every_turns",
            "max_text_bytes",
            "max_active_users",
            "max_inflight_per_user",
            "max_inflight_total",
            "summary_every_pages",
            "rerank_candidates",
        )
        for name in positive_int:
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be >= 1, got {getattr(self, name)!r}")
        non_negative_int = (
            "kb_top_k",
            "agent_traits_top_k",
            "llm_max_retries",
            "cache_size",
            "seed",
            "llm_validation_retries",
            "segment_keyword_limit",
        )
        for name in non_negative_int:
            if getattr(self, name) < 0:
                raise ConfigError(f"{name} must be >= 0, got {getattr(self, name)!r}")
        if self.meta_batch_catchup_pages > 100:
            # The most entries a page_meta_batch answer may hold (gateway/prompts.py).
            raise ConfigError(
                f"meta_batch_catchup_pages must be <= 100, got {self.meta_batch_catchup_pages!r}"
            )
        if self.seed > 2**32 - 1:
            raise ConfigError(f"seed must be < 2**32, got {self.seed!r}")
        for name in ("llm_requests_per_minute", "llm_tokens_per_minute"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ConfigError(f"{name} must be >= 1 or None (unlimited), got {value!r}")
        positive_float = (
            "recency_mu",
            "heat_tick_seconds",
            "llm_timeout_seconds",
            "breaker_reset_seconds",
            "fsync_interval_seconds",
            "idle_timeout_seconds",
            "placement_backlog_seconds",
        )
        for name in positive_float:
            if getattr(self, name) <= 0:
                raise ConfigError(f"{name} must be > 0, got {getattr(self, name)!r}")
        non_negative_float = (
            "heat_alpha",
            "heat_beta",
            "heat_gamma",
            "promotion_threshold",
            "summary_debounce_seconds",
            "embed_coalesce_ms",
            "overload_timeout_seconds",
            "persona_debounce_seconds",
        )
        for name in non_negative_float:
            if getattr(self, name) < 0:
                raise ConfigError(f"{name} must be >= 0, got {getattr(self, name)!r}")
        # cos is in [-1, 1] and Jaccard in [0, 1]: a θ outside [-1, 2] makes joining
        # either impossible or unconditional, which is never what was meant.
        if not -1.0 <= self.fscore_threshold <= 2.0:
            raise ConfigError(f"fscore_threshold must be in [-1, 2], got {self.fscore_threshold!r}")
        if self.paper_exact and self.retrieval_mode != "paper":
            raise ConfigError(
                f"paper_exact needs retrieval_mode='paper', got {self.retrieval_mode!r}"
            )
        if self.embedder in ("litellm", "sentence-transformers") and not self.embedding_model:
            raise ConfigError(f"embedding_model is required when embedder is {self.embedder!r}")
        if self.llm_backend == "litellm" and not self.llm_model:
            raise ConfigError("llm_model is required when llm_backend is 'litellm'")
        for name in ("embedding_model", "llm_model", "llm_base_url", "llm_api_key_env"):
            value = getattr(self, name)
            if value is not None and not value.strip():
                raise ConfigError(f"{name} must be a non-empty string or None")
        if self.embedding_threads is not None and self.embedding_threads < 1:
            raise ConfigError(
                f"embedding_threads must be >= 1 or None, got {self.embedding_threads!r}"
            )
        digest = self.embedding_sha256
        if digest is not None and not (
            len(digest) == 64 and all(c in "0123456789abcdef" for c in digest.lower())
        ):
            raise ConfigError(f"embedding_sha256 must be 64 hex digits or None, got {digest!r}")

    # ----------------------------------------------------------------- construction

    def evolve(self, **changes: Any) -> MemoryConfig:
        """Return a copy with ``changes`` applied (validated); unknown names are a ConfigError."""
        unknown = sorted(set(changes) - _FIELD_NAMES)
        if unknown:
            raise ConfigError(f"unknown config field(s): {', '.join(unknown)}")
        return dataclasses.replace(self, **changes)

    @classmethod
    def from_mapping(
        cls, values: Mapping[str, Any], base: MemoryConfig | None = None
    ) -> MemoryConfig:
        """Build a config from ``values`` (field name -> value) on top of ``base`` (defaults)."""
        base = base if base is not None else cls()
        return base.evolve(**dict(values))

    @classmethod
    def from_toml(
        cls, path: str | os.PathLike[str], base: MemoryConfig | None = None
    ) -> MemoryConfig:
        """Read settings from a TOML file, on top of ``base`` (defaults).

        Keys are field names, at the top level or inside a ``[memoryos]`` table. TOML has no
        null: leave an optional field out to keep it None.
        """
        p = Path(path)
        try:
            with p.open("rb") as fh:
                data = tomllib.load(fh)
        except OSError as exc:
            raise ConfigError(f"cannot read config file {p}: {exc}") from exc
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"invalid TOML in {p}: {exc}") from exc
        if set(data) == {"memoryos"} and isinstance(data["memoryos"], dict):
            data = data["memoryos"]
        nested = sorted(k for k, v in data.items() if isinstance(v, dict))
        unknown = sorted(set(data) - _FIELD_NAMES)
        if unknown:
            raise ConfigError(f"unknown key(s) in {p}: {', '.join(unknown)}")
        if nested:
            raise ConfigError(f"{nested[0]} must be a value, not a table, in {p}")
        return cls.from_mapping(data, base)

    @classmethod
    def from_env(
        cls, environ: Mapping[str, str] | None = None, base: MemoryConfig | None = None
    ) -> MemoryConfig:
        """Apply ``MEMORYOS_<FIELD>`` variables of ``environ`` (default ``os.environ``) to ``base``.

        Any other variable starting with ``MEMORYOS_``, except those of
        :data:`OTHER_ENV_VARS`, is a ConfigError naming it.
        """
        env = os.environ if environ is None else environ
        changes: dict[str, Any] = {}
        unknown: list[str] = []
        for key, raw in env.items():
            if not key.startswith(ENV_PREFIX) or key in OTHER_ENV_VARS:
                continue
            name = key[len(ENV_PREFIX) :].lower()
            if name not in _FIELD_NAMES:
                unknown.append(key)
                continue
            changes[name] = _parse_env(name, raw, key)
        if unknown:
            raise ConfigError(f"unknown environment variable(s): {', '.join(sorted(unknown))}")
        return cls.from_mapping(changes, base)

    @classmethod
    def load(
        cls,
        path: str | os.PathLike[str] | None = None,
        env: bool | Mapping[str, str] = True,
    ) -> MemoryConfig:
        """Defaults, then the TOML file at ``path`` (if given), then the environment.

        ``env`` is True (read ``os.environ``), False (ignore the environment) or a mapping
        to read instead.
        """
        cfg = cls() if path is None else cls.from_toml(path)
        if env is False:
            return cfg
        return cls.from_env(None if env is True else env, base=cfg)

    # ----------------------------------------------------------------- inspection

    def mtm_rules(self) -> MTMRules:
        """The MTM rules this config asks for: the extension settings, or the paper's rules
        when :attr:`paper_exact` is set (which overrides them all)."""
        if self.paper_exact:
            return MTMRules(
                exact_segment_scoring=True,
                promote_on_retrieval=True,
                promotion_needs_new_page=False,
                chain_affinity=False,
                segment_max_pages=None,
                segment_keyword_limit=None,
            )
        return MTMRules(
            exact_segment_scoring=False,
            promote_on_retrieval=self.promote_on_retrieval,
            promotion_needs_new_page=self.promotion_needs_new_page,
            chain_affinity=self.chain_affinity,
            segment_max_pages=self.segment_max_pages,
            segment_keyword_limit=self.segment_keyword_limit or None,
        )

    def fingerprint(self) -> str:
        """A short hex hash of :data:`FINGERPRINT_FIELDS`, the settings that shape stored data."""
        payload = {
            name: getattr(self, name)
            for name in FINGERPRINT_FIELDS
            if name not in _FINGERPRINT_IF_CHANGED or getattr(self, name) != _DEFAULTS[name]
        }
        blob = json.dumps(payload, sort_keys=True, separators=(",", ":")).encode("utf-8")
        return hashlib.sha256(blob).hexdigest()[:16]

    def to_dict(self) -> dict[str, Any]:
        """All fields as a plain dict (msgpack/JSON friendly)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    @classmethod
    def describe(cls) -> list[tuple[str, Any, str]]:
        """``(field, default, meaning)`` for every field, in declaration order."""
        return [(f.name, f.default, f.metadata["doc"]) for f in dataclasses.fields(cls)]


@dataclass(frozen=True, slots=True)
class MTMRules:
    """How MTM places, scores and promotes, as resolved by :meth:`MemoryConfig.mtm_rules`.

    Attributes:
        exact_segment_scoring: F_score every segment; else, above 64 segments, only the
            32 (or ``4·n``) nearest by cosine in the hnswlib index are scored.
        promote_on_retrieval: check promotion right after a retrieval raised heat.
        promotion_needs_new_page: promote only segments that gained a page since their
            last promotion.
        chain_affinity: a page continuing a dialogue chain joins the chain's segment.
        segment_max_pages: pages a segment holds (older go to the archive); None: no bound.
        segment_keyword_limit: most frequent page keywords in K_s; None: all (the union).
    """

    exact_segment_scoring: bool
    promote_on_retrieval: bool
    promotion_needs_new_page: bool
    chain_affinity: bool
    segment_max_pages: int | None
    segment_keyword_limit: int | None


_FIELD_NAMES: frozenset[str] = frozenset(f.name for f in dataclasses.fields(MemoryConfig))
_DEFAULTS: dict[str, Any] = {f.name: f.default for f in dataclasses.fields(MemoryConfig)}
_HINTS: dict[str, Any] = typing.get_type_hints(MemoryConfig)


def _split_optional(tp: Any) -> tuple[Any, bool]:
    """(inner type, is_optional) for ``X | None``."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        return args[0], True
    return tp, False


def _check_type(name: str, value: Any) -> Any:
    tp, optional = _split_optional(_HINTS[name])
    if value is None:
        if optional:
            return None
        raise ConfigError(f"{name} must not be None")
    if typing.get_origin(tp) is Literal:
        choices = typing.get_args(tp)
        if isinstance(value, str) and value.lower() in choices:
            return value.lower()
        raise ConfigError(f"{name} must be one of {', '.join(map(repr, choices))}, got {value!r}")
    if tp is bool:
        if isinstance(value, bool):
            return value
        raise ConfigError(f"{name} must be a bool, got {type(value).__name__}")
    if tp is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        raise ConfigError(f"{name} must be an int, got {type(value).__name__} {value!r}")
    if tp is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            value = float(value)
            if not math.isfinite(value):
                raise ConfigError(f"{name} must be finite, got {value!r}")
            return value
        raise ConfigError(f"{name} must be a number, got {type(value).__name__} {value!r}")
    if tp is str:
        if isinstance(value, str):
            return value
        raise ConfigError(f"{name} must be a string, got {type(value).__name__}")
    raise AssertionError(f"unhandled config type {tp!r} for {name}")  # pragma: no cover


_TRUE = frozenset({"true", "1", "yes", "on"})
_FALSE = frozenset({"false", "0", "no", "off"})


def _parse_env(name: str, raw: str, key: str) -> Any:
    tp, optional = _split_optional(_HINTS[name])
    text = raw.strip()
    if optional and text.lower() in ("", "none"):
        return None
    if tp is bool:
        if text.lower() in _TRUE:
            return True
        if text.lower() in _FALSE:
            return False
        raise ConfigError(f"{name} ({key}) must be true/false/1/0/yes/no, got {raw!r}")
    if tp is int:
        try:
            return int(text)
        except ValueError:
            raise ConfigError(f"{name} ({key}) must be an integer, got {raw!r}") from None
    if tp is float:
        try:
            return float(text)
        except ValueError:
            raise ConfigError(f"{name} ({key}) must be a number, got {raw!r}") from None
    return raw if tp is str else text


def parse_settings(items: Iterable[str]) -> dict[str, Any]:
    """``["name=value", ...]`` (say, from a command line) -> :class:`MemoryConfig` fields.

    Each value is parsed as its field's type, as for environment variables (``none`` is
    None for optional fields). Raises :class:`ConfigError` for a malformed item, an unknown
    field or a bad value; :class:`MemoryConfig` checks the ranges when it is built.
    """
    out: dict[str, Any] = {}
    for item in items:
        name, sep, raw = str(item).partition("=")
        name = name.strip()
        if not sep or not name:
            raise ConfigError(f"a setting is NAME=VALUE, got {item!r}")
        if name not in _HINTS:
            raise ConfigError(f"unknown setting {name!r} (not a MemoryConfig field)")
        out[name] = _parse_env(name, raw, f"{name}={raw}")
    return out


def from_toml(path: str | os.PathLike[str], base: MemoryConfig | None = None) -> MemoryConfig:
    """Module-level alias of :meth:`MemoryConfig.from_toml`."""
    return MemoryConfig.from_toml(path, base)


def from_env(
    environ: Mapping[str, str] | None = None, base: MemoryConfig | None = None
) -> MemoryConfig:
    """Module-level alias of :meth:`MemoryConfig.from_env`."""
    return MemoryConfig.from_env(environ, base)


def load(
    path: str | os.PathLike[str] | None = None, env: bool | Mapping[str, str] = True
) -> MemoryConfig:
    """Module-level alias of :meth:`MemoryConfig.load`."""
    return MemoryConfig.load(path, env)
