"""LongMemEval recall in the global haystack: one user, every item's sessions, every question.

LongMemEval (Wu et al., ICLR 2025; data MIT, never copied into this repository) asks
questions about chat histories; the evidence turns of each question carry ``has_answer``.
The dev split this harness reads (``longmemeval_oracle_dev.json``) holds 500 items in the
original order: items at even positions are whole (question, type, date, sessions with the
evidence turns marked), items at odd positions keep only their sessions (distractors, no
question). See the data folder's README for the format.

Protocol (the *global haystack*). For a history of N items, the sessions of the first N
items go, in file order, into ONE user of each system. A page is a user turn and the
assistant turn right after it: turns are taken two by two from the start of a session, and
a pair that is not (user, assistant) is left out, as is a session's odd last turn (33
turns of the 10,960 in the dev file; 5,451 pages for all 500 items). A page is stamped at
its session's date (UTC) plus :data:`TURN_SPACING_SECONDS` per pair. Then each question of
an even item among the first N is asked at its ``question_date``; it is a **hit** when the
retrieved context holds a page with one of its ``has_answer`` turns. Questions without
such a page (abstention questions, and evidence only in left-out turns) are not scored.

Systems, each fed the same pages:

- ``memoryos-hybrid``: the real system through its public API (``MemoryOS.open`` /
  ``add_turn`` / ``flush`` / ``retrieve``) with the default configuration (hashing
  embedder unless ``--embedder minilm``) and ``top_k_pages`` = :data:`TOP_K`. The context
  is ``ctx.page_ids()``: the retrieved pages plus STM's recent ones.
- ``memoryos-hybrid-no-eviction``: the same with MTM large enough that nothing is evicted.
- ``bm25``: Okapi BM25 (k1 = 1.2, b = 0.75, the memory system's stop words left out) over
  all pages, its top :data:`TOP_K` plus the :data:`RECENT` most recent pages (the budget of
  the memory system's context: top_k plus a full STM). ``bm25-no-stopwords`` is the same
  without a stop-word list.

Run ``python bench/longmemeval.py --help``. The result is ``longmemeval.json`` in
``--out-dir`` (default: a folder in the system's temporary directory, so a trial run never
touches the committed ``bench/results/``; pass ``--out-dir bench/results`` to record one).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as _dt
import hashlib
import json
import math
import os
import re
import shlex
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    # Run as a script: make the repository root importable (``bench.*``), as under pytest.
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.baselines import BM25Ranker, FlatRanker
from bench.locomo import (
    ENV_MODEL_DIR,
    NO_EVICTION,
    BenchError,
    _embedder_setup,
    _file_digest,
    _machine_info,
    _parse_settings,
    _percentile,
)

__all__ = [
    "ALL_SYSTEMS",
    "DEFAULT_LENGTHS",
    "ENV_DATA_PATH",
    "ENV_MODEL_DIR",
    "QUESTION_TYPES",
    "RECENT",
    "TOP_K",
    "BenchError",
    "Haystack",
    "HaystackPage",
    "HaystackQuestion",
    "OFFICIAL_KS",
    "SPLITS",
    "build_haystack",
    "check_targets",
    "dense_unavailable",
    "official_metrics",
    "split_of",
    "default_data_path",
    "load_items",
    "main",
    "markdown_tables",
    "parse_date",
    "resolve_data_path",
    "run_length",
]

ENV_DATA_PATH = "MEMORYOS_LONGMEMEVAL_PATH"
"""Environment variable naming the dev-set JSON file (used when ``--data`` is not given)."""

DATA_FILE = "longmemeval_oracle_dev.json"
"""File name of the dev split in the shared data folder."""

TOP_K = 10
"""Pages a system retrieves per question (``top_k_pages`` of the memory system)."""

RECENT = 7
"""Most recent pages added to BM25's top :data:`TOP_K` (the memory system's STM capacity)."""

TURN_SPACING_SECONDS = 30.0
"""Seconds between consecutive pages of a session (turns carry no time of their own)."""

DEFAULT_LENGTHS: tuple[int, ...] = (100, 200, 500)
"""History lengths (items of the file, from the first) run when ``--lengths`` is not given."""

ALL_SYSTEMS: tuple[str, ...] = (
    "memoryos-hybrid",
    "memoryos-hybrid-no-eviction",
    "bm25",
    "bm25-no-stopwords",
    "bm25-asof",
    "minilm-flat",
)
"""Every system the harness knows, in report order. ``bm25-no-stopwords`` is BM25 without
the stop-word list (the baseline issue #24 quoted); ``bm25`` leaves out the memory system's
stop words, as ``bench/locomo.py`` does, and is the stronger of the two here.
``bm25-asof`` is ``bm25`` without the pages stamped after the question (the memory
system's as-of rule, its slack included), the anchor that shows what that rule alone gives.
``minilm-flat`` is flat dense search with a local all-MiniLM-L6-v2 (``--model-dir``), the
paper's dense anchor; it is left out with a note when the model or sentence-transformers
is missing."""

DEFAULT_SYSTEMS: tuple[str, ...] = ("memoryos-hybrid", "bm25", "bm25-no-stopwords")
"""Systems run when ``--systems`` is not given."""

QUESTION_TYPES: tuple[str, ...] = (
    "knowledge-update",
    "multi-session",
    "single-session-assistant",
    "single-session-preference",
    "single-session-user",
    "temporal-reasoning",
)
"""LongMemEval's question types, in report order."""

USER = "longmemeval"
"""The one user id of the memory systems."""

RANKING_ONLY: frozenset[str] = frozenset({"rerank", "rerank_candidates"})
"""Settings that change only how a retrieve ranks, never what is ingested: kept data
(``--keep-data``) is reused across them."""

KEPT_MARKER = "ingested.json"
"""File beside kept data (``--keep-data``): what was ingested and the page-id mapping."""

_RETRY_FIRST_DELAY_S = 0.05
_RETRY_MAX_DELAY_S = 2.0
_DATE_RE = re.compile(
    r"^\s*(\d{4})/(\d{1,2})/(\d{1,2})\s*(?:\([A-Za-z]+\))?\s*(\d{1,2}):(\d{2})\s*$"
)


# --------------------------------------------------------------------------------------
# Data


@dataclasses.dataclass(frozen=True, slots=True)
class HaystackPage:
    """One page fed to every system: a user turn and the assistant turn after it.

    ``index`` is the page's position in the haystack (from 0), ``item`` the file position
    of the item it came from, ``timestamp`` seconds since the epoch (UTC), ``evidence``
    whether either turn carries ``has_answer``.
    """

    index: int
    item: int
    query: str
    response: str
    timestamp: float
    evidence: bool
    session: str = ""

    @property
    def text(self) -> str:
        """Both turns as one text (newline-separated)."""
        return f"{self.query}\n{self.response}"


@dataclasses.dataclass(frozen=True, slots=True)
class HaystackQuestion:
    """One scored question: ``pages`` are the indices of its evidence pages (never empty),
    ``sessions`` the keys (:attr:`HaystackPage.session`) of the sessions holding them;
    ``timestamp`` is when it is asked (seconds since the epoch, UTC)."""

    question_id: str
    question_type: str
    question: str
    timestamp: float
    item: int
    pages: frozenset[int]
    sessions: frozenset[str] = frozenset()

    @property
    def abstention(self) -> bool:
        """An abstention question (id ending ``_abs``): the official scorer leaves it out."""
        return self.question_id.endswith("_abs")


@dataclasses.dataclass(frozen=True)
class Haystack:
    """The pages of the first ``items`` items and their scored questions.

    ``skipped`` counts the even items' questions that cannot be scored, by reason.
    """

    items: int
    pages: tuple[HaystackPage, ...]
    questions: tuple[HaystackQuestion, ...]
    skipped: Mapping[str, int]
    left_out_turns: int


def default_data_path() -> Path:
    """Where the dev set lives by default: ``../shared/data/`` next to the repository."""
    return Path(__file__).resolve().parents[1].parent / "shared" / "data" / DATA_FILE


def resolve_data_path(cli_value: str | None, environ: Mapping[str, str] | None = None) -> Path:
    """The data path to use: ``--data``, else ``$MEMORYOS_LONGMEMEVAL_PATH``, else the default."""
    env = os.environ if environ is None else environ
    if cli_value:
        return Path(cli_value)
    if env.get(ENV_DATA_PATH):
        return Path(env[ENV_DATA_PATH])
    return default_data_path()


def parse_date(text: str) -> float:
    """Parse a LongMemEval date such as ``"2023/05/20 (Sat) 02:21"`` (UTC) to epoch seconds.

    Raises:
        ValueError: the text is not in that form or names no real date.
    """
    match = _DATE_RE.match(str(text))
    if match is None:
        raise ValueError(f"unrecognised date {text!r}")
    year, month, day, hour, minute = (int(g) for g in match.groups())
    return _dt.datetime(year, month, day, hour, minute, tzinfo=_dt.UTC).timestamp()


def load_items(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The items of the dev-set JSON at ``path`` (a list of objects).

    Raises:
        BenchError: the file is missing, not JSON, or not a list of objects.
    """
    file = Path(path)
    if not file.is_file():
        raise BenchError(
            f"LongMemEval data not found at {file}; pass --data PATH or set {ENV_DATA_PATH}"
        )
    try:
        items = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BenchError(f"cannot read LongMemEval data {file.name}: {exc}") from exc
    if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
        raise BenchError(f"{file.name}: expected a JSON list of LongMemEval items")
    return items


def build_haystack(items: Sequence[Mapping[str, Any]], n_items: int | None = None) -> Haystack:
    """The global haystack of the first ``n_items`` items (all when None); see the module
    docstring for the page and scoring rules.

    Raises:
        BenchError: an item lacks its sessions or dates, or a date cannot be parsed.
    """
    chosen = list(items[: len(items) if n_items is None else max(n_items, 0)])
    pages: list[HaystackPage] = []
    left_out = 0
    evidence_of: dict[int, set[int]] = {}
    for position, item in enumerate(chosen):
        try:
            sessions = item["haystack_sessions"]
            dates = item["haystack_dates"]
        except KeyError as exc:
            raise BenchError(f"item {position} lacks {exc}") from None
        if len(sessions) != len(dates):
            raise BenchError(f"item {position}: {len(sessions)} sessions but {len(dates)} dates")
        session_ids = item.get("haystack_session_ids") or [str(i) for i in range(len(sessions))]
        for s_index, (session, date) in enumerate(zip(sessions, dates, strict=True)):
            # Unique in the haystack even when two items share a session id.
            session_key = (
                f"{position}:{session_ids[s_index] if s_index < len(session_ids) else s_index}"
            )
            try:
                start = parse_date(date)
            except ValueError as exc:
                raise BenchError(f"item {position}: {exc}") from None
            pair = 0
            for k in range(0, len(session) - 1, 2):
                user, assistant = session[k], session[k + 1]
                if user.get("role") != "user" or assistant.get("role") != "assistant":
                    left_out += 2
                    continue
                has = bool(user.get("has_answer")) or bool(assistant.get("has_answer"))
                page = HaystackPage(
                    len(pages),
                    position,
                    str(user.get("content", "")),
                    str(assistant.get("content", "")),
                    start + TURN_SPACING_SECONDS * pair,
                    has,
                    session_key,
                )
                pair += 1
                pages.append(page)
                if has:
                    evidence_of.setdefault(position, set()).add(page.index)
            left_out += len(session) % 2
    questions: list[HaystackQuestion] = []
    skipped = {"no_has_answer_turn": 0, "evidence_only_in_left_out_turns": 0}
    for position, item in enumerate(chosen):
        if position % 2 or not item.get("question"):
            continue
        evidence = evidence_of.get(position)
        if not evidence:
            marked = any(t.get("has_answer") for s in item["haystack_sessions"] for t in s)
            skipped["evidence_only_in_left_out_turns" if marked else "no_has_answer_turn"] += 1
            continue
        try:
            asked = parse_date(item["question_date"])
        except (KeyError, ValueError) as exc:
            raise BenchError(f"item {position}: no usable question_date ({exc})") from None
        questions.append(
            HaystackQuestion(
                str(item.get("question_id", position)),
                str(item.get("question_type")),
                str(item["question"]),
                asked,
                position,
                frozenset(evidence),
                frozenset(pages[i].session for i in evidence),
            )
        )
    return Haystack(len(chosen), tuple(pages), tuple(questions), skipped, left_out)


# --------------------------------------------------------------------------------------
# Tune / validation split and the official retrieval metrics


SPLITS: tuple[str, ...] = ("tune", "validation")
"""The two parts of the dev questions: rules are tuned on ``tune`` only; ``validation``
is reported beside it, as an estimate on questions no rule was chosen for."""

VALIDATION_EVERY = 3
"""One question in this many (per type, in hash order) is a validation question."""

OFFICIAL_KS: tuple[int, ...] = (5, 10)
"""Cut-offs of the official metrics (``recall_all@k``, ``recall_any@k``, ``ndcg_any@k``)."""


def split_of(items: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """Every question id of the file's whole items -> ``"tune"`` or ``"validation"``.

    Deterministic and stratified by type: the questions of one type are ordered by the
    SHA-256 of their id, and every :data:`VALIDATION_EVERY`-th of them (the 3rd, 6th, ...)
    is a validation question. It depends only on the file's ids, never on a run or on the
    history length asked for."""
    by_type: dict[str, list[str]] = {}
    for position, item in enumerate(items):
        if position % 2 or not item.get("question"):
            continue
        qid = str(item.get("question_id", position))
        by_type.setdefault(str(item.get("question_type")), []).append(qid)
    out: dict[str, str] = {}
    for ids in by_type.values():
        order = sorted(ids, key=lambda i: hashlib.sha256(i.encode("utf-8")).hexdigest())
        for rank, qid in enumerate(order):
            out[qid] = "validation" if rank % VALIDATION_EVERY == VALIDATION_EVERY - 1 else "tune"
    return out


def _dcg(relevances: Sequence[int]) -> float:
    # The official scorer's DCG: the first relevance undiscounted, the i-th (from 0)
    # divided by log2(i + 1) after it.
    if not relevances:
        return 0.0
    return float(relevances[0]) + sum(
        r / math.log2(i + 1) for i, r in enumerate(relevances[1:], start=1)
    )


def official_metrics(ranked: Sequence[Any], correct: frozenset[Any]) -> dict[str, float]:
    """LongMemEval's retrieval metrics of one question at :data:`OFFICIAL_KS`:
    ``recall_any@k`` (one correct unit in the top k), ``recall_all@k`` (every one) and
    ``ndcg_any@k`` (binary relevance, the official DCG), for ``ranked`` units best first
    (duplicates after the first are dropped, as the official session-level scorer does)."""
    order = list(dict.fromkeys(ranked))
    out: dict[str, float] = {}
    for k in OFFICIAL_KS:
        top = order[:k]
        found = correct.intersection(top)
        out[f"recall_any@{k}"] = float(bool(found))
        out[f"recall_all@{k}"] = float(len(found) == len(correct))
        ideal = _dcg([1] * min(len(correct), k))
        out[f"ndcg_any@{k}"] = _dcg([int(u in correct) for u in top]) / ideal if ideal else 0.0
    return out


# --------------------------------------------------------------------------------------
# Systems


class _BM25System:
    """BM25 over every page: its top :data:`TOP_K` plus the :data:`RECENT` newest pages.

    With ``as_of``, pages stamped later than the memory system's slack
    (:data:`~memoryos_actors.tiers.hybrid.AS_OF_SLACK_SECONDS`) after the question are left
    out first, as the memory system leaves them out: the anchor for that rule."""

    def __init__(self, stopwords: bool = True, as_of: bool = False) -> None:
        from memoryos_actors.text import STOPWORDS

        self.name = ("bm25" if stopwords else "bm25-no-stopwords") + ("-asof" if as_of else "")
        self._stopwords = STOPWORDS if stopwords else frozenset()
        self._as_of = as_of
        self._ranker: BM25Ranker | None = None
        self._recent: list[int] = []
        self._times: list[float] = []

    def ingest(self, haystack: Haystack) -> None:
        self._ranker = BM25Ranker([p.text for p in haystack.pages], stopwords=self._stopwords)
        self._recent = [p.index for p in haystack.pages[-RECENT:]]
        self._times = [p.timestamp for p in haystack.pages]

    def context(self, question: HaystackQuestion) -> tuple[list[int], list[int]]:
        """The context (top :data:`TOP_K` plus the most recent pages) and the ranked pages."""
        assert self._ranker is not None
        ranked = self._ranker.rank(question.question)
        if self._as_of:
            cutoff = question.timestamp + _as_of_slack()
            ranked = [i for i in ranked if self._times[i] < cutoff]
        return ranked[:TOP_K] + self._recent, ranked[:TOP_K]

    def describe(self) -> dict[str, Any]:
        return {
            "k1": 1.2,
            "b": 0.75,
            "stopwords": "memoryos_actors.text.STOPWORDS" if self._stopwords else None,
            "context": f"top {TOP_K} + the {RECENT} most recent pages",
            "as_of_slack_seconds": _as_of_slack() if self._as_of else None,
        }

    def close(self) -> None:
        self._ranker = None


def _as_of_slack() -> float:
    from memoryos_actors.tiers import hybrid

    return hybrid.AS_OF_SLACK_SECONDS if hybrid.AS_OF_SLACK_SECONDS is not None else math.inf


class _DenseSystem:
    """Flat dense search over every page with a local all-MiniLM-L6-v2 (the LongMemEval
    paper's dense anchor): its top :data:`TOP_K` plus the :data:`RECENT` newest pages."""

    name = "minilm-flat"

    def __init__(self, model_dir: str, kept: Path | None = None) -> None:
        from memoryos_actors.gateway.embedders import (
            MINILM_L6_V2_SHA256,
            SentenceTransformerEmbedder,
        )

        self._embedder = SentenceTransformerEmbedder(
            model_dir, expected_sha256=MINILM_L6_V2_SHA256, num_threads=1
        )
        self._ranker: FlatRanker | None = None
        self._recent: list[int] = []
        self._kept = kept
        self.reused_ingest = False

    def ingest(self, haystack: Haystack) -> None:
        """Embed every page (with ``--keep-data``, the vectors are kept and reused for
        the same page texts: a page embeds in tens of milliseconds on a small CPU)."""
        texts = [p.text for p in haystack.pages]
        digest = hashlib.sha256("\x00".join(texts).encode("utf-8")).hexdigest()
        cache = None if self._kept is None else self._kept / "vectors.npy"
        marker = None if self._kept is None else self._kept / KEPT_MARKER
        if cache is not None and marker is not None and cache.is_file() and marker.is_file():
            if json.loads(marker.read_text(encoding="utf-8")).get("texts_sha256") == digest:
                import numpy as np

                self._ranker = FlatRanker.from_matrix(np.load(cache), self._embedder)
                self.reused_ingest = True
        if self._ranker is None:
            self._ranker = FlatRanker(texts, self._embedder)
            if cache is not None and marker is not None:
                import numpy as np

                cache.parent.mkdir(parents=True, exist_ok=True)
                np.save(cache, self._ranker.matrix)
                marker.write_text(json.dumps({"texts_sha256": digest}), encoding="utf-8")
        self._recent = [p.index for p in haystack.pages[-RECENT:]]

    def context(self, question: HaystackQuestion) -> tuple[list[int], list[int]]:
        """The context (top :data:`TOP_K` plus the most recent pages) and the ranked pages."""
        assert self._ranker is not None
        ranked = self._ranker.rank(question.question)[:TOP_K]
        return ranked + self._recent, ranked

    def describe(self) -> dict[str, Any]:
        return {
            "model": "sentence-transformers/all-MiniLM-L6-v2 (flat cosine, no tiers)",
            "context": f"top {TOP_K} + the {RECENT} most recent pages",
        }

    def close(self) -> None:
        self._ranker = None


def dense_unavailable(model_dir: str | None) -> str | None:
    """Why the ``minilm-flat`` anchor cannot run here (None when it can): no model
    directory given, or sentence-transformers (the ``st`` extra) not installed."""
    if not model_dir:
        return f"no MiniLM model directory (--model-dir or ${ENV_MODEL_DIR})"
    try:
        import sentence_transformers  # type: ignore[import-not-found]  # noqa: F401
    except ImportError:
        return "sentence-transformers (the 'st' extra) is not installed"
    return None


class _MemoryOSSystem:
    """The memory system through its public API, the whole haystack as one user.

    With ``kept`` (a directory), the ingested data is kept there with the page-id mapping
    (:data:`KEPT_MARKER`); a later run with the same pages and settings copies it into
    ``data_dir`` and skips the ingest. Ingest does not depend on the ranking rules, so
    ranking changes can be measured without ingesting again; the copy keeps the kept data
    as it was after ingest (questions mark segments as visited).
    """

    def __init__(
        self, name: str, data_dir: Path, extra: Mapping[str, Any], kept: Path | None = None
    ) -> None:
        from memoryos_actors import MemoryConfig, MemoryOS

        self.name = name
        settings = {"top_k_pages": TOP_K, **dict(extra)}
        self._config = MemoryConfig(**settings)
        self._kept = kept
        self._index: dict[str, int] = {}
        self.reused_ingest = False
        if kept is not None and (kept / KEPT_MARKER).is_file():
            shutil.rmtree(data_dir, ignore_errors=True)
            shutil.copytree(kept / "data", data_dir)
            marker = json.loads((kept / KEPT_MARKER).read_text(encoding="utf-8"))
            self._kept_key = marker["key"]
            self._index = {k: int(v) for k, v in marker["pages"].items()}
            self.reused_ingest = True
        data_dir.mkdir(parents=True, exist_ok=True)
        self._data_dir = data_dir
        self._stack = ExitStack()
        self._mem = self._stack.enter_context(MemoryOS.open(data_dir, config=self._config))
        self.overloaded_retries = 0
        self.foreign_page_ids = 0

    def _key(self, haystack: Haystack) -> dict[str, Any]:
        config = {
            k: v
            for k, v in dataclasses.asdict(self._config).items()
            if isinstance(v, (str, int, float, bool, type(None))) and k not in RANKING_ONLY
        }
        return {"items": haystack.items, "pages": len(haystack.pages), "config": config}

    def ingest(self, haystack: Haystack) -> None:
        from memoryos_actors.errors import Overloaded

        if self.reused_ingest:
            if self._kept_key != self._key(haystack):
                raise BenchError(
                    f"kept data in {self._kept} was ingested with other pages "
                    "or settings; remove it or use another --keep-data"
                )
            return
        for page in haystack.pages:
            delay = _RETRY_FIRST_DELAY_S
            while True:
                try:
                    page_id = self._mem.add_turn(
                        USER,
                        page.query,
                        page.response,
                        timestamp=page.timestamp,
                        turn_key=f"lme:{page.index}",
                    )
                    break
                except Overloaded:
                    # A client under backpressure waits and asks again with the same key.
                    self.overloaded_retries += 1
                    time.sleep(delay)
                    delay = min(2 * delay, _RETRY_MAX_DELAY_S)
            self._index[str(page_id)] = page.index
        self._mem.flush()
        if self._kept is not None:
            # Close to write the state out, keep a copy, and open the working copy again.
            self._stack.close()
            shutil.rmtree(self._kept, ignore_errors=True)
            self._kept.mkdir(parents=True)
            shutil.copytree(self._data_dir, self._kept / "data")
            (self._kept / KEPT_MARKER).write_text(
                json.dumps({"key": self._key(haystack), "pages": self._index}), encoding="utf-8"
            )
            from memoryos_actors import MemoryOS

            self._stack = ExitStack()
            self._mem = self._stack.enter_context(
                MemoryOS.open(self._data_dir, config=self._config)
            )

    def context(self, question: HaystackQuestion) -> tuple[list[int], list[int]]:
        """The context (``ctx.page_ids()``) and the ranked past pages (``ctx.mtm``)."""
        ctx = self._mem.retrieve(USER, question.question, timestamp=question.timestamp)
        out = []
        for page_id in ctx.page_ids():
            index = self._index.get(str(page_id), -1)
            if index < 0:
                self.foreign_page_ids += 1
            out.append(index)
        # page_ids() lists the ranked past pages first, then STM's.
        ranked = sum(1 for item in ctx.mtm if item.kind == "page")
        return out, out[:ranked]

    def describe(self) -> dict[str, Any]:
        config = {
            k: v
            for k, v in dataclasses.asdict(self._config).items()
            if isinstance(v, (str, int, float, bool, type(None)))
        }
        if config.get("embedding_model"):
            config["embedding_model"] = Path(str(config["embedding_model"])).name
        by_kind = (self._mem.stats().get("gateway") or {}).get("by_kind") or {}
        return {
            "config": config,
            # LLM calls of this process's system by prompt kind (rerank: one per retrieve).
            "llm_calls_by_kind": {k: (v or {}).get("calls") for k, v in sorted(by_kind.items())},
            "add_turn_overloaded_retries": self.overloaded_retries,
            "foreign_page_ids": self.foreign_page_ids,
            "ingest_reused_from_kept_data": self.reused_ingest,
        }

    def close(self) -> None:
        self._stack.close()


def _make_system(
    name: str,
    work_dir: Path,
    memory_config: Mapping[str, Any],
    kept: Path | None = None,
    model_dir: str | None = None,
) -> Any:
    if name in ("bm25", "bm25-no-stopwords", "bm25-asof"):
        return _BM25System(stopwords=name != "bm25-no-stopwords", as_of=name == "bm25-asof")
    if name == "minilm-flat":
        reason = dense_unavailable(model_dir)
        if reason is not None:
            raise BenchError(f"minilm-flat cannot run: {reason}")
        assert model_dir is not None
        return _DenseSystem(model_dir, kept)
    if name == "memoryos-hybrid":
        return _MemoryOSSystem(
            name, work_dir / name, {"retrieval_mode": "hybrid", **memory_config}, kept
        )
    if name == "memoryos-hybrid-no-eviction":
        return _MemoryOSSystem(
            name,
            work_dir / name,
            {
                "retrieval_mode": "hybrid",
                **memory_config,
                "mtm_capacity": NO_EVICTION,
                "segment_max_pages": NO_EVICTION,
            },
            kept,
        )
    raise BenchError(f"unknown system {name!r}; choose from {', '.join(ALL_SYSTEMS)}")


# --------------------------------------------------------------------------------------
# Running


def _tally(
    haystack: Haystack, hits: Mapping[str, bool], split: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """Hits and recall (ours: the context holds an evidence page) overall and per type;
    with ``split``, also per part of it (``splits``: tune / validation)."""
    result = _tally_questions(haystack.questions, hits)
    if split is not None:
        result["splits"] = {
            part: _tally_questions(
                [q for q in haystack.questions if split.get(q.question_id) == part], hits
            )
            for part in SPLITS
        }
    return result


def _tally_questions(
    questions: Sequence[HaystackQuestion], hits: Mapping[str, bool]
) -> dict[str, Any]:
    per_type: dict[str, dict[str, Any]] = {}
    for q in questions:
        row = per_type.setdefault(q.question_type, {"n": 0, "hits": 0})
        row["n"] += 1
        row["hits"] += int(hits[q.question_id])
    for row in per_type.values():
        row["recall"] = row["hits"] / row["n"]
    n = len(questions)
    total = sum(int(hits[q.question_id]) for q in questions)
    return {
        "overall": {"n": n, "hits": total, "recall": total / n if n else None},
        "per_type": {t: per_type[t] for t in sorted(per_type, key=_type_order)},
    }


def _official(
    questions: Sequence[HaystackQuestion],
    metrics: Mapping[str, Mapping[str, Mapping[str, float]]],
    split: Mapping[str, str] | None,
) -> dict[str, Any]:
    """Means of the official metrics at turn and session level, abstention questions left
    out; overall and per type, for all questions and per split part."""
    scored = [q for q in questions if not q.abstention]
    parts: dict[str, list[HaystackQuestion]] = {"all": scored}
    if split is not None:
        for part in SPLITS:
            parts[part] = [q for q in scored if split.get(q.question_id) == part]
    out: dict[str, Any] = {}
    for level in ("turn", "session"):
        out[level] = {}
        for part, qs in parts.items():
            by_type: dict[str, list[HaystackQuestion]] = {}
            for q in qs:
                by_type.setdefault(q.question_type, []).append(q)
            out[level][part] = {
                "overall": _means(qs, metrics, level),
                "per_type": {
                    t: _means(by_type[t], metrics, level) for t in sorted(by_type, key=_type_order)
                },
            }
    return out


def _means(
    qs: Sequence[HaystackQuestion],
    metrics: Mapping[str, Mapping[str, Mapping[str, float]]],
    level: str,
) -> dict[str, float | int | None]:
    out: dict[str, float | int | None] = {"n": len(qs)}
    names = [f"{m}@{k}" for m in ("recall_any", "recall_all", "ndcg_any") for k in OFFICIAL_KS]
    for name in names:
        vals = [metrics[q.question_id][level][name] for q in qs]
        out[name] = sum(vals) / len(vals) if vals else None
    return out


def _type_order(name: str) -> tuple[int, str]:
    return (QUESTION_TYPES.index(name) if name in QUESTION_TYPES else len(QUESTION_TYPES), name)


def run_length(
    haystack: Haystack,
    systems: Sequence[str],
    *,
    work_dir: Path,
    memory_config: Mapping[str, Any] | None = None,
    log: Callable[[str], None] = lambda _: None,
    keep_data: Path | None = None,
    split: Mapping[str, str] | None = None,
    model_dir: str | None = None,
) -> dict[str, Any]:
    """Run every system over ``haystack``; per system: overall and per-type hits and
    recall, the questions missed, the official metrics (``official``: turn and session
    level, abstention questions left out) and timings (seconds; query latencies in ms).
    With ``split`` (question id -> tune / validation, :func:`split_of`), recall and the
    official metrics are also reported per part.

    With ``keep_data``, each memory system's ingested data is kept in
    ``keep_data/<items>/<system>`` and reused by later runs (see :class:`_MemoryOSSystem`).

    Raises:
        BenchError: a system is unknown.
    """
    unknown = [s for s in systems if s not in ALL_SYSTEMS]
    if unknown:
        raise BenchError(f"unknown system(s) {unknown}; choose from {', '.join(ALL_SYSTEMS)}")
    results: dict[str, Any] = {}
    for name in systems:
        kept = None if keep_data is None else keep_data / f"{haystack.items}" / name
        system = _make_system(
            name, work_dir / f"{haystack.items}", dict(memory_config or {}), kept, model_dir
        )
        try:
            started = time.perf_counter()
            system.ingest(haystack)
            ingest_s = time.perf_counter() - started
            reused = getattr(system, "reused_ingest", False)
            log(
                f"{name}: {len(haystack.pages)} pages "
                + ("from kept data" if reused else f"ingested in {ingest_s:.1f} s")
            )
            hits: dict[str, bool] = {}
            metrics: dict[str, dict[str, dict[str, float]]] = {}
            latencies: list[float] = []
            session_of = [p.session for p in haystack.pages]
            for q in haystack.questions:
                started = time.perf_counter()
                context, ranked = system.context(q)
                latencies.append(time.perf_counter() - started)
                hits[q.question_id] = not q.pages.isdisjoint(context)
                metrics[q.question_id] = {
                    "turn": official_metrics(ranked, q.pages),
                    "session": official_metrics(
                        [session_of[i] for i in ranked if i >= 0], q.sessions
                    ),
                }
            result = _tally(haystack, hits, split)
            result["official"] = _official(haystack.questions, metrics, split)
            result["missed"] = [
                q.question_id for q in haystack.questions if not hits[q.question_id]
            ]
            result["settings"] = system.describe()
            result["timings"] = {
                "ingest_seconds": ingest_s,
                "query_ms_p50": _ms(_percentile(latencies, 0.50)),
                "query_ms_p99": _ms(_percentile(latencies, 0.99)),
                "query_ms_max": _ms(max(latencies, default=None)),
            }
            results[name] = result
        finally:
            system.close()
    return results


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else 1000 * seconds


def check_targets(by_length: Mapping[str, Mapping[str, Any]]) -> list[dict[str, str]]:
    """Issue #45's recall targets at 500 items, on the validation questions when the
    results have a split (else on all): ours >= 85%, >= BM25 + 10 points, and behind BM25
    in no question type; and at 200 items ours >= 92% (all questions). ``status`` is
    "MET", "MISSED" or "NOT RUN"."""
    checks: list[dict[str, str]] = []

    def row(target: str, ok: bool | None, detail: str) -> None:
        status = "NOT RUN" if ok is None else ("MET" if ok else "MISSED")
        checks.append({"target": target, "status": status, "detail": detail})

    full = by_length.get("500", {})
    ours, bm25 = full.get("memoryos-hybrid"), full.get("bm25")
    part = "validation" if ours is not None and "splits" in ours else "all"
    where = f"500 items ({part} questions)"
    if ours is None or bm25 is None:
        row(f"{where}: >= 85%", None, "needs memoryos-hybrid and bm25 at 500")
        row(f"{where}: >= BM25 + 10 points", None, "")
        row(f"{where}: behind BM25 in no question type", None, "")
    else:
        if part != "all":
            ours, bm25 = ours["splits"][part], bm25["splits"][part]
        a, b = ours["overall"]["recall"], bm25["overall"]["recall"]
        row(f"{where}: >= 85%", a >= 0.85, f"{100 * a:.1f}%")
        row(
            f"{where}: >= BM25 + 10 points", a >= b + 0.10, f"{100 * a:.1f}% vs BM25 {100 * b:.1f}%"
        )
        behind = [
            f"{t} {r['hits']} < {bm25['per_type'][t]['hits']} (of {r['n']})"
            for t, r in ours["per_type"].items()
            if bm25["per_type"][t]["hits"] > r["hits"]
        ]
        row(
            f"{where}: behind BM25 in no question type",
            not behind,
            "; ".join(behind) or "never behind",
        )
    mid = by_length.get("200", {}).get("memoryos-hybrid")
    if mid is None:
        row("200 items: >= 92%", None, "needs memoryos-hybrid at 200")
    else:
        row(
            "200 items: >= 92%",
            mid["overall"]["recall"] >= 0.92,
            f"{100 * mid['overall']['recall']:.1f}%",
        )
    return checks


def _recall_table(title: str, results: Mapping[str, Mapping[str, Any]], part: str) -> list[str]:
    def pick(r: Mapping[str, Any]) -> Mapping[str, Any]:
        return r if part == "all" else r["splits"][part]

    first = pick(next(iter(results.values())))
    types = list(first["per_type"])
    header = " | ".join(f"{t} (n={first['per_type'][t]['n']})" for t in types)
    lines = [
        f"| {title} | {header} | overall (n={first['overall']['n']}) | retrieve p50 / p99 ms |",
        "| --- " + "| ---: " * (len(types) + 2) + "|",
    ]
    for name, r in results.items():
        cells = " | ".join(
            f"{100 * pick(r)['per_type'][t]['recall']:.1f}" if t in pick(r)["per_type"] else "-"
            for t in types
        )
        tm = r["timings"]
        lines.append(
            f"| {name} | {cells} | {100 * pick(r)['overall']['recall']:.1f} | "
            f"{tm['query_ms_p50']:.1f} / {tm['query_ms_p99']:.1f} |"
        )
    return lines


def markdown_tables(by_length: Mapping[str, Mapping[str, Any]]) -> str:
    """Per history length: recall (%, ours: the context holds an evidence page) per
    question type and overall, for all questions and per split part, with the question
    counts in the header; then the official metrics (abstention questions left out)."""
    lines: list[str] = []
    for length, results in by_length.items():
        if not results:
            continue
        first = next(iter(results.values()))
        pages = f"{length} items, {first['pages']:,} pages"
        parts = ["all", *(SPLITS if "splits" in first else ())]
        for part in parts:
            if part != "all" and not first["splits"][part]["overall"]["n"]:
                continue  # no question of this part in so short a history
            lines += _recall_table(f"{pages}, {part}", results, part)
            lines.append("")
        if "official" not in first:
            continue
        names = [f"{m}@{k}" for m in ("recall_any", "recall_all", "ndcg_any") for k in OFFICIAL_KS]
        lines.append(
            f"| {pages}: official metrics (no _abs) | level | questions | "
            + " | ".join(names)
            + " |"
        )
        lines.append("| --- | --- | --- " + "| ---: " * len(names) + "|")
        for name, r in results.items():
            for level in ("turn", "session"):
                for part in parts:
                    o = r["official"][level][part]["overall"]
                    cells = " | ".join(
                        "-" if o[n] is None else f"{100 * float(o[n]):.1f}" for n in names
                    )
                    lines.append(f"| {name} | {level} | {part} (n={o['n']}) | {cells} |")
        lines.append("")
    return "\n".join(lines)


def _parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python bench/longmemeval.py",
        description="LongMemEval dev set, global haystack: evidence recall of the memory "
        "system and BM25 per question type and history length.",
    )
    parser.add_argument(
        "--data",
        help=f"dev-set JSON (default: ${ENV_DATA_PATH}, else "
        f"../shared/data/{DATA_FILE} beside the repository)",
    )
    parser.add_argument(
        "--lengths",
        default=",".join(map(str, DEFAULT_LENGTHS)),
        help="comma-separated history lengths, in items from the first (default: %(default)s)",
    )
    parser.add_argument(
        "--systems",
        default=",".join(DEFAULT_SYSTEMS),
        help=f"comma-separated systems (default: %(default)s; known: {','.join(ALL_SYSTEMS)})",
    )
    parser.add_argument(
        "--embedder",
        choices=("hashing", "minilm"),
        default="hashing",
        help="embedder of the memory system (default: hashing); minilm "
        "needs --model-dir and the 'st' extra",
    )
    parser.add_argument(
        "--model-dir",
        default=None,
        help=f"local all-MiniLM-L6-v2 directory for --embedder minilm (default: ${ENV_MODEL_DIR})",
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a MemoryConfig setting for the memory system (repeatable)",
    )
    parser.add_argument(
        "--out-dir",
        default=None,
        help="where the JSON goes (default: memoryos-bench in the system's "
        "temporary directory; bench/results to record a run)",
    )
    parser.add_argument(
        "--name",
        default=None,
        help="stem of the JSON file (default: longmemeval, "
        "longmemeval_minilm with --embedder minilm)",
    )
    parser.add_argument(
        "--keep-data",
        default=None,
        metavar="DIR",
        help="keep each memory system's ingested data in DIR and reuse it "
        "in later runs with the same pages and settings (ingest does not "
        "depend on the ranking rules)",
    )
    parser.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point; returns the exit code (0 ok, 2 cannot run)."""
    args = _parse_args(argv)
    data_path = resolve_data_path(args.data)
    out_dir = Path(args.out_dir) if args.out_dir else Path(tempfile.gettempdir()) / "memoryos-bench"
    log: Callable[[str], None] = (
        (lambda _: None) if args.quiet else (lambda m: print(m, file=sys.stderr, flush=True))
    )
    try:
        systems = [s.strip() for s in args.systems.split(",") if s.strip()]
        if not systems:
            raise BenchError("--systems named no system")
        try:
            lengths = [int(x) for x in args.lengths.split(",") if x.strip()]
        except ValueError:
            raise BenchError(f"--lengths must be integers, got {args.lengths!r}") from None
        if not lengths or min(lengths) < 1:
            raise BenchError("--lengths must name at least one length >= 1")
        model_dir = args.model_dir or os.environ.get(ENV_MODEL_DIR)
        skipped_systems: dict[str, str] = {}
        if "minilm-flat" in systems:
            reason = dense_unavailable(model_dir)
            if reason is not None:  # an optional anchor: the run goes on without it
                skipped_systems["minilm-flat"] = reason
                systems.remove("minilm-flat")
                log(f"minilm-flat left out: {reason}")
        if not systems:
            raise BenchError("--systems named no system that can run here")
        items = load_items(data_path)
        split = split_of(items)
        memory_config, _, embedder_info = _embedder_setup(
            argparse.Namespace(embedder=args.embedder, model_dir=args.model_dir, set=args.set)
        )
        memory_config = {**memory_config, **_parse_settings(args.set)}
        by_length: dict[str, dict[str, Any]] = {}
        haystacks: dict[str, Haystack] = {}
        with tempfile.TemporaryDirectory(prefix="longmemeval-bench-") as work:
            for length in lengths:
                haystack = build_haystack(items, length)
                haystacks[str(length)] = haystack
                log(
                    f"{length} items: {len(haystack.pages)} pages, "
                    f"{len(haystack.questions)} questions"
                )
                results = run_length(
                    haystack,
                    systems,
                    work_dir=Path(work),
                    memory_config=memory_config,
                    log=log,
                    keep_data=Path(args.keep_data) if args.keep_data else None,
                    split=split,
                    model_dir=model_dir,
                )
                for r in results.values():
                    r["pages"] = len(haystack.pages)
                by_length[str(length)] = results
    except BenchError as exc:
        print(f"longmemeval bench: {exc}", file=sys.stderr)
        return 2
    targets = check_targets(by_length)
    shown = list(sys.argv[1:] if argv is None else argv)
    for i, arg in enumerate(shown[:-1]):
        if arg in ("--model-dir", "--data", "--out-dir", "--keep-data"):  # no path of this machine
            shown[i + 1] = f"<dir>/{Path(shown[i + 1]).name}"
    report = {
        "benchmark": "longmemeval-global-haystack",
        "date": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "command": shlex.join(["python", "bench/longmemeval.py", *shown]),
        "machine": _machine_info(),
        "data": {
            "file": data_path.name,
            "sha256_16": _file_digest(data_path),
            "licence": "MIT (LongMemEval, Wu et al., ICLR 2025); not redistributed",
            "items": len(items),
        },
        "method": {
            "haystack": "the sessions of the first N items, in file order, as one user; "
            "a page = (user, assistant) turns at positions (2k, 2k+1) of a "
            "session; other turns left out",
            "hit": "the context holds a page with one of the question's has_answer turns",
            "memoryos_context": f"ctx.page_ids(): top_k_pages={TOP_K} plus STM",
            "bm25_context": f"top {TOP_K} + the {RECENT} most recent pages",
            "turn_spacing_seconds": TURN_SPACING_SECONDS,
            "question_time": "each question's question_date",
            "split": f"per question type, ids ordered by SHA-256; every {VALIDATION_EVERY}rd "
            "is a validation question, the rest tune (rules are tuned on tune only)",
            "official_metrics": "LongMemEval's recall_any/recall_all/ndcg_any at k = "
            + ", ".join(map(str, OFFICIAL_KS))
            + " over the ranked past pages (turn level: a page is a user turn and its "
            "reply) and over their sessions in rank order (session level); abstention "
            "questions (_abs) left out",
            "embedder": embedder_info,
        },
        "haystacks": {
            k: {
                "pages": len(h.pages),
                "questions": len(h.questions),
                "left_out_turns": h.left_out_turns,
                "skipped": dict(h.skipped),
            }
            for k, h in haystacks.items()
        },
        "split": {part: sum(1 for v in split.values() if v == part) for part in SPLITS},
        "skipped_systems": skipped_systems,
        "results": by_length,
        "targets": targets,
    }
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = args.name or (
        "longmemeval" if args.embedder == "hashing" else f"longmemeval_{args.embedder}"
    )
    path = out_dir / f"{stem}.json"
    path.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(markdown_tables(by_length))
    for check in targets:
        print(f"- {check['status']}: {check['target']} ({check['detail']})")
    print(f"\nresults: {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
