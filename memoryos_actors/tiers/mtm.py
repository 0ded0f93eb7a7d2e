"""MTM: the mid-term memory tier, pages grouped into topic segments.

Pure state and transitions (no threads, no I/O, time from an injected clock), following
MemoryOS (Kang et al., 2025). Why this module is long (about 950 lines): ``MTMCore`` is one
state machine whose invariants (a page in exactly one segment, the vector, BM25 and chain
indexes in step with the segments, heat and eviction order) span placement, eviction,
promotion and search; its pieces of pure maths already live apart (``scoring.py``,
``lexicon.py``, ``tiers/temporal.py``), and splitting the class would spread those
invariants over modules.

* **Segmenting.** A page joins the segment with the highest
  ``F_score = cos(e_s, e_p) + Jaccard(K_s, K_p)`` if that score is strictly above θ
  (``fscore_threshold``); otherwise it opens a new segment. A segment's embedding ``e_s`` is
  the L2-normalised mean of its pages' embeddings and its keyword set ``K_s`` is the
  ``segment_keyword_limit`` (24) most frequent page keywords (0: all of them); both follow
  the pages as they join and leave.
* **Heat.** ``heat = α·N_visit + β·L_interaction + γ·exp(-Δt/μ)`` where ``N_visit`` counts
  retrievals, ``L_interaction`` counts pages gathered since creation or the last promotion,
  and ``Δt`` is the time since the last insert or retrieval. Heat is recomputed on every
  insert and :meth:`MTMCore.tick`.
* **Promotion.** A segment whose heat is above τ (``promotion_threshold``) and, with
  ``promotion_needs_new_page`` (the default), that gathered at least one page since its last
  promotion is handed to LPM (``MTMEffects.promoted``) and its ``L_interaction`` reset to 0.
  The second condition stops a segment that is retrieved often, but gets no new pages, from
  being promoted on every tick with nothing new to learn.
* **Eviction.** While there are more than ``mtm_capacity`` segments, the coldest (lowest
  heat; then least recently accessed; then oldest) is removed and returned in
  ``MTMEffects.evicted_segments`` with its pages, for the archive. A segment holds at most
  ``segment_max_pages`` pages; older ones go to ``MTMEffects.evicted_pages``.
* **Retrieval.** See :meth:`MTMCore.search` for the ``"paper"`` and ``"hybrid"`` modes.

Candidate segments and pages come from hnswlib indexes over segment and page embeddings;
the top ``max(4·n, 32)`` candidates are rescored exactly, and small memories (fewer live
vectors than that) are searched exhaustively, so results are exact at small sizes. The
candidates are the nearest by cosine alone, so above 64 segments a segment whose F_score
comes mostly from shared keywords can be missed; ``paper_exact`` scores every segment.

Which of these rules apply comes from :meth:`MemoryConfig.mtm_rules`: ``paper_exact``
turns every extension off (no chain affinity, unbounded segments, K_s the union of the page
keywords, promotion without a new page, exact segment scoring). Promotion after a retrieval
(``promote_on_retrieval``) is carried out by the MTM actor, which runs :meth:`MTMCore.tick`
after the search.
"""

from __future__ import annotations

import bisect
import dataclasses
import math
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from memoryos_actors.clock import Clock
from memoryos_actors.config import MemoryConfig, MTMRules
from memoryos_actors.errors import EmbedderMismatch, InvalidInput
from memoryos_actors.lexicon import (
    LexIndex,
    asks_about_user,
    bm25_idf,
    bm25_scores,
    stem,
    term_counts,
    term_id_counts,
    terms,
)
from memoryos_actors.messages import (
    MTMEffects,
    MTMHits,
    Page,
    PageHit,
    SegmentHit,
    SegmentRecord,
    SegmentView,
    normalize_keywords,
)
from memoryos_actors.scoring import heat, jaccard
from memoryos_actors.tiers._ann import AnnIndex
from memoryos_actors.tiers.temporal import asks_about_past, supersedes, time_window

if TYPE_CHECKING:
    from memoryos_actors.cold_items import ColdCandidates, ColdItem, ColdRow

__all__ = [
    "CANDIDATE_FACTOR",
    "HYBRID_KEYWORD_WEIGHT",
    "HYBRID_DENSE_WEIGHT",
    "HYBRID_LEXICAL_WEIGHT",
    "HYBRID_NEIGHBOR_WEIGHT",
    "HYBRID_SEGMENT_WEIGHT",
    "LEXICAL_CANDIDATES",
    "NEIGHBOUR_PASSAGE_CHARS",
    "SUPERSEDE_LEXICAL_SHARE",
    "SUPERSEDE_MARGIN",
    "TIME_WINDOW_WEIGHT",
    "USER_SIDE_WEIGHT",
    "WINDOW_CANDIDATES",
    "MIN_CANDIDATES",
    "SEGMENT_KEYWORD_LIMIT",
    "MTMCore",
    "base_score",
    "fused_scores",
    "MTMEffects",
    "MTMHits",
]

SEGMENT_KEYWORD_LIMIT = 24
"""Default ``segment_keyword_limit``: most frequent page keywords kept in a segment's K_s.

A plain union would grow with every page and make Jaccard against a single page's dozen
keywords tend to 0, so large segments could never be joined again."""

CANDIDATE_FACTOR = 4
"""ANN candidates fetched per result wanted, before exact rescoring."""

MIN_CANDIDATES = 32
"""Fewest ANN candidates fetched; memories with fewer live vectors are searched exactly."""

HYBRID_LEXICAL_WEIGHT = 0.6
"""Hybrid mode: weight of the page's BM25 score (divided by the best pooled BM25 score)."""

HYBRID_DENSE_WEIGHT = 0.3
"""Hybrid mode: weight of cos(page, query)."""

HYBRID_KEYWORD_WEIGHT = 0.05
"""Hybrid mode: weight of Jaccard(query keywords, page keywords)."""

HYBRID_SEGMENT_WEIGHT = 0.05
"""Hybrid mode: weight of the page's segment F_score."""

HYBRID_NEIGHBOR_WEIGHT = 0.7
"""Hybrid mode: weight of the best base score of the turn just before or after (scaled
down for long turns, see :data:`NEIGHBOUR_PASSAGE_CHARS`)."""

NEIGHBOUR_PASSAGE_CHARS = 1000
"""Hybrid mode: a neighbour counts fully while the two turns together hold at most this
many characters, and in proportion beyond: a short turn ("Yes, in May!") needs the turn
beside it to be understood, a long one carries its own context (chosen on LoCoMo, whose
pages are ~260 characters, and the LongMemEval dev set, ~2,400)."""

USER_SIDE_WEIGHT = 1.5
"""Hybrid mode: for a question in the first person ("what did I buy?"), the BM25 of a
page's query side (the user's own words) is added, times this, to the page's BM25."""

TIME_WINDOW_WEIGHT = 1.0
"""Hybrid mode: bonus of a page written in the time window the query names, when the
window holds a single page; a window with more pages gives less, in proportion to its
BM25 idf (see :meth:`MTMCore._window_candidates`)."""

WINDOW_CANDIDATES = 100
"""Hybrid mode: a time window holding at most this many pages (hot and archived) adds
all of them to the candidates; a wider one only lifts the candidates found otherwise."""

SUPERSEDE_MARGIN = 1e-3
"""Hybrid mode: how far above a superseded page the newer page that changes it is put."""

SUPERSEDE_LEXICAL_SHARE = 0.75
"""Hybrid mode: a newer page supersedes an older one only if its BM25 score is at least
this share of the older page's: it answers the question about as well."""

LEXICAL_CANDIDATES = 200
"""Hybrid mode: pages with the best BM25 scores added to the candidate pool."""

CHAIN_MEMORY = 64
"""Dialogue chains remembered for chain affinity (most recent first)."""

_STATE_VERSION = 1

# Archived neighbours are fetched around this many of the best candidates (per page
# wanted, at least the second number).
_NEIGHBOUR_FETCH_FACTOR, _NEIGHBOUR_FETCH_MIN = 5, 50

