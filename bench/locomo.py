"""LoCoMo retrieval-recall benchmark: does the memory hand back the turns a question needs?

LoCoMo (Maharana et al., ACL 2024; CC BY-NC 4.0, never copied into this repository) holds 10
long conversations between two speakers and ~2,000 questions, each labelled with the dialogue
turns ("evidence", ``D<session>:<turn>``) that answer it. This harness replays every
conversation into each system under test as *pages*, asks every question that has evidence,
and measures how much of the evidence the system's top-k pages cover.

Pages. Speaker A plays the user and speaker B the assistant. Within a session, an A turn
followed by a B turn becomes one page (query = A's text, response = B's text). A turn that
cannot be paired that way still becomes a page with the other side empty: a B turn that
opens a session (or follows another B turn) gives ``query=""``, an A turn at a session's end
(or followed by another A turn) gives ``response=""``. Image turns get
``" [image: <blip_caption>]"`` appended to their text. A page covers the dia_ids of its
turns. Pages are timestamped at their session's start plus 30 s per turn, so order is strict.

Metrics, per question and k in (5, 10, 20), over the first k *pages* of a system's ranking:
``any@k`` (1 when some evidence turn is covered), ``all@k`` (1 when every evidence turn is),
``frac@k`` (the fraction covered). They are averaged overall and per category
(1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop, 5 adversarial).

Systems, each fed the same pages:

- ``memoryos-hybrid`` / ``memoryos-paper``: the real system through its public API
  (``MemoryOS.open`` / ``add_turn`` / ``flush`` / ``retrieve``) with ``retrieval_mode``
  "hybrid" or "paper", one user per conversation (user id = sample id). The ranking is
  ``ctx.page_ids()`` (MTM pages best first, then STM pages). The system runs once with
  ``top_k_pages = max(k) = 20`` and the ranking is truncated at each k: stage 2 orders
  pages by score, so the first 10 of a top-20 answer are the top-10 answer.
- ``memoryos-paper-exact`` (only when named in ``--systems``): "paper" with
  ``paper_exact=True``, the paper's MTM rules without our extensions.
- ``bm25``: Okapi BM25 (k1 = 1.2, b = 0.75) over the page texts.
- ``flat``: exhaustive cosine search over page embeddings from the project's
  ``HashingEmbedder``.

Run ``python bench/locomo.py --help``. Results go to ``bench/results/locomo.json`` and a bar
chart ``bench/results/locomo_any10.png``.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as _dt
import functools
import hashlib
import inspect
import json
import os
import platform
import shlex
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any, Literal, Protocol

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/_out.py
from _out import add_out_dir  # noqa: E402
from _out import out_dir as bench_out_dir  # noqa: E402

if __package__ in (None, ""):
    # Run as a script (``python bench/locomo.py``): make the repository root importable so
    # ``bench.baselines`` resolves the same way it does under pytest.
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.baselines import BM25Ranker, Embedder, FlatRanker
from memoryos_actors.datasets import locomo as _datasets_locomo
from memoryos_actors.datasets.locomo import (
    CATEGORY_NAMES,
    QUESTION_DELAY_SECONDS,
    TURN_SPACING_SECONDS,
    Conversation,
    DatasetError,
    EvidenceRepair,
    LoCoMoPage,
    Question,
    build_pages,
    parse_session_datetime,
    repair_evidence,
)

__all__ = [
    "ALL_SYSTEMS",
    "CATEGORY_NAMES",
    "DEFAULT_SYSTEMS",
    "ENV_DATA_PATH",
    "KS",
    "BenchError",
    "BenchPage",
    "Conversation",
    "EvidenceRepair",
    "Question",
    "RecallAccumulator",
    "build_pages",
    "default_data_path",
    "load_conversation",
    "load_locomo",
    "main",
    "make_embedder",
    "parse_session_datetime",
    "repair_evidence",
    "run_benchmark",
    "score_ranking",
]

KS: tuple[int, ...] = (5, 10, 20)
"""Cut-offs (pages) at which recall is measured."""

ALL_SYSTEMS: tuple[str, ...] = (
    "memoryos-hybrid",
    "memoryos-hybrid-hot-only",
    "memoryos-hybrid-no-eviction",
    "memoryos-paper",
    "memoryos-paper-exact",
    "bm25",
    "flat",
)
"""Every system the harness knows, in report order.

