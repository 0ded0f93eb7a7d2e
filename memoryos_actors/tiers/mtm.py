"""MTM: the mid-term memory tier, pages grouped into topic segments.

Pure state and transitions (no threads, no I/O, time from an injected clock), following
MemoryOS (Kang et al., 2025). :class:`MTMCore` is one state machine whose invariants (a
page in exactly one segment, the vector, BM25 and chain indexes in step with the segments,
heat and eviction order) span placement, eviction, promotion and search. Beside it: a
segment's state (:mod:`~memoryos_actors.tiers.segments`), the indexes over the held pages
(:mod:`~memoryos_actors.tiers.page_index`), hybrid retrieval
(:mod:`~memoryos_actors.tiers.hybrid`, its scoring maths in
:mod:`~memoryos_actors.tiers.fusion`), the snapshot format of the core's state
(:mod:`~memoryos_actors.tiers.mtm_state`), and the pure maths of ``scoring.py``,
``lexicon.py`` and ``tiers/temporal.py``.

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

import dataclasses
import math
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from memoryos_actors import smallvec
from memoryos_actors.clock import Clock
from memoryos_actors.config import MemoryConfig, MTMRules, RetrievalMode
from memoryos_actors.errors import InvalidInput
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
from memoryos_actors.tiers import mtm_state
from memoryos_actors.tiers._ann import AnnIndex
from memoryos_actors.tiers.hybrid import (
    CANDIDATE_FACTOR,
    MIN_CANDIDATES,
    ColdWindow,
    HybridSearch,
)
from memoryos_actors.tiers.page_index import PageIndexes
from memoryos_actors.tiers.segments import Segment, index_of

if TYPE_CHECKING:
    from memoryos_actors.cold_items import ColdCandidates, ColdItem, ColdRow

__all__ = ["MTMCore"]

CHAIN_MEMORY = 64
"""Dialogue chains remembered for chain affinity (most recent first)."""


def _retrieval_mode(mode: object) -> RetrievalMode:
    """``mode`` checked: ``"paper"`` or ``"hybrid"``."""
    if mode == "paper":
        return "paper"
    if mode == "hybrid":
        return "hybrid"
    raise InvalidInput(f"mode must be 'paper' or 'hybrid', got {mode!r}")


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
        self._segments: dict[str, Segment] = {}
        self._seg_index = AnnIndex(dim, config.seed)
        # Every index over the pages held (vectors, BM25, times, page -> segment), added
        # to and removed from in one step.
        self._pages = PageIndexes(dim, config.seed)
        self._hybrid = HybridSearch(self._pages, self, dim)
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
        # Copies and maths through smallvec: one page's vector, done without letting go
        # of the interpreter lock (see memoryos_actors.smallvec), the same bits.
        try:
            if isinstance(value, np.ndarray) and value.dtype.kind in "fiu":
                arr = smallvec.cast(value.reshape(-1), np.float32)
            else:
                arr = np.array(value, dtype=np.float32).reshape(-1)
        except (TypeError, ValueError):
            raise InvalidInput(f"{what} must be a numeric vector") from None
        if arr.shape != (self._dim,):
            raise InvalidInput(f"{what} must have {self._dim} values, got shape {arr.shape}")
        # One dot product checks finiteness (any NaN or inf makes it non-finite; float64
        # so huge finite values cannot overflow) and gives the norm.
        wide = smallvec.cast(arr, np.float64)
        sq = smallvec.dot(wide, wide)
        if not math.isfinite(sq):
            raise InvalidInput(f"{what} must be finite")
        if sq > 0 and abs(sq - 1.0) > 1e-6:
            smallvec.divide_into(arr, math.sqrt(sq))
        arr.flags.writeable = False
        return arr

    def _now(self, now: float | None) -> float:
        if now is None:
            return float(self._clock.now())
        if isinstance(now, bool) or not isinstance(now, (int, float)) or not math.isfinite(now):
            raise InvalidInput(f"now must be a finite number of seconds, got {now!r}")
        return float(now)

    def _heat(self, seg: Segment, now: float) -> float:
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
    ) -> list[tuple[float, Segment]]:
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

    def _drop_segment(self, seg: Segment) -> None:
        del self._segments[seg.segment_id]
        self._seg_index.remove(seg.number)
        for page, emb in zip(seg.pages, seg.embs, strict=True):
            self._evicted_embs[page.seq] = emb
            self._pages.remove(page)

    def _maintain(self, now: float) -> tuple[tuple[SegmentRecord, ...], tuple[SegmentRecord, ...]]:
        """Recompute heat, promote hot segments, evict the coldest above capacity."""
        user = self._user_id or ""
        promoted: list[SegmentRecord] = []
        c = self._config
        alpha, beta, gamma, mu = c.heat_alpha, c.heat_beta, c.heat_gamma, c.recency_mu
        exp = math.exp
        for seg in self._segments.values():
            # scoring.heat inlined, the same operations in the same order (so the same
            # floats): this loop runs over every segment at every insert.
            seg.heat = (
                alpha * seg.n_visit
                + beta * seg.l_interaction
                + gamma * exp(-max(0.0, now - seg.last_access) / mu)
            )
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

    def _chain_segment(self, page: Page) -> Segment | None:
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
            return MTMEffects(segment_id=self._pages.segment_of.get(page.seq), duplicate=True)
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
                seg, created = Segment(self._next_segment, t), True
                self._next_segment += 1
                self._segments[seg.segment_id] = seg
        if page.chain_id:
            self._chains.pop(page.chain_id, None)
            self._chains[page.chain_id] = seg.segment_id
            while len(self._chains) > CHAIN_MEMORY:
                del self._chains[next(iter(self._chains))]
        seg.add(page, emb)
        self._pages.add(page, seg.segment_id, emb)
        seg.l_interaction += 1
        seg.last_access = t
        pushed_out: list[Page] = []
        max_pages = self._rules.segment_max_pages
        while max_pages is not None and len(seg.pages) > max_pages:
            old, old_emb = seg.pop_oldest()
            self._evicted_embs[old.seq] = old_emb
            self._pages.remove(old)
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
        return self._pages.segment_of.get(seq)

    def discard_page(self, seq: int) -> bool:
        """Remove one page without effects (it is archived already); see
        :meth:`discard_segment`. A segment left empty is removed too."""
        sid = self._pages.segment_of.get(seq)
        if sid is None:
            return False
        seg = self._segments[sid]
        i = index_of(seg.pages, seq)
        page = seg.pages[i]
        del seg.pages[i]
        emb = seg.embs.pop(i)
        if seg.emb_sum is not None:
            seg.emb_sum -= emb
        seg.kw_counts.subtract(page.keywords)
        seg.kw_counts = +seg.kw_counts
        self._pages.remove(page)
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
          pages nearest to the query, the pages with the best BM25 and, with ``cold``,
          archived pages, all scored under one formula
          (:class:`~memoryos_actors.tiers.hybrid.HybridSearch` states the rules, and
          :mod:`~memoryos_actors.tiers.fusion` the weights); the best ``top_k`` are
          returned, and the segments that supplied a returned page count as visited.

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
            query_text: hybrid mode only: the query as asked, for the time-aware rules
                (a time window it names, supersession) and first-person questions.
            cold_window: hybrid mode only: counts (and, for small windows, returns) the
                archived pages written in a time window, so they can be candidates.
            cold_rows: hybrid mode only: as ``cold_pages``, but what scoring needs of each
                page (:class:`~memoryos_actors.cold_items.ColdRow`), for neighbouring turns.
                ``cold``'s items may be such rows too (with the query terms' ids); the
                pages returned are then read in full through ``cold_pages``.

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
        chosen = self._config.retrieval_mode if mode is None else _retrieval_mode(mode)
        t = self._now(now)

        ranked = self._ranked_segments(q, kw, top_m)
        if chosen == "paper":
            visited, hits = self._search_paper(q, ranked, top_k)
        else:
            used, hits = self._hybrid.search(
                q,
                kw,
                [(f, seg.segment_id) for f, seg in ranked],
                top_k,
                cold,
                cold_pages,
                query_text,
                t,
                cold_window,
                cold_rows,
            )
            visited = [(f, self._segments[sid]) for f, sid in used]

        seg_hits: list[SegmentHit] = []
        for f, seg in sorted(visited, key=lambda fs: (-fs[0], fs[1].number)):
            seg.n_visit += 1
            seg.last_access = t
            seg.heat = self._heat(seg, t)
            seg_hits.append(SegmentHit(seg.view(), f, f"segment {seg.segment_id} F={f:.2f}"))
        return MTMHits(chosen, tuple(seg_hits), tuple(hits))

    def _search_paper(
        self, q: npt.NDArray[np.float32], ranked: list[tuple[float, Segment]], top_k: int
    ) -> tuple[list[tuple[float, Segment]], list[PageHit]]:
        pool = [(f, seg, page) for f, seg in ranked for page in seg.pages]
        cos = self._pages.cosines(q, [p.seq for _, _, p in pool])
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

    # ------------------------------------------------------------------ inspection

    def page(self, seq: int) -> Page:
        """The held page of turn ``seq`` (KeyError if it is not held)."""
        seg = self._segments[self._pages.segment_of[seq]]
        return seg.pages[index_of(seg.pages, seq)]

    def segment_fscores(
        self, q: npt.NDArray[np.float32], kw: frozenset[str], segment_ids: list[str]
    ) -> list[float]:
        """F_score(segment, query) of each of ``segment_ids`` (held segments), in order:
        cos(e_s, ``q``) + Jaccard(K_s, ``kw``), the cosines in one matrix product."""
        segs = [self._segments[sid] for sid in segment_ids]
        cos = np.clip(self._seg_index.dots(q, [seg.number for seg in segs]), -1.0, 1.0)
        return [c + jaccard(seg.keywords, kw) for seg, c in zip(segs, cos.tolist(), strict=True)]

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
        return tuple(f"p{seq}" for seq in sorted(self._pages.segment_of))

    # ------------------------------------------------------------------ persistence

    def to_state(self) -> dict[str, Any]:
        """The whole state as msgpack-friendly values (embeddings as float32 bytes); the
        format is :mod:`~memoryos_actors.tiers.mtm_state`'s."""
        return mtm_state.save(self)

    def state_parts(self) -> mtm_state.MTMStateParts:
        """What a snapshot of this core holds, for :mod:`~memoryos_actors.tiers.mtm_state`
        (the segments are this core's own: read them, do not change them)."""
        return mtm_state.MTMStateParts(
            next_segment=self._next_segment,
            chains=tuple(self._chains.items()),
            page_graph=self._pages.vectors.graph_bytes(),
            segment_graph=self._seg_index.graph_bytes(),
            segments=tuple(self._segments.values()),
        )

    def restore(
        self,
        *,
        user_id: str | None,
        max_seq: int,
        next_segment: int,
        chains: Iterable[tuple[str, str]],
        segments: Iterable[Segment],
        page_vecs: Mapping[int, npt.NDArray[np.float32]],
        page_graph: bytes | None,
        segment_graph: bytes | None,
    ) -> None:
        """Take over the state :mod:`~memoryos_actors.tiers.mtm_state` read back into this
        new, empty core: ``segments`` in their order, with their pages, and the saved
        hnswlib graphs (None: built from ``page_vecs``, each page's embedding by seq, and
        the segments' embeddings)."""
        self._user_id = user_id
        self._max_seq = max_seq
        self._next_segment = next_segment
        self._chains = dict(chains)
        seg_vecs: dict[int, npt.NDArray[np.float32]] = {}
        for seg in segments:
            for page in seg.pages:
                self._pages.add(page, seg.segment_id, None)
            self._segments[seg.segment_id] = seg
            seg_vecs[seg.number] = seg.embedding
        self._pages.vectors.restore(dict(page_vecs), page_graph)
        self._seg_index.restore(seg_vecs, segment_graph)

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
        return mtm_state.load(cls, state, config, dim, clock)
