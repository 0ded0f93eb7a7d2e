"""The indexes over the pages MTM holds, kept in step with its segments.

:class:`PageIndexes` owns, per page held: its vector in an approximate-nearest-neighbour
index, its terms in two BM25 indexes (the whole turn, and the query side: the user's own
words), its time in a sorted list (for time windows), what scoring reads of it (length,
keywords, time) and the segment that holds it. The MTM core adds and removes pages through
it only, so no index can hold a page another misses; hybrid retrieval
(:mod:`memoryos_actors.tiers.hybrid`) reads it.
"""

from __future__ import annotations

import bisect

import numpy as np
import numpy.typing as npt

from memoryos_actors.lexicon import LexIndex, terms
from memoryos_actors.records import Page
from memoryos_actors.tiers._ann import AnnIndex

__all__ = ["PageIndexes", "page_terms"]


def page_terms(page: Page) -> list[str]:
    """BM25 terms of a page: both sides of the turn (stemmed, stop words removed)."""
    return terms(f"{page.query} {page.response}")


class PageIndexes:
    """Every index over the pages MTM holds (see the module docstring).

    Attributes:
        vectors: page embeddings by turn seq (cosine = dot product: unit vectors).
        lex: BM25 index of each page's whole turn.
        lex_user: BM25 index of each page's query side.
        times: ``(timestamp, seq)`` of every page, ascending.
        info: per seq, ``(length in characters, timestamp)``: numbers only, so the
            garbage collector stops tracking each tuple after its first pass (a tuple
            holding the keywords set would be walked at every full collection).
        keywords: per seq, the page's keywords (the page's own set).
        segment_of: per seq, the id of the segment holding the page.
    """

    __slots__ = ("info", "keywords", "lex", "lex_user", "segment_of", "times", "vectors")

    def __init__(self, dim: int, seed: int) -> None:
        self.vectors = AnnIndex(dim, seed)
        self.lex = LexIndex()
        self.lex_user = LexIndex()
        self.times: list[tuple[float, int]] = []
        self.info: dict[int, tuple[int, float]] = {}
        self.keywords: dict[int, frozenset[str]] = {}
        self.segment_of: dict[int, str] = {}

    def __contains__(self, seq: object) -> bool:
        """Whether the page of turn ``seq`` is held."""
        return seq in self.segment_of

    def add(self, page: Page, segment_id: str, emb: npt.NDArray[np.float32] | None) -> None:
        """Index ``page`` as held by ``segment_id``; its vector too unless ``emb`` is None
        (a restored core loads every vector at once, see :meth:`AnnIndex.restore`)."""
        self.segment_of[page.seq] = segment_id
        self.lex.add(page.seq, page_terms(page))
        self.lex_user.add(page.seq, terms(page.query))
        bisect.insort(self.times, (page.timestamp, page.seq))
        self.info[page.seq] = (len(page.query) + len(page.response), page.timestamp)
        self.keywords[page.seq] = page.keywords
        if emb is not None:
            self.vectors.upsert(page.seq, emb)

    def remove(self, page: Page) -> None:
        """Forget ``page`` in every index (nothing for an index that lacks it)."""
        self.vectors.remove(page.seq)
        self.lex.remove(page.seq)
        self.lex_user.remove(page.seq)
        self.info.pop(page.seq, None)
        self.keywords.pop(page.seq, None)
        self.segment_of.pop(page.seq, None)
        i = bisect.bisect_left(self.times, (page.timestamp, page.seq))
        if i < len(self.times) and self.times[i] == (page.timestamp, page.seq):
            del self.times[i]

    def cosines(self, q: npt.NDArray[np.float32], seqs: list[int]) -> npt.NDArray[np.float64]:
        """cos(page, ``q``) of the pages of ``seqs`` (held ones), in order."""
        if not seqs:
            return np.zeros(0)
        # Stored vectors are unit length (or zero), so the dot product is the cosine.
        return np.clip(self.vectors.dots(q, seqs), -1.0, 1.0)
