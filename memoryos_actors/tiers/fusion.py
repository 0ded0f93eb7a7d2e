"""Hybrid retrieval's scoring maths: a candidate's base score from its sources, the
neighbouring-turn term, and the rows of scores a query's candidates are ranked by.

Pure functions of numbers (no state, no I/O), each in a scalar form that states the rule
and an array form that computes the same values bit for bit for hundreds of candidates
(``tests/unit/test_hybrid_rules.py`` checks both). The weights were chosen on LoCoMo and
checked on the LongMemEval dev set (see bench/README.md).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import numpy.typing as npt

__all__ = [
    "HYBRID_DENSE_WEIGHT",
    "HYBRID_KEYWORD_WEIGHT",
    "HYBRID_LEXICAL_WEIGHT",
    "HYBRID_NEIGHBOR_WEIGHT",
    "HYBRID_SEGMENT_WEIGHT",
    "NEIGHBOUR_PASSAGE_CHARS",
    "ROW_FIELDS",
    "Rows",
    "base_score",
    "base_scores",
    "fused_score_array",
    "fused_scores",
    "near",
    "neighbour_bests",
]

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


def near(base: Mapping[int, float], chars: Mapping[int, int], seq: int) -> float:
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
    return {seq: b + HYBRID_NEIGHBOR_WEIGHT * near(base, chars, seq) for seq, b in base.items()}


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


def neighbour_bests(
    seqs: npt.NDArray[np.int64],
    base: npt.NDArray[np.float64],
    chars: npt.NDArray[np.int64],
) -> npt.NDArray[np.float64]:
    """:func:`near` of every candidate, for candidates in ascending seq order: the turns
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
    return base + HYBRID_NEIGHBOR_WEIGHT * neighbour_bests(seqs, base, chars)


class Rows:
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

    def take(self, index: npt.NDArray[np.intp]) -> Rows:
        """These rows in the order (or the subset) ``index`` gives."""
        return Rows(*(getattr(self, name)[index] for name in ROW_FIELDS))

    def concat(self, other: Rows) -> Rows:
        """These rows then ``other``'s."""
        return Rows(
            *(np.concatenate((getattr(self, name), getattr(other, name))) for name in ROW_FIELDS)
        )


ROW_FIELDS = ("seqs", "base", "bm25", "chars", "cos", "kw", "lex", "seg", "times")


_ROW_FIELDS = ("seqs", "base", "bm25", "chars", "cos", "kw", "lex", "seg", "times")