``memoryos-hybrid-hot-only`` is hybrid retrieval with the cold tier switched off
(``cold_tier=False``: only STM and MTM are searched, as before the cold tier existed);
``memoryos-hybrid-no-eviction`` is hybrid retrieval with MTM made large enough that nothing
is ever evicted (``mtm_capacity`` and ``segment_max_pages`` = 10**6), the reference the
long-history mode compares the cold tier against; ``memoryos-paper-exact`` is the paper's
retrieval with ``paper_exact=True`` (exact F_score over all segments, every extension off)."""

DEFAULT_SYSTEMS: tuple[str, ...] = ("memoryos-hybrid", "memoryos-paper", "bm25", "flat")
"""Systems run when ``--systems`` is not given (per-conversation mode)."""

LONG_HISTORY_SYSTEMS: tuple[str, ...] = ALL_SYSTEMS
"""Systems run when ``--systems`` is not given in ``--long-history`` mode."""

LONG_HISTORY_USER = "long-history"
"""The one user (and sample id) of the long-history mode."""

_RETRY_FIRST_DELAY_S = 0.05
_RETRY_MAX_DELAY_S = 2.0
"""Waits (seconds) before asking again after ``Overloaded`` during ingest: doubling."""

NO_EVICTION = 10**6
"""``mtm_capacity`` and ``segment_max_pages`` of ``memoryos-hybrid-no-eviction``."""

ENV_MODEL_DIR = "MEMORYOS_MINILM_DIR"
"""Environment variable naming the local MiniLM model directory (``--model-dir``)."""

ENV_DATA_PATH = "MEMORYOS_LOCOMO_PATH"
"""Environment variable naming the LoCoMo JSON file (used when ``--data`` is not given)."""

FLAT_EMBEDDING_DIM = 512
"""Dimension of the hashing embedder used by the ``flat`` baseline."""

TARGET_ANY10_OVERALL = 0.85
"""Target: memoryos-hybrid any@10 over all asked questions."""


class BenchError(Exception):
    """The benchmark cannot run as asked (missing data file, unknown system, missing API)."""


# --------------------------------------------------------------------------------------
# Loading: the pure readers live in the package (``memoryos_actors.datasets.locomo``, also
# used by ``memoryos ingest``); these names keep the harness's API and its error type.

BenchPage = LoCoMoPage
"""One page fed to every system (the package's :class:`LoCoMoPage`)."""


def default_data_path() -> Path:
    """Where the LoCoMo file lives by default: ``../shared/data/locomo10.json`` next to the repo."""
    repo_root = Path(__file__).resolve().parents[1]
    return repo_root.parent / "shared" / "data" / "locomo10.json"


def resolve_data_path(cli_value: str | None, environ: Mapping[str, str] | None = None) -> Path:
    """The data path to use: ``--data``, else ``$MEMORYOS_LOCOMO_PATH``, else the default."""
    env = os.environ if environ is None else environ
    if cli_value:
        return Path(cli_value)
    if env.get(ENV_DATA_PATH):
        return Path(env[ENV_DATA_PATH])
    return default_data_path()


def load_conversation(sample: Mapping[str, Any]) -> Conversation:
    """Build a :class:`Conversation` from one LoCoMo sample (see the package's loader).

    Raises:
        BenchError: a required field is missing or a session date cannot be parsed.
    """
    try:
        return _datasets_locomo.load_conversation(sample)
    except DatasetError as exc:
        raise BenchError(str(exc)) from exc


def load_locomo(path: str | os.PathLike[str], limit: int | None = None) -> list[Conversation]:
    """Load the LoCoMo JSON at ``path``; ``limit`` keeps only the first N conversations.

    Raises:
        BenchError: the file is missing or not a LoCoMo-shaped JSON list.
    """
    file = Path(path)
    if not file.is_file():
        raise BenchError(
            f"LoCoMo data not found at {file}; pass --data PATH or set {ENV_DATA_PATH}"
        )
    try:
        return _datasets_locomo.load_locomo(file, limit)
    except DatasetError as exc:
        raise BenchError(f"cannot read LoCoMo data: {exc}") from exc


# --------------------------------------------------------------------------------------
# Metrics


def score_ranking(
    ranking: Sequence[int],
    pages: Sequence[BenchPage],
    evidence: Iterable[str],
    ks: Sequence[int] = KS,
) -> dict[str, float]:
    """any@k, all@k and frac@k of one question.

    ``ranking`` lists page indices best first; an index outside ``pages`` (a page id the
    system made up) still takes its slot but covers nothing, and a repeated index counts
    once, at its first position. Keys are ``"any@5"``, ``"all@5"``, ``"frac@5"`` and so on.
    """
    wanted = frozenset(evidence)
    if not wanted:
        raise ValueError("a question needs at least one evidence turn to be scored")
    seen: set[int] = set()
    ordered: list[int] = []
    for index in ranking:
        if index not in seen:
            seen.add(index)
            ordered.append(index)
    result: dict[str, float] = {}
    for k in ks:
        covered: set[str] = set()
        for index in ordered[:k]:
            if 0 <= index < len(pages):
                covered.update(pages[index].dia_ids)
        found = len(wanted & covered)
        result[f"any@{k}"] = 1.0 if found else 0.0
        result[f"all@{k}"] = 1.0 if found == len(wanted) else 0.0
        result[f"frac@{k}"] = found / len(wanted)
    return result


class RecallAccumulator:
    """Averages per-question metrics overall and per category."""

    def __init__(self, ks: Sequence[int] = KS) -> None:
        self.ks = tuple(ks)
        self._sums: dict[int | None, dict[str, float]] = {}
        self._counts: dict[int | None, int] = {}

    def add(self, category: int, metrics: Mapping[str, float]) -> None:
        """Record one question's metrics (from :func:`score_ranking`)."""
        for key in (None, category):
            sums = self._sums.setdefault(key, {})
            for name, value in metrics.items():
                sums[name] = sums.get(name, 0.0) + value
            self._counts[key] = self._counts.get(key, 0) + 1

    def _mean(self, key: int | None) -> dict[str, Any]:
        count = self._counts.get(key, 0)
        sums = self._sums.get(key, {})
        names = [f"{metric}@{k}" for metric in ("any", "all", "frac") for k in self.ks]
        means: dict[str, Any] = {"n": count}
        for name in names:
            means[name] = sums.get(name, 0.0) / count if count else None
        return means

    def summary(self) -> dict[str, Any]:
        """``{"overall": {...}, "per_category": {"1": {"name": ..., "n": ..., ...}}}``.

        Means are fractions in [0, 1]; a category with no question has ``None`` means.
        """
        per_category = {
            str(category): {"name": name, **self._mean(category)}
            for category, name in CATEGORY_NAMES.items()
        }
        for category in sorted(k for k in self._counts if k is not None):
            if category not in CATEGORY_NAMES:
                per_category[str(category)] = {"name": "unknown", **self._mean(category)}
        return {"overall": self._mean(None), "per_category": per_category}


# --------------------------------------------------------------------------------------
# Systems


class RecallSystem(Protocol):
    """A system under test: ingests a conversation's pages, then ranks pages for questions."""

    name: str

    def ingest(self, conversation: Conversation, on_page: Callable[[], None]) -> None:
        """Feed every page of ``conversation``; call ``on_page`` after each."""
        ...

    def rank(self, conversation: Conversation, question: Question) -> list[int]:
        """Page indices of ``conversation`` best first (at least ``max(KS)`` when possible)."""
        ...

    def describe(self) -> dict[str, Any]:
        """Settings worth recording next to the results."""
        ...

    def close(self) -> None:
        """Release resources (actors, files)."""
        ...


def make_embedder(dim: int = FLAT_EMBEDDING_DIM) -> Embedder:
    """The project's hashing embedder, as used by the ``flat`` baseline.

    Raises:
        BenchError: ``memoryos_actors.gateway.embedders.HashingEmbedder`` is not available.
    """
    try:
        from memoryos_actors.gateway.embedders import HashingEmbedder
    except ImportError as exc:
        raise BenchError(
            "the flat baseline needs memoryos_actors.gateway.embedders.HashingEmbedder, "
            f"which could not be imported: {exc}"
        ) from exc
    embedder: Embedder = HashingEmbedder(dim=dim)
    return embedder


class _BM25System:
    name = "bm25"

    def __init__(self) -> None:
        # The stop words the memory system itself ignores in keywords: both sides then
        # start from the same notion of "content word".
        from memoryos_actors.text import STOPWORDS

        self._stopwords = STOPWORDS
        self._rankers: dict[str, BM25Ranker] = {}

    def ingest(self, conversation: Conversation, on_page: Callable[[], None]) -> None:
        self._rankers[conversation.sample_id] = BM25Ranker(
            [page.text for page in conversation.pages], stopwords=self._stopwords
        )
        for _ in conversation.pages:
            on_page()

    def rank(self, conversation: Conversation, question: Question) -> list[int]:
        return self._rankers[conversation.sample_id].rank(question.question)

    def describe(self) -> dict[str, Any]:
        return {
            "k1": 1.2,
            "b": 0.75,
            "tokenizer": "lower-case letter/digit runs",
            "stopwords": "memoryos_actors.text.STOPWORDS",
            "stopword_count": len(self._stopwords),
        }

    def close(self) -> None:
        self._rankers.clear()


class _FlatSystem:
    name = "flat"

    def __init__(self, embedder: Embedder) -> None:
        self._embedder = embedder
        self._rankers: dict[str, FlatRanker] = {}

    def ingest(self, conversation: Conversation, on_page: Callable[[], None]) -> None:
        self._rankers[conversation.sample_id] = FlatRanker(
            [page.text for page in conversation.pages], self._embedder
        )
        for _ in conversation.pages:
            on_page()

    def rank(self, conversation: Conversation, question: Question) -> list[int]:
        return self._rankers[conversation.sample_id].rank(question.question)

    def describe(self) -> dict[str, Any]:
        return {
            "embedder": getattr(self._embedder, "name", type(self._embedder).__name__),
            "dim": int(self._embedder.dim),
        }

    def close(self) -> None:
        self._rankers.clear()


class _MemoryOSSystem:
    """The real system through its public API, one user per conversation.

    ``extra`` holds further ``MemoryConfig`` fields (the variants and the embedder). With
    ``track_hot``, the pages in the hot tiers (STM and MTM) are read after ingest, and for
    each question the share of its evidence pages that are *not* there (archived: only the
    cold tier can find them) is recorded.
    """

    def __init__(
        self,
        mode: Literal["paper", "hybrid"],
        data_dir: Path,
        top_k_pages: int,
        *,
        name: str | None = None,
        extra: Mapping[str, Any] | None = None,
        track_hot: bool = False,
    ) -> None:
        try:
            from memoryos_actors import MemoryConfig, MemoryOS
        except ImportError as exc:
            raise BenchError(
                f"memoryos-{mode} needs memoryos_actors.MemoryOS and MemoryConfig, which "
                f"could not be imported ({exc}); run with --systems bm25,flat meanwhile"
            ) from exc
        self.name = name or f"memoryos-{mode}"
        self._config = MemoryConfig(
            top_k_pages=top_k_pages, retrieval_mode=mode, **dict(extra or {})
        )
        self._track_hot = track_hot
        self._hot: dict[str, set[str]] = {}
        self._evidence_pages = 0
        self._evidence_pages_cold = 0
        self._questions_all_cold = 0
        self._questions = 0
        data_dir.mkdir(parents=True, exist_ok=True)
        self._stack = ExitStack()
        self._mem = self._stack.enter_context(MemoryOS.open(data_dir, config=self._config))
        parameters = inspect.signature(self._mem.retrieve).parameters
        # Ask "at question time" when the API lets us say when that is.
        self._time_kwarg = next((p for p in ("timestamp", "now") if p in parameters), None)
        self._page_index: dict[str, dict[str, int]] = {}
        self.foreign_page_ids = 0
        self.overloaded_retries = 0

    def ingest(self, conversation: Conversation, on_page: Callable[[], None]) -> None:
        mapping = self._page_index.setdefault(conversation.sample_id, {})
        for page in conversation.pages:
            page_id = self._add_turn(conversation.sample_id, page)
            mapping[str(page_id)] = page.index
            on_page()
        # Ingest is only over when the asynchronous work (meta chains, MTM) is done.
        self._mem.flush()
        if self._track_hot:
            state = self._mem.user_state(conversation.sample_id)
            self._hot[conversation.sample_id] = {str(pid) for pid in state.page_ids()}

    def _add_turn(self, user_id: str, page: BenchPage) -> str:
        """Store one page, as a well-behaved client does under backpressure.

        ``Overloaded`` (the background work is behind) is answered by waiting a moment
        and asking again with the same ``turn_key``, so a turn is stored exactly once
        however often it is retried; the retries are counted in the results.
        """
        from memoryos_actors.errors import Overloaded

        key = f"locomo:{user_id}:{page.index}"
        delay = _RETRY_FIRST_DELAY_S
        while True:
            try:
                return str(
                    self._mem.add_turn(
                        user_id, page.query, page.response, timestamp=page.timestamp, turn_key=key
                    )
                )
            except Overloaded:
                self.overloaded_retries += 1
                time.sleep(delay)
                delay = min(2 * delay, _RETRY_MAX_DELAY_S)

    def _count_cold_evidence(self, conversation: Conversation, question: Question) -> None:
        mapping = self._page_index[conversation.sample_id]
        by_index = {index: page_id for page_id, index in mapping.items()}
        wanted = set(question.evidence)
        pages = {p.index for p in conversation.pages if wanted & set(p.dia_ids)}
        hot = self._hot[conversation.sample_id]
        cold = [i for i in pages if by_index.get(i) not in hot]
        self._questions += 1
        self._evidence_pages += len(pages)
        self._evidence_pages_cold += len(cold)
        self._questions_all_cold += 1 if pages and len(cold) == len(pages) else 0

    def rank(self, conversation: Conversation, question: Question) -> list[int]:
        if self._track_hot:
            self._count_cold_evidence(conversation, question)
        kwargs: dict[str, Any] = {}
        if self._time_kwarg is not None:
            kwargs[self._time_kwarg] = conversation.question_timestamp
        context = self._mem.retrieve(conversation.sample_id, question.question, **kwargs)
        mapping = self._page_index[conversation.sample_id]
        ranking: list[int] = []
        for page_id in context.page_ids():
            index = mapping.get(str(page_id), -1)
            if index < 0:
                # Not a page of this user's conversation: a leak between users or a bug.
                self.foreign_page_ids += 1
            ranking.append(index)
        return ranking

    def describe(self) -> dict[str, Any]:
        config: dict[str, Any]
        if dataclasses.is_dataclass(self._config):
            config = {
                key: value
                for key, value in dataclasses.asdict(self._config).items()
                if isinstance(value, (str, int, float, bool, type(None)))
            }
            if config.get("embedding_model"):
                # A local directory: record its name only, never this machine's path.
                config["embedding_model"] = Path(str(config["embedding_model"])).name
        else:  # pragma: no cover - MemoryConfig is documented as a dataclass
            config = {"repr": repr(self._config)}
        out: dict[str, Any] = {
            "config": config,
            "question_time_passed_as": self._time_kwarg,
            "foreign_page_ids": self.foreign_page_ids,
            "add_turn_overloaded_retries": self.overloaded_retries,
        }
        if self._track_hot:
            out["evidence_out_of_hot_tiers"] = {
                "evidence_pages": self._evidence_pages,
                "archived_evidence_pages": self._evidence_pages_cold,
                "share_of_evidence_pages_archived": (
                    self._evidence_pages_cold / self._evidence_pages
                    if self._evidence_pages
                    else None
                ),
                "questions_with_all_evidence_archived": self._questions_all_cold,
                "questions": self._questions,
                "hot_pages_after_ingest": {k: len(v) for k, v in self._hot.items()},
            }
        return out

    def close(self) -> None:
        self._stack.close()


def _make_system(
    name: str,
    work_dir: Path,
    embedder_factory: Callable[[], Embedder],
    top_k_pages: int,
    memory_config: Mapping[str, Any] | None = None,
    track_hot: bool = False,
) -> RecallSystem:
    extra = dict(memory_config or {})
    if name == "bm25":
        return _BM25System()
    if name == "flat":
        return _FlatSystem(embedder_factory())
    if name == "memoryos-hybrid":
        return _MemoryOSSystem(
            "hybrid", work_dir / name, top_k_pages, extra=extra, track_hot=track_hot
        )
    if name == "memoryos-hybrid-hot-only":
        return _MemoryOSSystem(
            "hybrid",
            work_dir / name,
            top_k_pages,
            name=name,
            extra={**extra, "cold_tier": False},
            track_hot=track_hot,
        )
    if name == "memoryos-hybrid-no-eviction":
        return _MemoryOSSystem(
            "hybrid",
            work_dir / name,
            top_k_pages,
            name=name,
            extra={**extra, "mtm_capacity": NO_EVICTION, "segment_max_pages": NO_EVICTION},
            track_hot=track_hot,
        )
    if name == "memoryos-paper":
        return _MemoryOSSystem(
            "paper", work_dir / name, top_k_pages, extra=extra, track_hot=track_hot
        )
    if name == "memoryos-paper-exact":
        return _MemoryOSSystem(
            "paper",
            work_dir / name,
            top_k_pages,
            name=name,
            extra={**extra, "paper_exact": True},
            track_hot=track_hot,
        )
    raise BenchError(f"unknown system {name!r}; choose from {', '.join(ALL_SYSTEMS)}")


def _parse_settings(items: Sequence[str]) -> dict[str, Any]:
    """``--set`` items -> MemoryConfig fields (see :func:`memoryos_actors.config.parse_settings`)."""
    try:
        from memoryos_actors.config import parse_settings
        from memoryos_actors.errors import ConfigError
    except ImportError as exc:
        raise BenchError(f"--set needs memoryos_actors ({exc})") from exc
    try:
        return parse_settings(items)
    except ConfigError as exc:
        raise BenchError(str(exc)) from exc


def long_history(conversations: Sequence[Conversation]) -> Conversation:
    """All ``conversations`` as ONE user's history, pages in time order of their sessions.

    Pages keep their timestamps (session start + 30 s per turn); pages of different
    conversations are interleaved by time (ties: conversation order, then page order) and
    renumbered. Dia ids are made unique by prefixing the sample id (``"conv-26:D1:3"``), in
    pages and in every question's evidence. Every question of every conversation is asked
    against the whole history, :data:`QUESTION_DELAY_SECONDS` after its last page.
    """
    if not conversations:
        raise BenchError("long-history mode needs at least one conversation")
    tagged = sorted(
        (
            (page.timestamp, ci, page.index, conv.sample_id, page)
            for ci, conv in enumerate(conversations)
            for page in conv.pages
        ),
        key=lambda t: t[:3],
    )
    pages = tuple(
        dataclasses.replace(page, index=i, dia_ids=tuple(f"{sid}:{d}" for d in page.dia_ids))
        for i, (_, _, _, sid, page) in enumerate(tagged)
    )
    questions = tuple(
        dataclasses.replace(q, evidence=tuple(f"{conv.sample_id}:{d}" for d in q.evidence))
        for conv in conversations
        for q in conv.questions
    )
    evidence: dict[str, Any] = {}
    for conv in conversations:
        for key, value in conv.evidence.items():
            if isinstance(value, int):
                evidence[key] = evidence.get(key, 0) + value
            elif isinstance(value, (list, tuple)):
                evidence.setdefault(key, []).extend(f"{conv.sample_id}:{v}" for v in value)
    return Conversation(
        sample_id=LONG_HISTORY_USER,
        speaker_a="+".join(c.speaker_a for c in conversations),
        speaker_b="+".join(c.speaker_b for c in conversations),
        sessions=sum(c.sessions for c in conversations),
        turns=sum(c.turns for c in conversations),
        pages=pages,
        questions=questions,
        questions_total=sum(c.questions_total for c in conversations),
        question_timestamp=(pages[-1].timestamp if pages else 0.0) + QUESTION_DELAY_SECONDS,
        evidence=evidence,
    )


# --------------------------------------------------------------------------------------
# Running


def _percentile(values: Sequence[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    position = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[position]


def _dataset_summary(conversations: Sequence[Conversation]) -> dict[str, Any]:
    per_category = {str(c): 0 for c in CATEGORY_NAMES}
    for conversation in conversations:
        for question in conversation.questions:
            per_category[str(question.category)] = per_category.get(str(question.category), 0) + 1
    evidence: dict[str, Any] = {
        "raw_ids": 0,
        "raw_not_matching_a_turn": 0,
        "repaired_strings": 0,
        "ids_after_repair": 0,
        "questions_without_evidence": 0,
    }
    unresolvable: list[list[str]] = []
    malformed: list[list[str]] = []
    for conversation in conversations:
        for key in evidence:
            evidence[key] += conversation.evidence.get(key, 0)
        unresolvable += [[conversation.sample_id, i] for i in conversation.evidence["unresolvable"]]
        malformed += [[conversation.sample_id, i] for i in conversation.evidence["malformed"]]
    evidence["unresolvable_count"] = len(unresolvable)
    evidence["unresolvable"] = unresolvable
    evidence["malformed_count"] = len(malformed)
    evidence["malformed"] = malformed
    return {
        "conversations": len(conversations),
        "sessions": sum(c.sessions for c in conversations),
        "turns": sum(c.turns for c in conversations),
        "pages": sum(len(c.pages) for c in conversations),
        "pages_with_empty_query": sum(1 for c in conversations for p in c.pages if not p.query),
        "pages_with_empty_response": sum(
            1 for c in conversations for p in c.pages if not p.response
        ),
        "questions_total": sum(c.questions_total for c in conversations),
        "questions_asked": sum(len(c.questions) for c in conversations),
        "questions_asked_per_category": per_category,
        "evidence": evidence,
    }


def run_benchmark(
    conversations: Sequence[Conversation],
    systems: Sequence[str],
    *,
    work_dir: Path,
    embedder_factory: Callable[[], Embedder] | None = None,
    ks: Sequence[int] = KS,
    show_progress: bool = True,
    memory_config: Mapping[str, Any] | None = None,
    track_hot: bool = False,
) -> dict[str, Any]:
    """Run every system in ``systems`` over ``conversations`` and return per-system results.

    Each system ingests a conversation's pages and then answers its questions before the
    next conversation; memoryos systems keep every conversation as its own user in one data
    directory under ``work_dir``. Timings are wall-clock seconds (ingest includes the
    final ``flush``; query is per question). ``embedder_factory`` builds the ``flat``
    baseline's embedder (default :func:`make_embedder`). ``memory_config`` adds
    ``MemoryConfig`` fields to every memoryos system (e.g. the embedder); ``track_hot``
    records for memoryos systems the share of evidence pages out of the hot tiers.

    Raises:
        BenchError: a system is unknown or cannot be built.
    """
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    unknown = [name for name in systems if name not in ALL_SYSTEMS]
    if unknown:
        raise BenchError(f"unknown system(s) {unknown}; choose from {', '.join(ALL_SYSTEMS)}")
    steps = sum(len(c.pages) + len(c.questions) for c in conversations)
    factory = make_embedder if embedder_factory is None else embedder_factory
    results: dict[str, Any] = {}
    progress = Progress(
        TextColumn("{task.description:<18}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=Console(stderr=True),
        disable=not show_progress,
    )
    with progress:
        for name in systems:
            task = progress.add_task(name, total=steps)
            system = _make_system(name, work_dir, factory, max(ks), memory_config, track_hot)
            # One system at a time: close it (stopping its actors) before the next starts.
            try:
                results[name] = _run_system(
                    system, conversations, ks, functools.partial(progress.advance, task)
                )
            finally:
                system.close()
    return results


def _run_system(
    system: RecallSystem,
    conversations: Sequence[Conversation],
    ks: Sequence[int],
    advance: Callable[[], None],
) -> dict[str, Any]:
    accumulator = RecallAccumulator(ks)
    ingest_seconds = 0.0
    query_seconds: list[float] = []
    for conversation in conversations:
        started = time.perf_counter()
        system.ingest(conversation, advance)
        ingest_seconds += time.perf_counter() - started
        for question in conversation.questions:
            started = time.perf_counter()
            ranking = system.rank(conversation, question)
            query_seconds.append(time.perf_counter() - started)
            accumulator.add(
                question.category,
                score_ranking(ranking, conversation.pages, question.evidence, ks),
            )
            advance()
    pages = sum(len(c.pages) for c in conversations)
    total_query = sum(query_seconds)
    return {
        **accumulator.summary(),
        "settings": system.describe(),
        "timings": {
            "ingest_seconds": ingest_seconds,
            "ingest_pages": pages,
            "ingest_pages_per_second": pages / ingest_seconds if ingest_seconds else None,
            "queries": len(query_seconds),
            "query_seconds_total": total_query,
            "query_ms_mean": 1000 * total_query / len(query_seconds) if query_seconds else None,
            "query_ms_p50": _ms(_percentile(query_seconds, 0.50)),
            "query_ms_p95": _ms(_percentile(query_seconds, 0.95)),
        },
    }


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else 1000 * seconds


def check_targets(results: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Evaluate the issue's targets; each entry has ``target``, ``status`` and ``detail``.

    ``status`` is "MET", "MISSED", or "NOT RUN" (a needed system was not in the run).
    """
    checks: list[dict[str, Any]] = []
    hybrid = results.get("memoryos-hybrid")
    bm25 = results.get("bm25")
    first = f"memoryos-hybrid any@10 >= {TARGET_ANY10_OVERALL:.0%} overall"
    if hybrid is None:
        checks.append({"target": first, "status": "NOT RUN", "detail": "memoryos-hybrid not run"})
    else:
        value = hybrid["overall"]["any@10"] or 0.0
        checks.append(
            {
                "target": first,
                "status": "MET" if value >= TARGET_ANY10_OVERALL else "MISSED",
                "detail": f"any@10 = {100 * value:.1f}%",
            }
        )
    second = "memoryos-hybrid any@10 >= bm25 any@10 in every category"
    if hybrid is None or bm25 is None:
        checks.append(
            {"target": second, "status": "NOT RUN", "detail": "needs memoryos-hybrid and bm25"}
        )
    else:
        behind = []
        for category, stats in hybrid["per_category"].items():
            ours, theirs = stats["any@10"], bm25["per_category"][category]["any@10"]
            if ours is None or theirs is None:
                continue
            if ours < theirs:
                behind.append(
                    f"{category} {stats['name']}: {100 * ours:.1f}% < {100 * theirs:.1f}%"
                )
        checks.append(
            {
                "target": second,
                "status": "MISSED" if behind else "MET",
                "detail": "; ".join(behind) if behind else "not behind in any category",
            }
        )
    return checks


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f}"


def markdown_tables(results: Mapping[str, Any], ks: Sequence[int] = KS) -> str:
    """Two markdown tables: overall metrics per system, and any@10 per category (percent)."""
    columns = [f"any@{k}" for k in ks] + [f"all@{k}" for k in ks] + [f"frac@{k}" for k in ks]
    lines = [
        "| system | n | " + " | ".join(columns) + " |",
        "| --- | ---: | " + " | ".join("---:" for _ in columns) + " |",
    ]
    for name, result in results.items():
        overall = result["overall"]
        cells = " | ".join(_pct(overall[c]) for c in columns)
        lines.append(f"| {name} | {overall['n']} | {cells} |")
    lines.append("")
    categories = list(CATEGORY_NAMES.items())
    header = " | ".join(f"{c} {n}" for c, n in categories)
    lines.append(f"| any@10 (%) | {header} | overall |")
    lines.append("| --- | " + " | ".join("---:" for _ in categories) + " | ---: |")
    for name, result in results.items():
        cells = " | ".join(
            f"{_pct(result['per_category'][str(c)]['any@10'])} "
            f"(n={result['per_category'][str(c)]['n']})"
            for c, _ in categories
        )
        lines.append(f"| {name} | {cells} | {_pct(result['overall']['any@10'])} |")
    return "\n".join(lines)


def plot_any10(results: Mapping[str, Any], path: Path) -> bool:
    """Grouped bars of any@10 per category (and overall), one bar per system, as a PNG.

    Returns False (and draws nothing) when matplotlib is not installed.
    """
    try:
        import matplotlib

        matplotlib.use("Agg")  # no display on CI machines or servers
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    groups = [f"{c} {n}" for c, n in CATEGORY_NAMES.items()] + ["overall"]
    names = list(results)
    width = 0.8 / max(len(names), 1)
    figure, axes = plt.subplots(figsize=(10, 4.8))
    for offset, name in enumerate(names):
        result = results[name]
        values = [
            100 * (result["per_category"][str(c)]["any@10"] or 0.0) for c in CATEGORY_NAMES
        ] + [100 * (result["overall"]["any@10"] or 0.0)]
        positions = [i + (offset - (len(names) - 1) / 2) * width for i in range(len(groups))]
        axes.bar(positions, values, width=width, label=name)
    axes.set_xticks(range(len(groups)), groups)
    axes.set_ylabel("any@10 (% of questions)")
    axes.set_ylim(0, 100)
    axes.set_title("LoCoMo: evidence turn in the top 10 pages")
    axes.axhline(
        100 * TARGET_ANY10_OVERALL,
        color="grey",
        linestyle="--",
        linewidth=0.8,
        label=f"target {TARGET_ANY10_OVERALL:.0%} (memoryos-hybrid overall)",
    )
    axes.legend(loc="lower right", fontsize="small")
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return True


def _embedder_setup(
    args: argparse.Namespace,
) -> tuple[dict[str, Any], Callable[[], Embedder] | None, dict[str, Any]]:
    """MemoryConfig fields, the flat baseline's embedder factory and a description."""
    if args.embedder == "hashing":
        return {}, None, {"name": f"hashing-v1-{FLAT_EMBEDDING_DIM}"}
    model_dir = args.model_dir or os.environ.get(ENV_MODEL_DIR)
    if not model_dir:
        raise BenchError(f"--embedder minilm needs --model-dir or ${ENV_MODEL_DIR}")
    try:
        from memoryos_actors.gateway.embedders import (
            MINILM_L6_V2_SHA256,
            SentenceTransformerEmbedder,
        )
    except ImportError as exc:  # pragma: no cover - part of the package
        raise BenchError(f"cannot import the sentence-transformers embedder: {exc}") from exc
    shared: dict[str, Any] = {}
    threads = _parse_settings(args.set).get("embedding_threads", 1)

    def factory() -> Embedder:
        if "e" not in shared:
            shared["e"] = SentenceTransformerEmbedder(
                model_dir, expected_sha256=MINILM_L6_V2_SHA256, num_threads=threads
            )
        embedder: Embedder = shared["e"]
        return embedder

    # A model embedder is much slower than hashing, so MTM's placement queue fills and
    # add_turn answers Overloaded; the ingest loop waits and retries with the same turn
    # key (see _MemoryOSSystem._add_turn), as a client should.
    config = {
        "embedder": "sentence-transformers",
        "embedding_model": str(model_dir),
        "embedding_sha256": MINILM_L6_V2_SHA256,
    }
    return (
        config,
        factory,
        {
            "name": "sentence-transformers/all-MiniLM-L6-v2",
            "model_dir": Path(model_dir).name,
            "model_safetensors_sha256": MINILM_L6_V2_SHA256,
        },
    )


def _machine_info() -> dict[str, Any]:
    info: dict[str, Any] = {
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "processor": platform.processor() or None,
        "cpu_count": os.cpu_count(),
    }
    try:
        import numpy

        info["numpy"] = numpy.__version__
    except ImportError:  # pragma: no cover - numpy is a core dependency
        pass
    try:
        import psutil

        info["memory_bytes"] = psutil.virtual_memory().total
    except ImportError:
        info["memory_bytes"] = None
    return info


def _file_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


def _parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python bench/locomo.py",
        description="LoCoMo retrieval-recall benchmark (any/all/frac @5/10/20 per category).",
    )
    parser.add_argument(
        "--data",
        help=f"LoCoMo JSON file (default: ${ENV_DATA_PATH}, else ../shared/data/locomo10.json "
        "beside the repository)",
    )
    parser.add_argument(
        "--systems",
        default=",".join(DEFAULT_SYSTEMS),
        help=f"comma-separated systems to rank (default: {','.join(DEFAULT_SYSTEMS)})",
    )
    parser.add_argument(
        "--limit-conversations",
        type=int,
        default=None,
        metavar="N",
        help="use only the first N conversations",
    )
    add_out_dir(parser)
    parser.add_argument(
        "--long-history",
        action="store_true",
        help="all conversations as ONE user's history in time order, every question asked "
        "against it (results: locomo_long*.json)",
    )
    parser.add_argument(
        "--embedder",
        choices=("hashing", "minilm"),
        default="hashing",
        help="embedder of the memoryos systems and the flat baseline (default: hashing); "
        "minilm needs --model-dir and the 'st' extra",
    )
    parser.add_argument(
        "--model-dir",
        default=None,
        help=f"local sentence-transformers model directory for --embedder minilm (default: "
        f"${ENV_MODEL_DIR}); its model.safetensors is checked against the known sha256",
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a MemoryConfig setting for the memoryos systems (repeatable)",
    )
    parser.add_argument("--no-plot", action="store_true", help="do not draw the PNG chart")
    parser.add_argument(
        "--no-progress", action="store_true", help="no progress bar (for logs and CI)"
    )
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point; returns the process exit code (0 ok, 2 cannot run)."""
    args = _parse_args(argv)
    if args.long_history and args.systems == ",".join(DEFAULT_SYSTEMS):
        args.systems = ",".join(LONG_HISTORY_SYSTEMS)
    systems = [name.strip() for name in args.systems.split(",") if name.strip()]
    out_dir = bench_out_dir(args)
    data_path = resolve_data_path(args.data)
    try:
        if not systems:
            raise BenchError("--systems named no system")
        conversations = load_locomo(data_path, args.limit_conversations)
        memory_config, factory, embedder_info = _embedder_setup(args)
        memory_config = {**dict(memory_config or {}), **_parse_settings(args.set)}
        asked = [long_history(conversations)] if args.long_history else conversations
        with tempfile.TemporaryDirectory(prefix="locomo-bench-") as work_dir:
            results = run_benchmark(
                asked,
                systems,
                work_dir=Path(work_dir),
                show_progress=not args.no_progress,
                embedder_factory=factory,
                memory_config=memory_config,
                track_hot=args.long_history,
            )
    except BenchError as exc:
        print(f"locomo bench: {exc}", file=sys.stderr)
        return 2
    targets = check_targets(results)
    shown_argv = list(sys.argv[1:] if argv is None else argv)
    for i, arg in enumerate(shown_argv[:-1]):
        if arg == "--model-dir":  # this machine's path stays out of the results
            shown_argv[i + 1] = f"<dir>/{Path(shown_argv[i + 1]).name}"
    report = {
        "benchmark": "locomo-retrieval-recall",
        "date": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "command": shlex.join(["python", "bench/locomo.py", *shown_argv]),
        "machine": _machine_info(),
        "data": {
            "file": data_path.name,
            "sha256_16": _file_digest(data_path),
            "licence": "CC BY-NC 4.0 (LoCoMo, Maharana et al., ACL 2024); not redistributed",
            **_dataset_summary(conversations),
        },
        "method": {
            "ks": list(KS),
            "metrics": "any@k, all@k, frac@k over the evidence turns covered by the top-k "
            "pages; means are fractions in [0, 1]",
            "page": "speaker-A turn + following speaker-B turn; unpaired turns are pages "
            "with the other side empty; image turns get ' [image: <blip_caption>]'",
            "turn_spacing_seconds": TURN_SPACING_SECONDS,
            "question_delay_seconds": QUESTION_DELAY_SECONDS,
            "memoryos": "one run with top_k_pages = max(k), ranking = ctx.page_ids() "
            "truncated at k; user_id = sample_id",
            "mode": "long-history: all conversations as one user, pages in time order, "
            "every question asked after the last page"
            if args.long_history
            else "per-conversation: one user per conversation",
            "embedder": embedder_info,
            "hybrid_weights_note": "the hybrid scorer's weights were chosen on LoCoMo "
            "(per-conversation mode); numbers on LoCoMo are therefore optimistic",
        },
        "systems": results,
        "targets": targets,
    }
    out_dir.mkdir(parents=True, exist_ok=True)
    stem_name = "locomo_long" if args.long_history else "locomo"
    if args.embedder != "hashing":
        stem_name += f"_{args.embedder}"
    json_path = out_dir / f"{stem_name}.json"
    json_path.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(markdown_tables(results))
    print()
    for check in targets:
        print(f"- {check['status']}: {check['target']} ({check['detail']})")
    print(f"\nresults: {json_path}")
    if not args.no_plot:
        png_path = out_dir / f"{stem_name}_any10.png"
        if plot_any10(results, png_path):
            print(f"chart: {png_path}")
        else:
            print(
                "chart skipped: matplotlib is not installed "
                "(install the 'bench' extra from the checkout: pip install '.[bench]')"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
