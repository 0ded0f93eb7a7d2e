"""A topic segment of MTM: its pages, their embeddings, e_s, K_s, heat counters.

:class:`Segment` is the MTM core's mutable state for one segment; it never leaves the core
(views and records are copies). See :mod:`memoryos_actors.tiers.mtm` for the rules.
"""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import numpy.typing as npt

from memoryos_actors import smallvec
from memoryos_actors.records import Page, SegmentRecord, SegmentView

__all__ = ["SEGMENT_KEYWORD_LIMIT", "Segment", "index_of"]

SEGMENT_KEYWORD_LIMIT = 24
"""Default ``segment_keyword_limit``: most frequent page keywords kept in a segment's K_s.

A plain union would grow with every page and make Jaccard against a single page's dozen
keywords tend to 0, so large segments could never be joined again."""


class Segment:
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
        norm = math.sqrt(smallvec.dot(total, total))
        # e_s = total / norm as float32 (smallvec: the same bits, keeping the interpreter
        # lock; this runs at every insert).
        if norm > 0:
            unit = smallvec.cast(total, np.float64)
            smallvec.divide_into(unit, norm)
            self.embedding = smallvec.cast(unit, np.float32)
        else:
            self.embedding = smallvec.cast(total, np.float32)
        # Ties broken alphabetically so K_s does not depend on insertion order of equals.
        top = sorted(self.kw_counts.items(), key=lambda kv: (-kv[1], kv[0]))
        # Summary keywords are kept apart: summaries arrive after a debounce measured in wall
        # time, and letting them move K_s would make placement depend on scheduling.
        self.keywords = frozenset(k for k, _ in top[:keyword_limit])

    def _resum(self) -> npt.NDArray[np.float64]:
        total = smallvec.zeros(len(self.embs[0]) if self.embs else 0, np.float64)
        for emb in self.embs:
            smallvec.add_into(total, emb)
        self.emb_sum = total
        return total

    def add(self, page: Page, emb: npt.NDArray[np.float32]) -> None:
        self.pages.append(page)
        self.embs.append(emb)
        if self.emb_sum is None:
            self._resum()
        else:
            smallvec.add_into(self.emb_sum, emb)
        self.kw_counts.update(page.keywords)

    def pop_oldest(self) -> tuple[Page, npt.NDArray[np.float32]]:
        page = self.pages.pop(0)
        emb = self.embs.pop(0)
        if self.emb_sum is not None:
            smallvec.sub_into(self.emb_sum, emb)
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


def index_of(pages: list[Page], seq: int) -> int:
    """Position of the page of turn ``seq`` in ``pages`` (ascending seq order: binary
    search)."""
    lo, hi = 0, len(pages)
    while lo < hi:
        mid = (lo + hi) // 2
        if pages[mid].seq < seq:
            lo = mid + 1
        else:
            hi = mid
    return lo