# Why a page is a hybrid candidate (bit flags; their names appear in a hit's ``why``).
_SRC_SEGMENT, _SRC_DENSE, _SRC_BM25, _SRC_ARCHIVE, _SRC_NEIGHBOUR, _SRC_TIME = 1, 2, 4, 8, 16, 32
_SRC_NAMES = (
    (_SRC_SEGMENT, "segment"),
    (_SRC_DENSE, "dense"),
    (_SRC_BM25, "bm25"),
    (_SRC_ARCHIVE, "archive-bm25"),
    (_SRC_NEIGHBOUR, "neighbour"),
    (_SRC_TIME, "time-window"),
)

ColdWindow = Callable[
    [float, float, int], "tuple[int, Mapping[int, ColdItem] | Mapping[int, ColdRow]]"
]
"""Counts the archived pages written in ``[start, end)`` and, when at most ``limit``,
returns them by seq, in full or as scoring rows
(:meth:`~memoryos_actors.store.cold.ColdIndex.pages_between`)."""


def base_score(lexical: float, cosine: float, keywords: float, segment: float) -> float:
    """Hybrid mode: a candidate's base score from its sources, each weighted
    (:data:`HYBRID_LEXICAL_WEIGHT` and the others): its BM25 share (BM25 over the best of
    the pool, in [0, 1]), cos(page, query), Jaccard(query keywords, page keywords) and its
    segment's F_score. Weights are positive, so the score never falls as a source rises."""
    return (
        HYBRID_LEXICAL_WEIGHT * lexical
        + HYBRID_DENSE_WEIGHT * cosine
        + HYBRID_KEYWORD_WEIGHT * keywords
        + HYBRID_SEGMENT_WEIGHT * segment
    )


def _near(base: Mapping[int, float], chars: Mapping[int, int], seq: int) -> float:
    """The best base score of the turn just before or after ``seq``, each scaled by how
    much of a passage of NEIGHBOUR_PASSAGE_CHARS the two turns fill: next to a long turn,
    which holds its own context, the neighbour counts for less."""
    best = 0.0
    own = chars[seq]
    for n in (seq - 1, seq + 1):
        b = base.get(n)
        if b is not None:
            best = max(best, b * min(1.0, NEIGHBOUR_PASSAGE_CHARS / max(own + chars[n], 1)))
    return best


def fused_scores(base: Mapping[int, float], chars: Mapping[int, int]) -> dict[int, float]:
    """Hybrid mode: each candidate's score (by page seq) from the base scores
    (:func:`base_score`) of the candidates: its own plus :data:`HYBRID_NEIGHBOR_WEIGHT`
    times the best of the turns beside it (seq - 1, seq + 1), scaled down for long turns
    (``chars``: each candidate's length in characters; see :data:`NEIGHBOUR_PASSAGE_CHARS`).

    Monotone: raising one candidate's base score by d raises its own score by d and any
    other's by at most HYBRID_NEIGHBOR_WEIGHT * d < d, so it never falls in the ranking.
    """
    return {seq: b + HYBRID_NEIGHBOR_WEIGHT * _near(base, chars, seq) for seq, b in base.items()}


def base_scores(
    lexical: npt.NDArray[np.float64],
    cosine: npt.NDArray[np.float64],
    keywords: npt.NDArray[np.float64],
    segment: npt.NDArray[np.float64],
) -> npt.NDArray[np.float64]:
    """:func:`base_score` of many candidates at once (one array per source, one row per
    candidate), bit for bit: the same operations in the same order, element by element."""
    return (
        HYBRID_LEXICAL_WEIGHT * lexical
        + HYBRID_DENSE_WEIGHT * cosine
        + HYBRID_KEYWORD_WEIGHT * keywords
        + HYBRID_SEGMENT_WEIGHT * segment
    )


def _neighbour_bests(
    seqs: npt.NDArray[np.int64],
    base: npt.NDArray[np.float64],
    chars: npt.NDArray[np.int64],
) -> npt.NDArray[np.float64]:
    """:func:`_near` of every candidate, for candidates in ascending seq order: the turns
    beside row ``i`` can only be rows ``i - 1`` and ``i + 1``."""
    best = np.zeros(len(seqs), dtype=np.float64)
    if len(seqs) < 2:
        return best
    beside = (seqs[1:] - seqs[:-1]) == 1  # rows i and i + 1 are neighbouring turns
    scale = np.minimum(1.0, NEIGHBOUR_PASSAGE_CHARS / np.maximum(chars[:-1] + chars[1:], 1))
    # As _near: the turn before first, then the turn after, each only if it is there.
    best[1:] = np.where(beside, np.maximum(best[1:], base[:-1] * scale), best[1:])
    best[:-1] = np.where(beside, np.maximum(best[:-1], base[1:] * scale), best[:-1])
    return best


def fused_score_array(
    seqs: npt.NDArray[np.int64],
    base: npt.NDArray[np.float64],
    chars: npt.NDArray[np.int64],
) -> npt.NDArray[np.float64]:
    """:func:`fused_scores` of candidates given as arrays in ascending (distinct) seq
    order: ``base[i]`` and ``chars[i]`` of the candidate of turn ``seqs[i]``. Bit for bit
    the pure function's values (tests/unit/test_hybrid_rules.py checks it), without a
    Python step per candidate; retrieval scores hundreds a query."""
    return base + HYBRID_NEIGHBOR_WEIGHT * _neighbour_bests(seqs, base, chars)


def _query_side(item: ColdItem | ColdRow) -> int:
    """How many of an archived page's terms are its query side's (its first ones)."""
    if item.query_terms is not None:
        return item.query_terms
    # Indexed before the count was kept: read it from the archived page itself (a narrow
    # row always has the count: the index fills it in for every page).
    return len(terms(str(_full(item).record.get("query", ""))))


def _full(item: ColdItem | ColdRow) -> ColdItem:
    """``item`` read in full (the search reads the pages it returns in full first)."""
    if not item.complete:
        raise TypeError(f"an archived page read as a scoring row only: {item!r}")
    return item  # type: ignore[return-value]


class _Rows:
    """Hybrid scores of a query's candidates, one row each: turn seq, base score and its
    parts (BM25 share, cosine, keyword Jaccard, segment F), raw BM25, length in characters
    and time. Arrays, so fusion and ranking are a few numpy operations."""

    __slots__ = ("base", "bm25", "chars", "cos", "kw", "lex", "seg", "seqs", "times")

    def __init__(
        self,
        seqs: npt.NDArray[np.int64],
        base: npt.NDArray[np.float64],
        bm25: npt.NDArray[np.float64],
        chars: npt.NDArray[np.int64],
        cos: npt.NDArray[np.float64],
        kw: npt.NDArray[np.float64],
        lex: npt.NDArray[np.float64],
        seg: npt.NDArray[np.float64],
        times: npt.NDArray[np.float64],
    ) -> None:
        self.seqs, self.base, self.bm25, self.chars = seqs, base, bm25, chars
        self.cos, self.kw, self.lex, self.seg, self.times = cos, kw, lex, seg, times

    def take(self, index: npt.NDArray[np.intp]) -> _Rows:
        """These rows in the order (or the subset) ``index`` gives."""
        return _Rows(*(getattr(self, name)[index] for name in _ROW_FIELDS))

    def concat(self, other: _Rows) -> _Rows:
        """These rows then ``other``'s."""
        return _Rows(
            *(np.concatenate((getattr(self, name), getattr(other, name))) for name in _ROW_FIELDS)
        )


_ROW_FIELDS = ("seqs", "base", "bm25", "chars", "cos", "kw", "lex", "seg", "times")


def page_terms(page: Page) -> list[str]:
    """BM25 terms of a page: both sides of the turn (stemmed, stop words removed)."""
    return terms(f"{page.query} {page.response}")


