"""Hybrid retrieval over the pages MTM holds and the archived pages of the cold tier.

:class:`HybridSearch` pools candidates from every source (the paper's top segments, the
nearest pages by cosine, the best BM25 scores, archived pages the cold index finds, pages
in a time window the query names, the turns beside them), scores them all under one
formula (:mod:`memoryos_actors.tiers.fusion`) and applies the time-aware rules
(:mod:`memoryos_actors.tiers.temporal`). It reads the core's indexes
(:class:`~memoryos_actors.tiers.page_index.PageIndexes`) and segments (:class:`HotSegments`)
and changes neither: which segments were used is the caller's to record.
See :meth:`~memoryos_actors.tiers.mtm.MTMCore.search` for the rules as a user sees them.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Protocol

import numpy as np
import numpy.typing as npt

# At run time too: _full and the lexical scorer tell the two kinds of archived page apart.
from memoryos_actors.cold_items import ColdItem, ColdRow
from memoryos_actors.hits import PageHit
from memoryos_actors.lexicon import (
    asks_about_user,
    bm25_idf,
    bm25_scores,
    stem,
    term_counts,
    term_id_counts,
    terms,
)
from memoryos_actors.records import Page
from memoryos_actors.tiers.fusion import (
    HYBRID_DENSE_WEIGHT,
    HYBRID_KEYWORD_WEIGHT,
    HYBRID_LEXICAL_WEIGHT,
    HYBRID_NEIGHBOR_WEIGHT,
    HYBRID_SEGMENT_WEIGHT,
    Rows,
    base_scores,
    fused_score_array,
    neighbour_bests,
)
from memoryos_actors.tiers.page_index import PageIndexes
from memoryos_actors.tiers.temporal import asks_about_past, supersede_order, time_window

if TYPE_CHECKING:
    from memoryos_actors.cold_items import ColdCandidates

__all__ = [
    "CANDIDATE_FACTOR",
    "AS_OF_SLACK_SECONDS",
    "LEXICAL_CANDIDATES",
    "MIN_CANDIDATES",
    "TIME_WINDOW_WEIGHT",
    "USER_SIDE_WEIGHT",
    "WINDOW_CANDIDATES",
    "ColdWindow",
    "HotSegments",
    "HybridSearch",
]

CANDIDATE_FACTOR = 4
"""ANN candidates fetched per result wanted, before exact rescoring."""

MIN_CANDIDATES = 32
"""Fewest ANN candidates fetched; memories with fewer live vectors are searched exactly."""

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

LEXICAL_CANDIDATES = 100
"""Hybrid mode: pages with the best BM25 scores added to the candidate pool (hot pages, and
as many archived ones from the cold index). 100 rather than 200: a retrieve at 5,451 pages
costs about a quarter less CPU, and recall moved by single questions (LoCoMo per
conversation equal, long history 4 of 1,982 fewer; LongMemEval equal at 100/200/500 items;
bench/README.md, "Fewer lexical candidates")."""

AS_OF_SLACK_SECONDS: float | None = 2 * 86_400.0
"""Hybrid mode: a page stamped more than this many seconds after the moment of the
question (the retrieve's ``timestamp``) is not a candidate: it was not written yet when the
question was asked (a history imported or replayed, asked at a past moment; a live history
has no such page). The slack keeps a session stamped later on the question's own day (the
LongMemEval dev file has evidence up to 22 hours after its question's time). None turns
the rule off. Two days rather than off: LongMemEval tune split 137 vs 135 of 162
questions (temporal 41 vs 40, preference 3 vs 2), validation equal, LoCoMo equal in both
modes (its questions come after every page)."""

# Archived neighbours are fetched around this many of the best candidates (per page
# wanted, at least the second number). 30 rather than 50 for 10 pages: 57 rather than 93
# archived rows read per retrieve at 100,000 pages (their read 1.1 rather than 1.6 ms),
# and recall equal on LoCoMo (per conversation, long history) and LongMemEval (100, 200
# and 500 items); 20 and 10 moved single questions of the long history.
_NEIGHBOUR_FETCH_FACTOR, _NEIGHBOUR_FETCH_MIN = 3, 30

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


class HotSegments(Protocol):
    """What hybrid search reads of the MTM core's segments."""

    def page(self, seq: int) -> Page:
        """The held page of turn ``seq``."""
        ...

    def segment_pages(self, segment_id: str) -> tuple[Page, ...]:
        """The pages of ``segment_id``, oldest first."""
        ...

    def segment_fscores(
        self, q: npt.NDArray[np.float32], kw: frozenset[str], segment_ids: list[str]
    ) -> list[float]:
        """F_score(segment, query) of each of ``segment_ids``, in order."""
        ...


def _query_side(item: ColdItem | ColdRow) -> int:
    """How many of an archived page's terms are its query side's (its first ones)."""
    if item.query_terms is not None:
        return item.query_terms
    # Indexed before the count was kept: read it from the archived page itself (a narrow
    # row always has the count: the index fills it in for every page).
    return len(terms(_full(item).page_parts()[0]))


def _full(item: ColdItem | ColdRow) -> ColdItem:
    """``item`` read in full (the search reads the pages it returns in full first)."""
    if not isinstance(item, ColdItem):
        raise TypeError(f"an archived page read as a scoring row only: {item!r}")
    return item


class HybridSearch:
    """Hybrid retrieval for one MTM core (see the module docstring).

    The pages of the paper's ``top_m`` segments are pooled with the pages nearest to the
    query in the flat page index and the :data:`LEXICAL_CANDIDATES` pages with the best
    BM25 over the pages MTM holds (terms are the stemmed query keywords), so a relevant
    page is found even when its segment's topic drifted or the embedder misses the match;
    archived candidates from the cold index (``cold``) join them, scored under the same
    formula (BM25 over the union of both corpora; no segment term: their segment is
    gone) and returned with ``tier="archive"``. Each pooled page scores
    ``base = 0.6·BM25/best BM25 + 0.3·cos(page, query) + 0.05·Jaccard(query kw, page kw)
    + 0.05·F(its segment, query)``, plus ``0.7·`` the best base score of the turn just
    before or after it, scaled down for long turns (an answer often sits next to the turn
    that shares the question's words; weights in :mod:`~memoryos_actors.tiers.fusion`,
    chosen on LoCoMo, see bench/README.md). A time the query names
    (:func:`~memoryos_actors.tiers.temporal.time_window`) gives pages written in that
    window a bonus of :data:`TIME_WINDOW_WEIGHT` times the window's idf share (see
    :meth:`_window_candidates`); unless the query asks about the past, a newer page of the
    answer that states a change of what another said
    (:func:`~memoryos_actors.tiers.temporal.supersedes`) is ranked just above it; a
    question in the first person (:func:`~memoryos_actors.lexicon.asks_about_user`) adds
    :data:`USER_SIDE_WEIGHT` times the BM25 of each page's query side. The candidate with
    the best BM25 is always in the answer (fusion cannot bury the strongest lexical match).
    A page stamped more than :data:`AS_OF_SLACK_SECONDS` after ``now`` is never a
    candidate (it did not exist yet when the question was asked).

    Args:
        pages: the core's page indexes.
        segments: the core's segments.
        dim: embedding length.
    """

    def __init__(self, pages: PageIndexes, segments: HotSegments, dim: int) -> None:
        self._pages = pages
        self._segments = segments
        self._dim = dim

    def search(
        self,
        q: npt.NDArray[np.float32],
        kw: frozenset[str],
        ranked: list[tuple[float, str]],
        top_k: int,
        cold: ColdCandidates | None = None,
        cold_pages: Callable[[Iterable[int]], Mapping[int, ColdItem]] | None = None,
        query_text: str = "",
        now: float | None = None,
        cold_window: ColdWindow | None = None,
        cold_rows: Callable[[Iterable[int]], Mapping[int, ColdRow]] | None = None,
    ) -> tuple[list[tuple[float, str]], list[PageHit]]:
        # Hundreds of candidates a query: their scores live in flat dicts of floats and
        # their sources in bit flags, so a query leaves few objects for the garbage
        # collector (whose full passes are most of this method's worst case).
        if top_k <= 0:
            return [], []
        pages = self._pages
        # Pages written after the moment of the question (beyond a slack) are not
        # memories yet at that moment: none is a candidate (none in a live history).
        cutoff = (
            math.inf if now is None or AS_OF_SLACK_SECONDS is None else now + AS_OF_SLACK_SECONDS
        )
        future: set[int] = set()
        if pages.times and pages.times[-1][0] >= cutoff:
            first = bisect.bisect_left(pages.times, (cutoff, -1))
            future = {seq for _, seq in pages.times[first:]}
        seg_f: dict[str, float] = {sid: f for f, sid in ranked}
        source: dict[int, int] = {}
        for _, sid in ranked:
            for page in self._segments.segment_pages(sid):
                if page.seq not in future:
                    source[page.seq] = _SRC_SEGMENT
        flat = pages.vectors.candidates(q, max(CANDIDATE_FACTOR * top_k, MIN_CANDIDATES))
        for seq in flat:
            if seq in future:
                continue
            source[seq] = source.get(seq, 0) | _SRC_DENSE
        qt = [stem(k) for k in kw]
        # One BM25 over hot and cold pages: idf and average length of the union.
        n_all = len(pages.lex) + (cold.n_docs if cold is not None else 0)
        total = pages.lex.total_len + (cold.total_len if cold is not None else 0)
        avg = total / n_all if n_all else 1.0
        idf = {
            t: bm25_idf(n_all, max(pages.lex.df(t) + (cold.df_of(t) if cold else 0), 1))
            for t in set(qt)
        }
        bm25 = pages.lex.weighted_scores(idf, avg)
        # A question in the first person is about the user: the user's own words (a page's
        # query side) are scored again, with the same idf, normalised by their own length.
        user_side = False
        avg_user = 1.0
        if USER_SIDE_WEIGHT > 0 and query_text and asks_about_user(query_text):
            user_side = True
            avg_user = self._user_side_length(cold)
            for seq, v in pages.lex_user.weighted_scores(idf, avg_user).items():
                bm25[seq] = bm25.get(seq, 0.0) + USER_SIDE_WEIGHT * v
        for seq in future:
            bm25.pop(seq, None)
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
            # Scoring rows carry their terms as ids; full items as terms.
            stored = [item.term_ids for item in items if isinstance(item, ColdRow)]
            if key_ids is not None and len(stored) == len(items):
                tf, lengths, head, heads = term_id_counts(stored, key_ids, limits)
            else:  # full items: the same counts from their terms
                tf, lengths, head, heads = term_counts(
                    [_full(item).terms for item in items], keys, limits
                )
            scores = bm25_scores(tf, lengths, weights, avg)
            if head is not None and heads is not None:
                scores = scores + USER_SIDE_WEIGHT * bm25_scores(head, heads, weights, avg_user)
            listed: list[float] = scores.tolist()
            return listed

        if cold is not None:
            found = [
                (item.seq, item)
                for item in cold.items
                if item.seq is not None
                and item.seq not in pages.segment_of
                and item.timestamp < cutoff
            ]
            lexical = cold_lexical([item for _seq, item in found])
            for (seq, item), score in zip(found, lexical, strict=True):
                archived[seq] = item
                bm25[seq] = score
                source[seq] = source.get(seq, 0) | _SRC_ARCHIVE
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
                    if n in pages.segment_of and n not in source and n not in future:
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
                if n > 0 and n not in scored and n not in pages.segment_of
            }
            fetched = (cold_rows or cold_pages)(wanted) if wanted else {}
            fresh = [
                (n, item)
                for n, item in fetched.items()
                if n not in pages.segment_of and n not in scored
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
        near = neighbour_bests(seqs, rows.base, rows.chars)
        final = fused_score_array(seqs, rows.base, rows.chars)
        notes: dict[int, str] = {}
        if window is not None:
            inside = (rows.times >= window[0]) & (rows.times < window[1])
            final = np.where(inside, final + window_bonus, final)
            for seq in seqs[inside].tolist():
                notes[seq] = f" + {window_bonus:.2f} in the time window the query names"
        # Best first; equal scores, newer first. The supersede pass only reorders the
        # answer: which pages are returned is decided by relevance alone.
        lex_raw = rows.bm25
        late = rows.times >= cutoff
        if late.any():  # archived neighbours (or window pages) from after the question
            final = np.where(late, -np.inf, final)
            lex_raw = np.where(late, 0.0, lex_raw)
        top = np.lexsort((seqs, final))[::-1][:top_k]
        top = top[np.isfinite(final[top])]
        order: list[int] = seqs[top].tolist()
        final_of: dict[int, float] = dict(zip(order, final[top].tolist(), strict=True))
        lexical_best, lexical_score = -1, 0.0
        if len(seqs):
            i = int(np.lexsort((seqs, lex_raw))[-1])
            lexical_best, lexical_score = int(seqs[i]), float(lex_raw[i])
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
            facts = [self._cand_facts(seq, archived) for seq in order]
            order = supersede_order(order, final_of, facts, qt, notes, bm25)
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
        visited: dict[str, tuple[float, str]] = {}
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
            sid = pages.segment_of[seq]
            page = self._segments.page(seq)
            why = (
                f"hybrid via {via}: {terms_}"
                f" + {HYBRID_SEGMENT_WEIGHT:g}*segment {sid} F={f:.2f}"
                f" + {HYBRID_NEIGHBOR_WEIGHT:g}*neighbour={beside:.2f}"
            )
            hits.append(PageHit(page, sid, score, why))
            visited.setdefault(sid, (f, sid))
        return list(visited.values()), hits

    def _user_side_length(self, cold: ColdCandidates | None) -> float:
        """Average length (terms) of a page's query side: over the hot pages, or over the
        cold candidates when MTM holds none."""
        lex_user = self._pages.lex_user
        if len(lex_user):
            return lex_user.total_len / len(lex_user)
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
        pages = self._pages
        lo = bisect.bisect_left(pages.times, (window[0], -1))
        hi = bisect.bisect_left(pages.times, (window[1], -1))
        n_cold, cold_in = (
            cold_window(window[0], window[1], WINDOW_CANDIDATES)
            if cold_window is not None
            else (0, {})
        )
        n_window = hi - lo + n_cold
        if not n_window or n_all <= 0:
            return 0.0
        if n_window <= WINDOW_CANDIDATES:
            for _, seq in pages.times[lo:hi]:
                source[seq] = source.get(seq, 0) | _SRC_TIME
            new = [
                (seq, item)
                for seq, item in cold_in.items()
                if seq not in pages.segment_of and seq not in archived
            ]
            for (seq, item), score in zip(new, cold_lexical([i for _, i in new]), strict=True):
                archived[seq] = item
                bm25[seq] = score
            for seq in cold_in:
                if seq not in pages.segment_of:
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
    ) -> tuple[Rows, float]:
        """The rows (:class:`~memoryos_actors.tiers.fusion.Rows`) of ``seqs`` (ascending): base score of each and its
        parts, raw BM25, length and time; the segment F_score of hot candidates' segments
        not ranked yet goes into ``seg_f``. The BM25 share is of ``best_bm25``, or when it
        is None of the best BM25 of ``seqs`` (1 when none is above 0); returns the rows
        and the best used."""
        hot = [x for x in seqs if x not in archived]
        cold = [x for x in seqs if x in archived]
        cos = np.empty(len(hot) + len(cold), dtype=np.float64)
        cos[: len(hot)] = self._pages.cosines(q, hot)
        if cold:
            embs = [archived[x].embedding for x in cold]
            whole = [e for e in embs if e is not None and e.shape == (self._dim,)]
            if len(whole) == len(embs):
                mat = np.stack(whole).astype(np.float32, copy=False)
            else:  # an archived page without an embedding has cosine 0
                mat = np.zeros((len(cold), self._dim), dtype=np.float32)
                for i, emb in enumerate(embs):
                    if emb is not None and emb.shape == (self._dim,):
                        mat[i] = emb
            cos[len(hot) :] = np.clip(mat.astype(np.float64) @ q.astype(np.float64), -1.0, 1.0)
        # F_score of the segments of hot candidates not ranked yet: one matrix product.
        page_segment = self._pages.segment_of
        sids = [page_segment[x] for x in hot]
        unscored = list({sid: None for sid in sids if sid not in seg_f})
        if unscored:
            fscores = self._segments.segment_fscores(q, kw, unscored)
            seg_f.update(zip(unscored, fscores, strict=True))
        info = self._pages.info
        hot_info = [info[x] for x in hot]
        cold_items = [archived[x] for x in cold]
        # An archived page's segment is gone: no segment F_score term (0).
        seg = np.array([seg_f[sid] for sid in sids] + [0.0] * len(cold), dtype=np.float64)
        chars = np.array([c for c, _ in hot_info] + [i.chars for i in cold_items], dtype=np.int64)
        times = np.array(
            [t for _, t in hot_info] + [i.timestamp for i in cold_items], dtype=np.float64
        )
        # jaccard(kw, page keywords), inline: |a & b| / |a | b| with |a | b| counted as
        # |a| + |b| - |a & b| (the same integers, so the same quotient).
        n_kw = len(kw)
        held_kws = self._pages.keywords
        page_kws = [held_kws[x] for x in hot] + [i.keywords for i in cold_items]
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
        rows = Rows(
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
        page = self._segments.page(seq)
        text = f"{page.query} {page.response}"
        return page.page_id, page.timestamp, text, self._pages.lex.doc_terms(seq) or terms(text)
