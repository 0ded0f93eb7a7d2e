"""Non-memory baselines for the recall benchmarks: Okapi BM25 and flat embedding search.

Both rankers index a fixed list of documents (one per page) and rank *every* document for a
query, best first, so a harness can truncate the ranking at any k. Ties keep document order
(the earlier page first), which makes the rankings deterministic.

Neither ranker knows about memory tiers, time or users: they are the yardsticks a memory
system has to beat when it is given the same pages.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Protocol

import numpy as np

__all__ = ["BM25Ranker", "Embedder", "FlatRanker", "tokenize"]

# Letters and digits, Unicode-aware; apostrophes split words ("Caroline's" -> caroline, s),
# which is what a keyword search user expects from a simple tokenizer.
_TOKEN_RE = re.compile(r"[^\W_]+", re.UNICODE)


def tokenize(text: str) -> list[str]:
    """Split ``text`` into lower-case word tokens (runs of letters and digits).

    No stemming and no stop-word list: BM25's idf already discounts frequent words, and a
    baseline should be simple enough to reproduce by hand.
    """
    return _TOKEN_RE.findall(text.casefold())


class BM25Ranker:
    """Okapi BM25 over a fixed list of documents.

    Scores use the non-negative idf ``log(1 + (N - df + 0.5) / (df + 0.5))`` and the usual
    term-frequency saturation with ``k1`` and length normalisation with ``b``.

    Args:
        documents: the texts to index; document ``i`` is reported as index ``i``.
        k1: term-frequency saturation (>= 0).
        b: length normalisation, 0 (none) to 1 (full).
        stopwords: tokens ignored in documents and queries. Question words ("what", "did")
            otherwise pull in pages that share nothing but grammar with the question.
    """

    def __init__(
        self,
        documents: Sequence[str],
        *,
        k1: float = 1.2,
        b: float = 0.75,
        stopwords: Iterable[str] = (),
    ) -> None:
        if k1 < 0:
            raise ValueError(f"k1 must be >= 0, got {k1}")
        if not 0.0 <= b <= 1.0:
            raise ValueError(f"b must be within [0, 1], got {b}")
        self.k1 = k1
        self.b = b
        self.stopwords = frozenset(stopwords)
        self._n_docs = len(documents)
        lengths = np.zeros(self._n_docs, dtype=np.float64)
        # Postings: term -> (document indices, term frequencies); scoring a query then only
        # touches the documents that contain one of its terms.
        postings: dict[str, tuple[list[int], list[int]]] = {}
        for doc_index, text in enumerate(documents):
            counts = Counter(self._terms(text))
            lengths[doc_index] = sum(counts.values())
            for term, tf in counts.items():
                docs, tfs = postings.setdefault(term, ([], []))
                docs.append(doc_index)
                tfs.append(tf)
        average = float(lengths.mean()) if self._n_docs and lengths.mean() > 0 else 1.0
        # Per-document length factor of the BM25 denominator, computed once.
        self._norm = k1 * (1.0 - b + b * lengths / average)
        self._postings: dict[str, tuple[np.ndarray, np.ndarray, float]] = {}
        for term, (docs, tfs) in postings.items():
            df = len(docs)
            idf = math.log(1.0 + (self._n_docs - df + 0.5) / (df + 0.5))
            self._postings[term] = (
                np.asarray(docs, dtype=np.int64),
                np.asarray(tfs, dtype=np.float64),
                idf,
            )

    def __len__(self) -> int:
        """Number of indexed documents."""
        return self._n_docs

    def _terms(self, text: str) -> list[str]:
        return [token for token in tokenize(text) if token not in self.stopwords]

    def scores(self, query: str) -> np.ndarray:
        """BM25 score of every document for ``query``, shape ``(n_documents,)``, float64.

        A query term repeated in the query counts once per occurrence, as in the original
        formulation without query-term saturation.
        """
        result = np.zeros(self._n_docs, dtype=np.float64)
        for term in self._terms(query):
            posting = self._postings.get(term)
            if posting is None:
                continue
            docs, tfs, idf = posting
            result[docs] += idf * tfs * (self.k1 + 1.0) / (tfs + self._norm[docs])
        return result

    def rank(self, query: str) -> list[int]:
        """All document indices, best first; ties keep document order."""
        return _rank_by_score(self.scores(query))


class Embedder(Protocol):
    """What :class:`FlatRanker` needs from an embedder (the project's ``Embedder`` protocol)."""

    name: str
    dim: int

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts`` as an ``(n, dim)`` float32 array with L2-normalised rows."""
        ...


class FlatRanker:
    """Exhaustive cosine search over document embeddings (no index, no tiers).

    Args:
        documents: the texts to index; document ``i`` is reported as index ``i``.
        embedder: turns texts into L2-normalised vectors; cosine is then a dot product.
        batch_size: documents embedded per call, to bound memory (documents).
    """

    def __init__(
        self, documents: Sequence[str], embedder: Embedder, *, batch_size: int = 256
    ) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self.embedder = embedder
        chunks = [
            np.asarray(embedder.embed(list(documents[i : i + batch_size])), dtype=np.float32)
            for i in range(0, len(documents), batch_size)
        ]
        self._matrix = (
            np.concatenate(chunks, axis=0)
            if chunks
            else np.zeros((0, embedder.dim), dtype=np.float32)
        )

    @classmethod
    def from_matrix(cls, matrix: np.ndarray, embedder: Embedder) -> FlatRanker:
        """A ranker over document vectors embedded before (row ``i`` is document ``i``)."""
        ranker = cls([], embedder)
        ranker._matrix = np.asarray(matrix, dtype=np.float32)
        return ranker

    @property
    def matrix(self) -> np.ndarray:
        """The document vectors, one row per document."""
        return self._matrix

    def __len__(self) -> int:
        """Number of indexed documents."""
        return int(self._matrix.shape[0])

    def scores(self, query: str) -> np.ndarray:
        """Cosine similarity of every document to ``query``, shape ``(n_documents,)``."""
        vector = np.asarray(self.embedder.embed([query]), dtype=np.float32).reshape(-1)
        return self._matrix @ vector

    def rank(self, query: str) -> list[int]:
        """All document indices, best first; ties keep document order."""
        return _rank_by_score(self.scores(query))


def _rank_by_score(scores: np.ndarray) -> list[int]:
    # A stable sort of the negated scores keeps equal-scored documents in index order.
    return [int(i) for i in np.argsort(-scores, kind="stable")]