class _Segment:
    """Mutable segment state; never leaves the core (views and records are copies)."""

    __slots__ = (
        "created",
        "emb_sum",
        "embedding",
        "embs",
        "heat",
        "keywords",
        "kw_counts",
        "l_interaction",
        "last_access",
        "n_visit",
        "number",
        "pages",
        "summary",
        "summary_kw",
    )

    def __init__(self, number: int, now: float) -> None:
        self.number = number
        self.pages: list[Page] = []
        self.embs: list[npt.NDArray[np.float32]] = []
        self.kw_counts: Counter[str] = Counter()
        self.summary = ""
        self.summary_kw: frozenset[str] = frozenset()
        self.keywords: frozenset[str] = frozenset()
        self.embedding: npt.NDArray[np.float32] = np.zeros(0, dtype=np.float32)
        # Running sum of the page embeddings, kept so e_s costs O(dim) per insert and
        # removal. (A core restored from a snapshot sums the remaining pages afresh, so its
        # e_s can differ from the live one in the last bits of float64 rounding.)
        self.emb_sum: npt.NDArray[np.float64] | None = None
        self.n_visit = 0
        self.l_interaction = 0
        self.last_access = now
        self.created = now
        self.heat = 0.0

    @property
    def segment_id(self) -> str:
        return f"s{self.number}"

    def refresh(self, keyword_limit: int | None) -> None:
        """Recompute e_s and K_s from the current pages (K_s: the ``keyword_limit`` most
        frequent page keywords, or all of them for None)."""
        total = self.emb_sum
        if total is None:
            total = self._resum()
        norm = math.sqrt(float(np.dot(total, total)))
        self.embedding = (total / norm if norm > 0 else total).astype(np.float32)
        # Ties broken alphabetically so K_s does not depend on insertion order of equals.
        top = sorted(self.kw_counts.items(), key=lambda kv: (-kv[1], kv[0]))
        # Summary keywords are kept apart: summaries arrive after a debounce measured in wall
        # time, and letting them move K_s would make placement depend on scheduling.
        self.keywords = frozenset(k for k, _ in top[:keyword_limit])

    def _resum(self) -> npt.NDArray[np.float64]:
        total = np.zeros(len(self.embs[0]) if self.embs else 0, dtype=np.float64)
        for emb in self.embs:
            total += emb
        self.emb_sum = total
        return total

    def add(self, page: Page, emb: npt.NDArray[np.float32]) -> None:
        self.pages.append(page)
        self.embs.append(emb)
        if self.emb_sum is None:
            self._resum()
        else:
            self.emb_sum += emb
        self.kw_counts.update(page.keywords)

    def pop_oldest(self) -> tuple[Page, npt.NDArray[np.float32]]:
        page = self.pages.pop(0)
        emb = self.embs.pop(0)
        if self.emb_sum is not None:
            self.emb_sum -= emb
        self.kw_counts.subtract(page.keywords)
        for k in page.keywords:
            if self.kw_counts[k] <= 0:
                del self.kw_counts[k]
        return page, emb

    def view(self) -> SegmentView:
        return SegmentView(
            self.segment_id,
            self.summary,
            self.keywords,
            tuple(p.page_id for p in self.pages),
            self.heat,
            self.n_visit,
            self.l_interaction,
            self.last_access,
            self.created,
        )

    def record(self, user_id: str) -> SegmentRecord:
        return SegmentRecord(
            user_id,
            self.segment_id,
            self.summary,
            self.keywords,
            tuple(self.pages),
            self.heat,
            self.n_visit,
            self.l_interaction,
            self.last_access,
            self.created,
        )


class MTMCore:
    """Mid-term memory of one user: topic segments of pages, heat, promotion, eviction.

    Args:
        config: thresholds, capacities and heat coefficients (``fscore_threshold``,
            ``mtm_capacity``, ``segment_max_pages``, ``heat_*``, ``recency_mu``,
            ``promotion_threshold``, ``top_m_segments``, ``top_k_pages``,
            ``retrieval_mode``, ``seed``).
        dim: embedding length.
        clock: time source for inserts and searches that are not given ``now``.
    """

    def __init__(self, config: MemoryConfig, dim: int, clock: Clock) -> None:
        if not isinstance(config, MemoryConfig):
            raise InvalidInput(f"config must be a MemoryConfig, got {type(config).__name__}")
        if isinstance(dim, bool) or not isinstance(dim, int) or dim < 1:
            raise InvalidInput(f"dim must be an int >= 1, got {dim!r}")
        self._config = config
        self._rules = config.mtm_rules()
        self._dim = dim
        self._clock = clock
        self._segments: dict[str, _Segment] = {}
        self._page_segment: dict[int, str] = {}  # page seq -> segment id
        self._seg_index = AnnIndex(dim, config.seed)
        self._page_index = AnnIndex(dim, config.seed)
        self._lex = LexIndex()
        # The query side (the user's words) of each page, scored again for questions in
        # the first person; and the pages' times in order, for time windows.
        self._lex_user = LexIndex()
        self._times: list[tuple[float, int]] = []
        # Per page (by seq), what hybrid scoring reads of every candidate: its length in
        # characters, its keywords and its time (kept with the BM25 indexes, so in step
        # with the pages held; a page is immutable in what these read).
        self._page_info: dict[int, tuple[int, frozenset[str], float]] = {}
        self._chains: dict[str, str] = {}  # dialogue chain id -> segment id, oldest first
        self._next_segment = 1
        self._max_seq = 0
        self._user_id: str | None = None
        self._evicted_embs: dict[int, npt.NDArray[np.float32]] = {}

    # ------------------------------------------------------------------ properties

    @property
    def dim(self) -> int:
        """Embedding length."""
        return self._dim

    @property
    def max_seq(self) -> int:
        """Highest page seq inserted (0 before the first); lower or equal seqs are ignored."""
        return self._max_seq

    @property
    def rules(self) -> MTMRules:
        """The MTM rules in force (see :meth:`MemoryConfig.mtm_rules`)."""
        return self._rules

    @property
    def user_id(self) -> str | None:
        """The user whose pages this core holds (None before the first insert)."""
        return self._user_id

    def __len__(self) -> int:
        """Number of segments."""
        return len(self._segments)

    # ------------------------------------------------------------------ helpers

    def _embedding(self, value: npt.ArrayLike, what: str) -> npt.NDArray[np.float32]:
        try:
            arr = np.array(value, dtype=np.float32).reshape(-1)
        except (TypeError, ValueError):
            raise InvalidInput(f"{what} must be a numeric vector") from None
        if arr.shape != (self._dim,):
            raise InvalidInput(f"{what} must have {self._dim} values, got shape {arr.shape}")
        # One dot product checks finiteness (any NaN or inf makes it non-finite; float64
        # so huge finite values cannot overflow) and gives the norm.
        sq = float(np.dot(arr.astype(np.float64), arr.astype(np.float64)))
        if not math.isfinite(sq):
            raise InvalidInput(f"{what} must be finite")
        if sq > 0 and abs(sq - 1.0) > 1e-6:
            arr = (arr / math.sqrt(sq)).astype(np.float32)
        arr.flags.writeable = False
        return arr

    def _now(self, now: float | None) -> float:
        if now is None:
            return float(self._clock.now())
        if isinstance(now, bool) or not isinstance(now, (int, float)) or not math.isfinite(now):
            raise InvalidInput(f"now must be a finite number of seconds, got {now!r}")
        return float(now)

    def _heat(self, seg: _Segment, now: float) -> float:
        c = self._config
        return heat(
            seg.n_visit,
            seg.l_interaction,
            seg.last_access,
            now,
            c.heat_alpha,
            c.heat_beta,
            c.heat_gamma,
            c.recency_mu,
        )

    def _ranked_segments(
        self, emb: npt.NDArray[np.float32], kw: frozenset[str], n: int
    ) -> list[tuple[float, _Segment]]:
        """The ``n`` best segments by exact F_score, best first (ties: older segment).

        F_score is computed for the index's nearest candidates by cosine, or for every
        segment under ``paper_exact``.
        """
        if n <= 0 or not self._segments:
            return []
        if self._rules.exact_segment_scoring:
            segs = list(self._segments.values())
        else:
            labels = self._seg_index.candidates(emb, max(CANDIDATE_FACTOR * n, MIN_CANDIDATES))
            segs = [self._segments[f"s{lab}"] for lab in labels]
        # Segment and query embeddings are unit length (or zero), so one matrix product
        # gives every cosine; this is scoring.f_score, batched. (The segment index holds
        # each segment's e_s.)
        cos = np.clip(self._seg_index.dots(emb, [seg.number for seg in segs]), -1.0, 1.0)
        scored = [
            (float(c) + jaccard(seg.keywords, kw), seg) for c, seg in zip(cos, segs, strict=True)
        ]
        scored.sort(key=lambda fs: (-fs[0], fs[1].number))
        return scored[:n]

    def _index_text(self, page: Page) -> None:
        """Add a page to the BM25 indexes (whole page, query side) and the time list."""
        self._lex.add(page.seq, page_terms(page))
        self._lex_user.add(page.seq, terms(page.query))
        bisect.insort(self._times, (page.timestamp, page.seq))
        self._page_info[page.seq] = (
            len(page.query) + len(page.response),
            page.keywords,
            page.timestamp,
        )

    def _unindex_text(self, page: Page) -> None:
        """Remove a page from what :meth:`_index_text` added it to."""
        self._lex.remove(page.seq)
        self._lex_user.remove(page.seq)
        self._page_info.pop(page.seq, None)
        i = bisect.bisect_left(self._times, (page.timestamp, page.seq))
        if i < len(self._times) and self._times[i] == (page.timestamp, page.seq):
            del self._times[i]

    def _drop_segment(self, seg: _Segment) -> None:
        del self._segments[seg.segment_id]
        self._seg_index.remove(seg.number)
        for page, emb in zip(seg.pages, seg.embs, strict=True):
            self._evicted_embs[page.seq] = emb
            self._page_index.remove(page.seq)
            self._unindex_text(page)
            self._page_segment.pop(page.seq, None)

    def _maintain(self, now: float) -> tuple[tuple[SegmentRecord, ...], tuple[SegmentRecord, ...]]:
        """Recompute heat, promote hot segments, evict the coldest above capacity."""
        user = self._user_id or ""
        promoted: list[SegmentRecord] = []
        for seg in self._segments.values():
            seg.heat = self._heat(seg, now)
            gathered = seg.l_interaction > 0 or not self._rules.promotion_needs_new_page
            if seg.heat > self._config.promotion_threshold and gathered:
                seg.l_interaction = 0
                seg.heat = self._heat(seg, now)
                promoted.append(seg.record(user))
        evicted: list[SegmentRecord] = []
        while len(self._segments) > self._config.mtm_capacity:
            victim = min(self._segments.values(), key=lambda s: (s.heat, s.last_access, s.number))
            self._drop_segment(victim)
            evicted.append(victim.record(user))
        return tuple(promoted), tuple(evicted)

    def _chain_segment(self, page: Page) -> _Segment | None:
        """The segment of the page's dialogue chain, if chain affinity applies.

        With ``config.chain_affinity``, a page that continues a dialogue chain (the LLM
        judged it on the same topic as the page before) joins the segment that holds the
        chain, as long as that segment is still in MTM and not full. Otherwise placement
        is the paper's F_score rule.
        """
        if not (self._rules.chain_affinity and page.chain_id):
            return None
        sid = self._chains.get(page.chain_id)
        seg = self._segments.get(sid) if sid is not None else None
        max_pages = self._rules.segment_max_pages
        if seg is None or (max_pages is not None and len(seg.pages) >= max_pages):
            return None
        return seg

    # ------------------------------------------------------------------ transitions

    def insert(
        self, page: Page, embedding: npt.ArrayLike, *, now: float | None = None
    ) -> MTMEffects:
        """Put ``page`` (with its ``embedding``) into its best segment or a new one.

        Args:
            page: a page that left STM.
            embedding: the page's embedding (``dim`` values; normalised here).
            now: time of the insert in seconds (default: the clock). Passing the original
                time makes a WAL replay reproduce the same state.

        Returns:
            What happened: the segment used, pages pushed out of it, promotions and
            evictions. A page with ``seq <= max_seq`` is a duplicate: nothing changes and
            ``duplicate`` is True.

        Raises:
            InvalidInput: bad page or embedding, or a page of another user.
        """
        if not isinstance(page, Page):
            raise InvalidInput(f"MTMCore.insert needs a Page, got {type(page).__name__}")
        if self._user_id is not None and page.user_id != self._user_id:
            raise InvalidInput(
                f"page of user {page.user_id!r} inserted into the MTM of user {self._user_id!r}"
            )
        emb = self._embedding(embedding, "embedding")
        if page.seq <= self._max_seq:
            return MTMEffects(segment_id=self._page_segment.get(page.seq), duplicate=True)
        t = self._now(now)
        self._user_id = page.user_id
        self._max_seq = page.seq

        seg = self._chain_segment(page)
        created = False
        if seg is None:
            best = self._ranked_segments(emb, page.keywords, 1)
            if best and best[0][0] > self._config.fscore_threshold:
                seg = best[0][1]
            else:
                seg, created = _Segment(self._next_segment, t), True
                self._next_segment += 1
                self._segments[seg.segment_id] = seg
        if page.chain_id:
            self._chains.pop(page.chain_id, None)
            self._chains[page.chain_id] = seg.segment_id
            while len(self._chains) > CHAIN_MEMORY:
                del self._chains[next(iter(self._chains))]
        seg.add(page, emb)
        self._index_text(page)
        seg.l_interaction += 1
        seg.last_access = t
        self._page_segment[page.seq] = seg.segment_id
        self._page_index.upsert(page.seq, emb)
        pushed_out: list[Page] = []
        max_pages = self._rules.segment_max_pages
        while max_pages is not None and len(seg.pages) > max_pages:
            old, old_emb = seg.pop_oldest()
            self._evicted_embs[old.seq] = old_emb
            self._page_index.remove(old.seq)
            self._unindex_text(old)
            del self._page_segment[old.seq]
            pushed_out.append(old)
        seg.refresh(self._rules.segment_keyword_limit)
        self._seg_index.upsert(seg.number, seg.embedding)

        promoted, evicted = self._maintain(t)
        alive = seg.segment_id in self._segments
        return MTMEffects(
            segment_id=seg.segment_id,
            created=created,
            evicted_segments=evicted,
            evicted_pages=tuple(pushed_out),
            promoted=promoted,
            summary_due=(seg.segment_id,) if alive else (),
        )

    def tick(self, now: float | None = None) -> MTMEffects:
        """Recompute every segment's heat at ``now`` (seconds; default the clock), then
        promote and evict as on insert."""
        promoted, evicted = self._maintain(self._now(now))
        return MTMEffects(evicted_segments=evicted, promoted=promoted)

    def set_summary(self, segment_id: str, summary: str, keywords: Iterable[str] = ()) -> bool:
        """Store an LLM summary and its keywords for a segment (K_s stays the page keywords).

        Returns False (and changes nothing) if the segment is gone (evicted meanwhile).
        """
        if not isinstance(summary, str):
            raise InvalidInput(f"summary must be a str, got {type(summary).__name__}")
        seg = self._segments.get(segment_id)
        if seg is None:
            return False
        seg.summary = summary
        seg.summary_kw = normalize_keywords(keywords)
        seg.refresh(self._rules.segment_keyword_limit)
        return True

    def discard_segment(self, segment_id: str) -> bool:
        """Remove a segment and its pages without effects (they are archived already).

        Used by recovery to re-apply evictions that happened after the snapshot it starts
        from. Returns False if the segment is not here.
        """
        seg = self._segments.get(segment_id)
        if seg is None:
            return False
        self._drop_segment(seg)
        for page in seg.pages:
            self._evicted_embs.pop(page.seq, None)
        return True

    def take_evicted_embeddings(self) -> dict[int, npt.NDArray[np.float32]]:
        """Embeddings of the pages evicted since the last call, by seq (for the archive).

        Pages removed by :meth:`discard_segment` / :meth:`discard_page` are not included
        (they were archived before).
        """
        out, self._evicted_embs = self._evicted_embs, {}
        return out

    def clear_chain_summaries(self, scrubbed: Callable[[str, int], bool]) -> int:
        """Clear the chain summary (``meta_chain``) of every page for which
        ``scrubbed(chain_id, seq)`` is true; returns how many. The pages' embeddings stay
        (they are vectors, not text)."""
        n = 0
        for seg in self._segments.values():
            for i, page in enumerate(seg.pages):
                if page.meta_chain and scrubbed(page.chain_id, page.seq):
                    seg.pages[i] = dataclasses.replace(page, meta_chain="")
                    n += 1
        return n

    def segment_of(self, seq: int) -> str | None:
        """The id of the segment holding the page of turn ``seq`` (None if not here)."""
        return self._page_segment.get(seq)

    def discard_page(self, seq: int) -> bool:
        """Remove one page without effects (it is archived already); see
        :meth:`discard_segment`. A segment left empty is removed too."""
        sid = self._page_segment.get(seq)
        if sid is None:
            return False
        seg = self._segments[sid]
        i = _index_of(seg.pages, seq)
        page = seg.pages[i]
        del seg.pages[i]
        emb = seg.embs.pop(i)
        if seg.emb_sum is not None:
            seg.emb_sum -= emb
        seg.kw_counts.subtract(page.keywords)
        seg.kw_counts = +seg.kw_counts
        self._page_index.remove(seq)
        self._unindex_text(page)
        del self._page_segment[seq]
        if not seg.pages:
            self._drop_segment(seg)
        else:
            seg.refresh(self._rules.segment_keyword_limit)
            self._seg_index.upsert(seg.number, seg.embedding)
        return True

    # ------------------------------------------------------------------ retrieval

    def search(
        self,
        query_emb: npt.ArrayLike,
        query_kw: Iterable[str] = frozenset(),
        top_m: int | None = None,
        top_k: int | None = None,
        now: float | None = None,
        mode: str | None = None,
        cold: ColdCandidates | None = None,
        cold_pages: Callable[[Iterable[int]], Mapping[int, ColdItem]] | None = None,
        query_text: str = "",
        cold_window: ColdWindow | None = None,
        cold_rows: Callable[[Iterable[int]], Mapping[int, ColdRow]] | None = None,
    ) -> MTMHits:
        """Find the pages most relevant to a query; mark the segments used as visited.

        Modes:

        * ``"paper"``: the two-stage retrieval of MemoryOS. The ``top_m`` segments with the
          highest F_score(segment, query) are chosen, then the ``top_k`` pages among them
          with the highest cosine to the query. Every chosen segment counts as visited.
          ``why``: ``"segment s3 F=0.71; page cos=0.52"``.
        * ``"hybrid"``: the pages of the paper's ``top_m`` segments are pooled with the
          pages nearest to the query in a flat page index and the pages with the best
          BM25 scores over the pages MTM holds (terms are stemmed query keywords), so a
          relevant page is found even when its segment's overall topic drifted or the
          embedder misses the match. Each pooled page scores
          ``base = 0.6·BM25/best BM25 + 0.3·cos(page, query) + 0.05·Jaccard(query kw, page kw)
          + 0.05·F(its segment, query)``, plus ``0.7·`` the best base score of the turn
          just before or after it (an answer often sits next to the turn that shares the
          question's words) (:data:`HYBRID_LEXICAL_WEIGHT`, :data:`HYBRID_DENSE_WEIGHT`,
          :data:`HYBRID_KEYWORD_WEIGHT`, :data:`HYBRID_SEGMENT_WEIGHT`,
          :data:`HYBRID_NEIGHBOR_WEIGHT`; weights chosen on LoCoMo, see bench/README.md);
          the best ``top_k`` are returned. The segments that supplied a returned page count
          as visited.

        Visited segments get ``N_visit += 1`` and ``last_access = now``, and their heat is
        recomputed. Promotion waits for the next insert or :meth:`tick`; with
        ``rules.promote_on_retrieval`` the MTM actor ticks right after the search.

        Args:
            query_emb: query embedding (``dim`` values).
            query_kw: query keywords.
            top_m: segments in stage 1 (default ``config.top_m_segments``).
            top_k: pages returned (default ``config.top_k_pages``).
            now: time of the search, seconds (default: the clock).
            mode: ``"paper"`` or ``"hybrid"`` (default ``config.retrieval_mode``).
            cold: hybrid mode only: lexical candidates from the cold tier (archived pages)
                with its corpus statistics. They are scored with the hot pages under the
                same formula (BM25 over the union of both corpora; no segment term, their
                segment is gone) and returned with ``tier="archive"``. Ignored in
                ``"paper"`` mode, which never reads the cold tier.
            cold_pages: hybrid mode only: looks up archived pages by turn seq, so the turn
                next to a candidate is scored even when it left MTM.
            query_text: hybrid mode only: the query as asked. A time the query names
                (:func:`~memoryos_actors.tiers.temporal.time_window`, relative to ``now``)
                gives pages written in that window a bonus of :data:`TIME_WINDOW_WEIGHT`
                times the window's idf share (see :meth:`_window_candidates`); unless the
                query asks about the past, a newer page of the answer that states a change
                of what another said (:func:`~memoryos_actors.tiers.temporal.supersedes`)
                is ranked just above it; a question in the first person
                (:func:`~memoryos_actors.lexicon.asks_about_user`) adds
                :data:`USER_SIDE_WEIGHT` times the BM25 of each page's query side.
            cold_window: hybrid mode only: counts (and, for small windows, returns) the
                archived pages written in a time window, so they can be candidates.
            cold_rows: hybrid mode only: as ``cold_pages``, but what scoring needs of each
                page (:class:`~memoryos_actors.cold_items.ColdRow`), for neighbouring turns.
                ``cold``'s items may be such rows too (with the query terms' ids); the
                pages returned are then read in full through ``cold_pages``.

        In hybrid mode the neighbour term is scaled by the two turns' length
        (:data:`NEIGHBOUR_PASSAGE_CHARS`), and the candidate with the best BM25 is always
        in the answer (fusion cannot bury the strongest lexical match).

        Returns:
            Visited segments (best F_score first) and pages (best score first).
        """
        q = self._embedding(query_emb, "query_emb")
        kw = normalize_keywords(query_kw)
        top_m = self._config.top_m_segments if top_m is None else top_m
        top_k = self._config.top_k_pages if top_k is None else top_k
        for name, value in (("top_m", top_m), ("top_k", top_k)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise InvalidInput(f"{name} must be an int >= 0, got {value!r}")
        mode = self._config.retrieval_mode if mode is None else mode
        if mode not in ("paper", "hybrid"):
            raise InvalidInput(f"mode must be 'paper' or 'hybrid', got {mode!r}")
        t = self._now(now)

        ranked = self._ranked_segments(q, kw, top_m)
        if mode == "paper":
            visited, hits = self._search_paper(q, ranked, top_k)
        else:
            visited, hits = self._search_hybrid(
                q, kw, ranked, top_k, cold, cold_pages, query_text, t, cold_window, cold_rows
            )

        seg_hits: list[SegmentHit] = []
        for f, seg in sorted(visited, key=lambda fs: (-fs[0], fs[1].number)):
            seg.n_visit += 1
            seg.last_access = t
            seg.heat = self._heat(seg, t)
            seg_hits.append(SegmentHit(seg.view(), f, f"segment {seg.segment_id} F={f:.2f}"))
        return MTMHits(mode, tuple(seg_hits), tuple(hits))  # type: ignore[arg-type]

    def _page_cos(self, q: npt.NDArray[np.float32], seqs: list[int]) -> npt.NDArray[np.float64]:
        if not seqs:
            return np.zeros(0)
        # Stored vectors are unit length (or zero), so the dot product is the cosine.
        return np.clip(self._page_index.dots(q, seqs), -1.0, 1.0)

    def _search_paper(
        self, q: npt.NDArray[np.float32], ranked: list[tuple[float, _Segment]], top_k: int
    ) -> tuple[list[tuple[float, _Segment]], list[PageHit]]:
        pool = [(f, seg, page) for f, seg in ranked for page in seg.pages]
        cos = self._page_cos(q, [p.seq for _, _, p in pool])
        order = sorted(range(len(pool)), key=lambda i: (-cos[i], -pool[i][2].seq))[:top_k]
        hits = []
        for i in order:
            f, seg, page = pool[i]
            c = float(cos[i])
            hits.append(
                PageHit(
                    page, seg.segment_id, c, f"segment {seg.segment_id} F={f:.2f}; page cos={c:.2f}"
                )
            )
        return ranked, hits

    def _search_hybrid(
        self,
        q: npt.NDArray[np.float32],
        kw: frozenset[str],
        ranked: list[tuple[float, _Segment]],
        top_k: int,
        cold: ColdCandidates | None = None,
        cold_pages: Callable[[Iterable[int]], Mapping[int, ColdItem]] | None = None,
        query_text: str = "",
        now: float | None = None,
        cold_window: ColdWindow | None = None,
        cold_rows: Callable[[Iterable[int]], Mapping[int, ColdRow]] | None = None,
    ) -> tuple[list[tuple[float, _Segment]], list[PageHit]]:
        # Hundreds of candidates a query: their scores live in flat dicts of floats and
        # their sources in bit flags, so a query leaves few objects for the garbage
        # collector (whose full passes are most of this method's worst case).
        if top_k <= 0:
            return [], []
        seg_f: dict[str, float] = {seg.segment_id: f for f, seg in ranked}
        source: dict[int, int] = {}
        for _, seg in ranked:
            for page in seg.pages:
                source[page.seq] = _SRC_SEGMENT
        flat = self._page_index.candidates(q, max(CANDIDATE_FACTOR * top_k, MIN_CANDIDATES))
        for seq in flat:
            source[seq] = source.get(seq, 0) | _SRC_DENSE
        qt = [stem(k) for k in kw]
        # One BM25 over hot and cold pages: idf and average length of the union.
        n_all = len(self._lex) + (cold.n_docs if cold is not None else 0)
        total = self._lex.total_len + (cold.total_len if cold is not None else 0)
        avg = total / n_all if n_all else 1.0
        idf = {
            t: bm25_idf(n_all, max(self._lex.df(t) + (cold.df_of(t) if cold else 0), 1))
            for t in set(qt)
        }
        bm25 = self._lex.weighted_scores(idf, avg)
        # A question in the first person is about the user: the user's own words (a page's
        # query side) are scored again, with the same idf, normalised by their own length.
        user_side = False
        avg_user = 1.0
        if USER_SIDE_WEIGHT > 0 and query_text and asks_about_user(query_text):
            user_side = True
            avg_user = self._user_side_length(cold)
            for seq, v in self._lex_user.weighted_scores(idf, avg_user).items():
                bm25[seq] = bm25.get(seq, 0.0) + USER_SIDE_WEIGHT * v
        if bm25:
            # The LEXICAL_CANDIDATES best (best BM25 first; equal ones, newer first).
            hot_seqs = np.fromiter(bm25.keys(), dtype=np.int64, count=len(bm25))
            hot_bm25 = np.fromiter(bm25.values(), dtype=np.float64, count=len(bm25))
            best_hot = hot_seqs[np.lexsort((hot_seqs, hot_bm25))[::-1][:LEXICAL_CANDIDATES]]
            for seq in best_hot.tolist():
                source[seq] = source.get(seq, 0) | _SRC_BM25
        archived: dict[int, ColdItem | ColdRow] = {}
        keys, weights = list(idf), list(idf.values())
        # The query terms' ids in the cold index's vocabulary: archived pages' terms are
        # then counted from their stored ids (numpy), not searched for in their text.
        key_ids = cold.ids_of(keys) if cold is not None else None

        def cold_lexical(items: list[ColdItem | ColdRow]) -> list[float]:
            """BM25 of archived pages, as the hot pages': all of them at once (bit for bit
            what bm25_scorer gives each one, with the same idf in the same order)."""
            if not items:
                return []
            limits = [_query_side(item) for item in items] if user_side else None
            stored = [getattr(item, "term_ids", None) for item in items]
            if key_ids is not None and None not in stored:
                tf, lengths, head, heads = term_id_counts(stored, key_ids, limits)  # type: ignore[arg-type]
            else:  # full items: the same counts from their terms
                tf, lengths, head, heads = term_counts([item.terms for item in items], keys, limits)  # type: ignore[union-attr]
            scores = bm25_scores(tf, lengths, weights, avg)
            if head is not None and heads is not None:
                scores = scores + USER_SIDE_WEIGHT * bm25_scores(head, heads, weights, avg_user)
            return scores.tolist()

        if cold is not None:
            found = [
                item
                for item in cold.items
                if item.seq is not None and item.seq not in self._page_segment
            ]
            for item, score in zip(found, cold_lexical(found), strict=True):
                archived[item.seq] = item  # type: ignore[index]
                bm25[item.seq] = score  # type: ignore[index]
                source[item.seq] = source.get(item.seq, 0) | _SRC_ARCHIVE  # type: ignore[index]
        window = time_window(query_text, now) if query_text and now is not None else None
        window_bonus = 0.0
        if window is not None:
            window_bonus = self._window_candidates(
                window, n_all, cold_window, source, archived, bm25, cold_lexical
            )
        if HYBRID_NEIGHBOR_WEIGHT > 0:
            # Score the turn before and after each candidate too: an answer often sits
            # next to the turn that shares the question's words.
            for seq in list(source):
                for n in (seq - 1, seq + 1):
                    if n in self._page_segment and n not in source:
                        source[n] = _SRC_NEIGHBOUR
        # BM25 shares are of the best BM25 of these candidates (fetched neighbours, below,
        # are scored against it too).
        rows, best_bm25 = self._score_rows(sorted(source), q, kw, bm25, None, seg_f, archived)
        if HYBRID_NEIGHBOR_WEIGHT > 0 and cold_pages is not None and len(rows.seqs):
            # Archived neighbours: fetched only around the strongest candidates (a
            # neighbour matters when it, or the page beside it, can reach the top_k).
            # Best base score first, equal ones in seq order (as heapq.nlargest over the
            # candidates in seq order).
            n_pool = max(_NEIGHBOUR_FETCH_FACTOR * top_k, _NEIGHBOUR_FETCH_MIN)
            pool = rows.seqs[np.argsort(-rows.base, kind="stable")[:n_pool]].tolist()
            scored = set(rows.seqs.tolist())
            wanted = {
                n
                for seq in pool
                for n in (seq - 1, seq + 1)
                if n > 0 and n not in scored and n not in self._page_segment
            }
            fetched = (cold_rows or cold_pages)(wanted) if wanted else {}
            fresh = [
                (n, item)
                for n, item in fetched.items()
                if n not in self._page_segment and n not in scored
            ]
            lexical = (
                cold_lexical([item for _, item in fresh])
                if cold is not None
                else [0.0] * len(fresh)
            )
            for (n, item), score in zip(fresh, lexical, strict=True):
                archived[n] = item
                bm25[n] = score
                source[n] = _SRC_NEIGHBOUR
            if fresh:
                more, _ = self._score_rows(
                    sorted(n for n, _ in fresh), q, kw, bm25, best_bm25, seg_f, archived
                )
                rows = rows.concat(more).take(
                    np.argsort(np.concatenate((rows.seqs, more.seqs)), kind="stable")
                )
        seqs = rows.seqs
        near = _neighbour_bests(seqs, rows.base, rows.chars)
        final = fused_score_array(seqs, rows.base, rows.chars)
        notes: dict[int, str] = {}
        if window is not None:
            inside = (rows.times >= window[0]) & (rows.times < window[1])
            final = np.where(inside, final + window_bonus, final)
            for seq in seqs[inside].tolist():
                notes[seq] = f" + {window_bonus:.2f} in the time window the query names"
        # Best first; equal scores, newer first. The supersede pass only reorders the
        # answer: which pages are returned is decided by relevance alone.
        top = np.lexsort((seqs, final))[::-1][:top_k]
        order: list[int] = seqs[top].tolist()
        final_of: dict[int, float] = dict(zip(order, final[top].tolist(), strict=True))
        lexical_best, lexical_score = -1, 0.0
        if len(seqs):
            i = int(np.lexsort((seqs, rows.bm25))[-1])
            lexical_best, lexical_score = int(seqs[i]), float(rows.bm25[i])
        # Archived pages read as scoring rows: the ones that can be returned, read in full.
        light = [
            seq for seq in (*order, lexical_best) if seq in archived and not archived[seq].complete
        ]
        if light:
            full = cold_pages(light) if cold_pages is not None else {}
            for seq in light:
                if seq in full:
                    archived[seq] = full[seq]
            # A page deleted since it was scored is not returned.
            order = [seq for seq in order if seq not in archived or archived[seq].complete]
            if lexical_best in archived and not archived[lexical_best].complete:
                lexical_score = 0.0
        if query_text and not asks_about_past(query_text):
            order = self._supersede(order, final_of, qt, archived, notes, bm25)
        # Fusion must not bury the strongest lexical match: it keeps a place in the answer.
        if order and lexical_score > 0 and lexical_best not in final_of:
            last = order[-1]
            final_of[lexical_best] = final_of[last]
            notes[lexical_best] = (
                notes.get(lexical_best, "") + "; kept in the answer: the best lexical match"
            )
            order[-1] = lexical_best
        row_of = {seq: i for i, seq in enumerate(seqs.tolist())}
        hits: list[PageHit] = []
        visited: dict[str, tuple[float, _Segment]] = {}
        for seq in order:
            score = final_of[seq]
            i = row_of[seq]
            beside = float(near[i])
            lex, c = float(rows.lex[i]), float(rows.cos[i])
            j, f = float(rows.kw[i]), float(rows.seg[i])
            terms_ = (
                f"{HYBRID_LEXICAL_WEIGHT:g}*bm25={lex:.2f} + {HYBRID_DENSE_WEIGHT:g}*cos={c:.2f}"
                f" + {HYBRID_KEYWORD_WEIGHT:g}*kw={j:.2f}{notes.get(seq, '')}"
            )
            if user_side:
                terms_ += " (bm25 counts the user's words twice: a question in the first person)"
            via = "+".join(sorted(name for bit, name in _SRC_NAMES if source[seq] & bit))
            if seq in archived:
                item = _full(archived[seq])
                sid = item.segment_id or "archive"
                why = (
                    f"archive (archive record {item.archive_seq}, was in segment {sid}) via "
                    f"{via}: {terms_} + {HYBRID_NEIGHBOR_WEIGHT:g}*neighbour={beside:.2f}"
                )
                hits.append(PageHit(Page.from_dict(item.record), sid, score, why, "archive"))
                continue
            sid = self._page_segment[seq]
            seg = self._segments[sid]
            page = seg.pages[_index_of(seg.pages, seq)]
            why = (
                f"hybrid via {via}: {terms_}"
                f" + {HYBRID_SEGMENT_WEIGHT:g}*segment {sid} F={f:.2f}"
                f" + {HYBRID_NEIGHBOR_WEIGHT:g}*neighbour={beside:.2f}"
            )
            hits.append(PageHit(page, sid, score, why))
            visited.setdefault(sid, (f, seg))
        return list(visited.values()), hits

    def _user_side_length(self, cold: ColdCandidates | None) -> float:
        """Average length (terms) of a page's query side: over the hot pages, or over the
        cold candidates when MTM holds none."""
        if len(self._lex_user):
            return self._lex_user.total_len / len(self._lex_user)
        known = [
            item.query_terms
            for item in (cold.items if cold else ())
            if item.query_terms is not None
        ]
        return sum(known) / len(known) if known and sum(known) else 1.0

    def _window_candidates(
        self,
        window: tuple[float, float],
        n_all: int,
        cold_window: ColdWindow | None,
        source: dict[int, int],
        archived: dict[int, ColdItem | ColdRow],
        bm25: dict[int, float],
        cold_lexical: Callable[[list[ColdItem | ColdRow]], list[float]],
    ) -> float:
        """The bonus of a page in the time window a query names, and (when the window holds
        at most WINDOW_CANDIDATES pages) every page in it added to the candidates.

        The bonus is ``TIME_WINDOW_WEIGHT`` times the window's BM25 idf as a share of the
        idf of a term in one page: a day with a handful of pages tells far more than a
        month with hundreds, exactly as a rare word does."""
        lo = bisect.bisect_left(self._times, (window[0], -1))
        hi = bisect.bisect_left(self._times, (window[1], -1))
        n_cold, cold_in = (
            cold_window(window[0], window[1], WINDOW_CANDIDATES)
            if cold_window is not None
            else (0, {})
        )
        n_window = hi - lo + n_cold
        if not n_window or n_all <= 0:
            return 0.0
        if n_window <= WINDOW_CANDIDATES:
            for _, seq in self._times[lo:hi]:
                source[seq] = source.get(seq, 0) | _SRC_TIME
            new = [
                (seq, item)
                for seq, item in cold_in.items()
                if seq not in self._page_segment and seq not in archived
            ]
            for (seq, item), score in zip(new, cold_lexical([i for _, i in new]), strict=True):
                archived[seq] = item
                bm25[seq] = score
            for seq in cold_in:
                if seq not in self._page_segment:
                    source[seq] = source.get(seq, 0) | _SRC_TIME
        return TIME_WINDOW_WEIGHT * bm25_idf(n_all, n_window) / bm25_idf(n_all, 1)

    def _score_rows(
        self,
        seqs: list[int],
        q: npt.NDArray[np.float32],
        kw: frozenset[str],
        bm25: Mapping[int, float],
        best_bm25: float | None,
        seg_f: dict[str, float],
        archived: Mapping[int, ColdItem | ColdRow],
    ) -> tuple[_Rows, float]:
        """The rows (:class:`_Rows`) of ``seqs`` (ascending): base score of each and its
        parts, raw BM25, length and time; the segment F_score of hot candidates' segments
        not ranked yet goes into ``seg_f``. The BM25 share is of ``best_bm25``, or when it
        is None of the best BM25 of ``seqs`` (1 when none is above 0); returns the rows
        and the best used."""
        hot = [x for x in seqs if x not in archived]
        cold = [x for x in seqs if x in archived]
        cos = np.empty(len(hot) + len(cold), dtype=np.float64)
        cos[: len(hot)] = self._page_cos(q, hot)
        if cold:
            embs = [archived[x].embedding for x in cold]
            if all(e is not None and e.shape == (self._dim,) for e in embs):
                mat = np.stack(embs).astype(np.float32, copy=False)  # type: ignore[arg-type]
            else:  # an archived page without an embedding has cosine 0
                mat = np.zeros((len(cold), self._dim), dtype=np.float32)
                for i, emb in enumerate(embs):
                    if emb is not None and emb.shape == (self._dim,):
                        mat[i] = emb
            cos[len(hot) :] = np.clip(mat.astype(np.float64) @ q.astype(np.float64), -1.0, 1.0)
        # F_score of the segments of hot candidates not ranked yet: one matrix product.
        page_segment = self._page_segment
        sids = [page_segment[x] for x in hot]
        unscored = list({sid: None for sid in sids if sid not in seg_f})
        if unscored:
            segs = [self._segments[sid] for sid in unscored]
            seg_cos = np.clip(self._seg_index.dots(q, [seg.number for seg in segs]), -1.0, 1.0)
            for sid, seg, c in zip(unscored, segs, seg_cos.tolist(), strict=True):
                seg_f[sid] = c + jaccard(seg.keywords, kw)
        info = self._page_info
        hot_info = [info[x] for x in hot]
        cold_items = [archived[x] for x in cold]
        # An archived page's segment is gone: no segment F_score term (0).
        seg = np.array([seg_f[sid] for sid in sids] + [0.0] * len(cold), dtype=np.float64)
        chars = np.array(
            [c for c, _, _ in hot_info] + [i.chars for i in cold_items], dtype=np.int64
        )
        times = np.array(
            [t for _, _, t in hot_info] + [i.timestamp for i in cold_items], dtype=np.float64
        )
        # jaccard(kw, page keywords), inline: |a & b| / |a | b| with |a | b| counted as
        # |a| + |b| - |a & b| (the same integers, so the same quotient).
        n_kw = len(kw)
        page_kws = [k for _, k, _ in hot_info] + [i.keywords for i in cold_items]
        kws = np.array(
            [
                0.0 if kw.isdisjoint(k) else (shared := len(kw & k)) / (n_kw + len(k) - shared)
                for k in page_kws
            ],
            dtype=np.float64,
        )
        order = hot + cold
        raw = np.array([bm25.get(x, 0.0) for x in order], dtype=np.float64)
        if best_bm25 is None:
            best_bm25 = (float(raw.max()) if len(raw) else 0.0) or 1.0
        lex = np.minimum(raw / best_bm25, 1.0)
        rows = _Rows(
            np.array(order, dtype=np.int64),
            base_scores(lex, cos, kws, seg),
            raw,
            chars,
            cos,
            kws,
            lex,
            seg,
            times,
        )
        return rows.take(np.argsort(rows.seqs, kind="stable")), best_bm25

    def _cand_facts(
        self, seq: int, archived: Mapping[int, ColdItem | ColdRow]
    ) -> tuple[str, float, str, Iterable[str]]:
        """``(page id, time, text, index terms)`` of a candidate page, hot or archived
        (archived ones from the index row: no record is decoded)."""
        found = archived.get(seq)
        if found is not None:
            item = _full(found)
            return item.item_id, item.timestamp, item.text, item.terms
        seg = self._segments[self._page_segment[seq]]
        page = seg.pages[_index_of(seg.pages, seq)]
        text = f"{page.query} {page.response}"
        return page.page_id, page.timestamp, text, self._lex.doc_terms(seq) or terms(text)

    def _supersede(
        self,
        order: list[int],
        final: dict[int, float],
        qt: list[str],
        archived: Mapping[int, ColdItem | ColdRow],
        notes: dict[int, str],
        lexical: Mapping[int, float],
    ) -> list[int]:
        """Rank a newer page that states a change right above the older page it supersedes.

        ``order`` is the answer, best first (``top_k`` pages: pairs cost O(top_k²)); the
        pass changes their order, never which pages they are. Best first, each page is superseded by at most one page ranked below
        it: the newest that :func:`~memoryos_actors.tiers.temporal.supersedes` it and
        matches the query at least :data:`SUPERSEDE_LEXICAL_SHARE` as well (lexically); that
        page's score in ``final`` is raised to just above it, once (no chains of lifts).
        Returns the new order.
        """
        info = [self._cand_facts(seq, archived) for seq in order]
        lifted: set[int] = set()
        for i, (old_id, old_time, _old_text, old_terms) in enumerate(info):
            old = order[i]
            if old in lifted:
                continue
            floor = SUPERSEDE_LEXICAL_SHARE * lexical.get(old, 0.0)
            best: tuple[float, int] | None = None
            for k, (_new_id, new_time, new_text, new_terms) in enumerate(info):
                new = order[k]
                if (
                    k == i
                    or new in lifted
                    or final[new] > final[old]
                    or lexical.get(new, 0.0) < floor
                ):
                    continue
                if supersedes(new_terms, new_time, new_text, old_terms, old_time, qt) and (
                    best is None or new_time > best[0]
                ):
                    best = (new_time, new)
            if best is not None:
                new = best[1]
                final[new] = final[old] + SUPERSEDE_MARGIN
                lifted.add(new)
                notes[new] = (
                    notes.get(new, "")
                    + f"; supersedes {old_id} (newer, states a change), ranked above it"
                )
        if not lifted:
            return order
        return sorted(order, key=lambda x: (-final[x], -x))

    # ------------------------------------------------------------------ inspection

    def segments(self) -> list[SegmentView]:
        """Every segment, oldest first."""
        return [seg.view() for seg in self._segments.values()]

    def segment(self, segment_id: str) -> SegmentRecord | None:
        """The full record (with pages) of ``segment_id``, or None if it is not in MTM."""
        seg = self._segments.get(segment_id)
        return seg.record(self._user_id or "") if seg is not None else None

    def segment_pages(self, segment_id: str) -> tuple[Page, ...]:
        """The pages of ``segment_id``, oldest first; empty if the segment is gone."""
        seg = self._segments.get(segment_id)
        return tuple(seg.pages) if seg is not None else ()

    def page_ids(self) -> tuple[str, ...]:
        """Ids of every page held, by seq."""
        return tuple(f"p{seq}" for seq in sorted(self._page_segment))

    # ------------------------------------------------------------------ persistence

    def to_state(self) -> dict[str, Any]:
        """The whole state as msgpack-friendly values (embeddings as float32 bytes)."""
        return {
            "version": _STATE_VERSION,
            "dim": self._dim,
            "user_id": self._user_id,
            "max_seq": self._max_seq,
            "next_segment": self._next_segment,
            "chains": [[c, sid] for c, sid in self._chains.items()],
            "page_graph": self._page_index.graph_bytes(),
            "segment_graph": self._seg_index.graph_bytes(),
            "segments": [
                {
                    "number": seg.number,
                    "pages": [p.to_dict() for p in seg.pages],
                    "embeddings": np.stack(seg.embs).astype("<f4").tobytes(),
                    "summary": seg.summary,
                    "summary_keywords": sorted(seg.summary_kw),
                    "n_visit": seg.n_visit,
                    "l_interaction": seg.l_interaction,
                    "last_access": seg.last_access,
                    "created": seg.created,
                    "heat": seg.heat,
                }
                for seg in self._segments.values()
            ],
        }

    @classmethod
    def from_state(
        cls, state: Mapping[str, Any], config: MemoryConfig, dim: int | None, clock: Clock
    ) -> MTMCore:
        """Rebuild a core from :meth:`to_state` output; saved hnswlib graphs are loaded
        (or built from the stored embeddings when the state has none).

        Arguments after ``state`` mirror the constructor; ``dim`` None accepts the stored
        dimension.

        Raises:
            EmbedderMismatch: ``dim`` is given and differs from the stored dimension.
            InvalidInput: the state is malformed.
        """
        try:
            if state["version"] != _STATE_VERSION:
                raise InvalidInput(f"unsupported MTM state version {state['version']!r}")
            stored_dim = int(state["dim"])
            if dim is not None and dim != stored_dim:
                raise EmbedderMismatch(
                    f"MTM state has {stored_dim}-dimensional embeddings, expected {dim}"
                )
            core = cls(config, stored_dim, clock)
            core._user_id = state["user_id"]
            core._max_seq = int(state["max_seq"])
            core._next_segment = int(state["next_segment"])
            core._chains = {str(c): str(sid) for c, sid in state.get("chains", ())}
            page_vecs: dict[int, npt.NDArray[np.float32]] = {}
            seg_vecs: dict[int, npt.NDArray[np.float32]] = {}
            for s in state["segments"]:
                pages = [Page.from_dict(p) for p in s["pages"]]
                embs = np.frombuffer(s["embeddings"], dtype="<f4").reshape(len(pages), stored_dim)
                seg = _Segment(int(s["number"]), float(s["created"]))
                for page, emb in zip(pages, embs, strict=True):
                    e = emb.astype(np.float32)
                    e.flags.writeable = False
                    seg.add(page, e)
                    core._page_segment[page.seq] = seg.segment_id
                    page_vecs[page.seq] = e
                    core._index_text(page)
                seg.summary = s["summary"]
                seg.summary_kw = normalize_keywords(s["summary_keywords"])
                seg.n_visit = int(s["n_visit"])
                seg.l_interaction = int(s["l_interaction"])
                seg.last_access = float(s["last_access"])
                seg.heat = float(s["heat"])
                seg.refresh(core._rules.segment_keyword_limit)
                core._segments[seg.segment_id] = seg
                seg_vecs[seg.number] = seg.embedding
            # Saved hnswlib graphs load far faster than they build; older states have none.
            core._page_index.restore(page_vecs, state.get("page_graph"))
            core._seg_index.restore(seg_vecs, state.get("segment_graph"))
        except (KeyError, TypeError, ValueError, RuntimeError) as exc:
            if isinstance(exc, InvalidInput):
                raise
            raise InvalidInput(f"malformed MTM state: {exc!r}") from None
        return core


def _index_of(pages: list[Page], seq: int) -> int:
    # Pages in a segment are in ascending seq order: binary search.
    lo, hi = 0, len(pages)
    while lo < hi:
        mid = (lo + hi) // 2
        if pages[mid].seq < seq:
            lo = mid + 1
        else:
            hi = mid
    return lo
