"""A small wrapper around an hnswlib inner-product index with stable integer labels.

Used by MTM for its segment and page indexes. It hides three hnswlib details: the index must
be resized by hand, a deleted label's slot is only reused with ``replace_deleted``, and a
query for more neighbours than the graph can return raises. When the caller asks for at
least as many candidates as there are live vectors, every label is returned, so small
indexes are searched exactly.
"""

from __future__ import annotations

import os
import tempfile

import numpy as np
import numpy.typing as npt

from memoryos_actors import smallvec
from memoryos_actors.prerequisites import MissingPrerequisite, hnswlib_note

try:
    import hnswlib
except ImportError as exc:  # not built (no compiler at install time) or built badly
    raise MissingPrerequisite(hnswlib_note(exc)) from exc

__all__ = ["AnnIndex"]

_INITIAL_CAPACITY = 64
_BUILD_AT = 2048
"""The hnswlib graph is built once more vectors than this are stored. Below it a search is
exact, one matrix product over the stored vectors, which costs little more than a graph
search at this size; and an hnswlib index has a fixed cost of about 2.6 MB (its table of
label locks) however few vectors it holds, which, two indexes per user, was most of a busy
user's memory and a few milliseconds to make (bench/footprint.py)."""
_EXACT_BLOCK = 256
"""Rows per matrix product in an exact search (see :meth:`AnnIndex._exact`)."""
_GATHER_ROWS = 4
"""Up to this many rows, :meth:`AnnIndex.dots` gathers them without numpy's loops (which
let go of the interpreter lock): past it the Python loop costs more than the hand-off
(32 rows: 56 us against 10 us, uncontended)."""
_ALL_UP_TO = 64
"""Up to this many vectors, :meth:`AnnIndex.candidates` returns every label: its callers
score every candidate exactly anyway."""
_EF_CONSTRUCTION = 100
_M = 16
_MIN_EF = 100


class AnnIndex:
    """Label -> unit vector, with approximate nearest-neighbour candidates by inner product.

    Deterministic for a given sequence of calls and ``seed``: hnswlib runs single-threaded.
    The vectors are kept as rows of one matrix (a removed label's row is reused), so the
    exact inner products of a query with many labels (:meth:`dots`) cost one gather and
    one matrix product, not a stack of per-label arrays.

    Args:
        dim: vector length.
        seed: hnswlib's random seed.
    """

    __slots__ = ("_deleted", "_dim", "_dirty", "_free", "_index", "_mat", "_rows", "_seed")

    def __init__(self, dim: int, seed: int) -> None:
        self._dim = dim
        self._seed = seed
        self._mat: npt.NDArray[np.float32] = np.zeros((0, dim), dtype=np.float32)
        self._rows: dict[int, int] = {}  # label -> row of _mat
        self._free: list[int] = []  # rows of removed labels, reused first
        self._index: hnswlib.Index | None = None
        self._deleted = 0  # slots marked deleted and not yet reused
        #: Labels whose vector changed since the graph last saw it (see upsert).
        self._dirty: set[int] = set()

    def __len__(self) -> int:
        return len(self._rows)

    def __contains__(self, label: object) -> bool:
        return label in self._rows

    def vector(self, label: int) -> npt.NDArray[np.float32]:
        """A copy of the stored vector of ``label``."""
        row: npt.NDArray[np.float32] = self._mat[self._rows[label]].copy()
        return row

    def dots(self, query: npt.NDArray[np.floating], labels: list[int]) -> npt.NDArray[np.float64]:
        """Inner products (float64) of ``query`` with the vectors of ``labels``, in order."""
        if not labels:
            return np.zeros(0)
        q = smallvec.cast(np.asarray(query).reshape(self._dim), np.float64)
        rows = [self._rows[x] for x in labels]
        if len(rows) > _GATHER_ROWS:
            # Real work: numpy's gather and cast may let other threads run meanwhile.
            return self._mat[rows].astype(np.float64) @ q
        # A few rows gathered with smallvec (the same bits as the gather and cast above,
        # without letting go of the interpreter lock for a microsecond of work), then one
        # matrix-vector product, which keeps the lock at this size.
        mat = self._mat
        wide = np.empty((len(rows), self._dim), dtype=np.float64)
        for i, r in enumerate(rows):
            smallvec.set_row(wide, i, mat[r])
        return wide @ q

    def _put(self, label: int, row: npt.NDArray[np.float32]) -> None:
        r = self._rows.get(label)
        if r is None:
            if self._free:
                r = self._free.pop()
            else:
                r = len(self._rows)
                if r >= self._mat.shape[0]:
                    grown = np.zeros(
                        (max(_INITIAL_CAPACITY, 2 * self._mat.shape[0]), self._dim),
                        dtype=np.float32,
                    )
                    grown[: self._mat.shape[0]] = self._mat
                    self._mat = grown
            self._rows[label] = r
        smallvec.set_row(self._mat, r, row)

    def _ensure_index(self) -> hnswlib.Index:
        if self._index is None:
            index = hnswlib.Index(space="ip", dim=self._dim)
            index.init_index(
                max_elements=_INITIAL_CAPACITY,
                ef_construction=_EF_CONSTRUCTION,
                M=_M,
                random_seed=self._seed,
                allow_replace_deleted=True,
            )
            self._index = index
        return self._index

    def upsert(self, label: int, vector: npt.NDArray[np.float32]) -> None:
        """Add ``label`` or replace its vector."""
        row = np.asarray(vector, dtype=np.float32).reshape(1, self._dim)
        if self._index is None:
            self._put(label, row[0])
            if len(self._rows) > _BUILD_AT:
                self._build()
            return
        index = self._index
        if label in self._rows:
            # A new vector for a label the graph holds (a segment that gathered a page):
            # the graph is told once, before it is next searched or saved, however often
            # the vector changed meanwhile; exact scores (dots) read the matrix, current.
            self._dirty.add(label)
        else:
            if self._deleted > 0:
                index.add_items(row, [label], num_threads=1, replace_deleted=True)
                self._deleted -= 1
            else:
                if index.get_current_count() >= index.get_max_elements():
                    index.resize_index(index.get_max_elements() * 2)
                index.add_items(row, [label], num_threads=1)
        self._put(label, row[0])

    def _flush(self) -> None:
        """Give the graph the current vectors of the labels changed since, in label order."""
        if self._dirty and self._index is not None:
            labels = sorted(self._dirty)
            self._index.add_items(self._mat[[self._rows[x] for x in labels]], labels, num_threads=1)
        self._dirty.clear()

    def _build(self) -> None:
        """Build the graph from the stored vectors, in label order (deterministic)."""
        self._dirty.clear()
        index = self._ensure_index()
        labels = sorted(self._rows)
        index.resize_index(max(_INITIAL_CAPACITY, 2 * len(labels)))
        index.add_items(self._mat[[self._rows[x] for x in labels]], labels, num_threads=1)

    def graph_bytes(self) -> bytes | None:
        """The hnswlib graph in hnswlib's own file format (None while not built).

        Saved beside the vectors in snapshots: loading a saved graph is much faster than
        building it again (bench/README.md has the measurement).
        """
        if self._index is None:
            return None
        self._flush()
        with tempfile.TemporaryDirectory(prefix="memoryos-ann-") as tmp:
            path = os.path.join(tmp, "index.bin")
            self._index.save_index(path)
            with open(path, "rb") as f:
                return f.read()

    def restore(self, vectors: dict[int, npt.NDArray[np.float32]], graph: bytes | None) -> None:
        """Load ``vectors`` and, if given, a graph from :meth:`graph_bytes` (else build)."""
        self._mat = np.zeros((max(_INITIAL_CAPACITY, len(vectors)), self._dim), dtype=np.float32)
        self._rows = {}
        self._free = []
        for label, v in vectors.items():
            self._put(label, np.asarray(v, dtype=np.float32).reshape(self._dim))
        self._index = None
        self._deleted = 0
        self._dirty.clear()
        if graph is None or len(self._rows) <= _BUILD_AT:
            # A graph saved for an index this small (by an older version) is not loaded:
            # exact search is as fast, and the graph's memory is saved.
            if len(self._rows) > _BUILD_AT:
                self._build()
            return
        with tempfile.TemporaryDirectory(prefix="memoryos-ann-") as tmp:
            path = os.path.join(tmp, "index.bin")
            with open(path, "wb") as f:
                f.write(graph)
            index = hnswlib.Index(space="ip", dim=self._dim)
            index.load_index(path, allow_replace_deleted=True)
        index.set_num_threads(1)
        self._index = index
        self._deleted = index.get_current_count() - len(self._rows)

    def remove(self, label: int) -> None:
        """Forget ``label`` (no error if absent)."""
        r = self._rows.pop(label, None)
        if r is None:
            return
        self._free.append(r)
        self._dirty.discard(label)
        if self._index is not None:
            self._index.mark_deleted(label)
            self._deleted += 1

    def candidates(self, query: npt.NDArray[np.float32], k: int) -> list[int]:
        """Up to ``k`` labels with the largest inner product with ``query``, unordered.

        All live labels when ``k >= len(self)``; if hnswlib cannot return ``k`` neighbours
        (a graph thinned by deletions), falls back to all labels too, so nothing is missed.
        """
        if k <= 0 or not self._rows:
            return []
        n = len(self._rows)
        if k >= n or (self._index is None and n <= _ALL_UP_TO):
            return list(self._rows)
        if self._index is None:
            return self._exact(query, k)
        self._flush()
        self._index.set_ef(max(2 * k, _MIN_EF))
        try:
            labels, _ = self._index.knn_query(
                np.asarray(query, dtype=np.float32).reshape(1, self._dim), k=k, num_threads=1
            )
        except RuntimeError:
            return list(self._rows)
        return [int(x) for x in labels[0]]

    def _exact(self, query: npt.NDArray[np.float32], k: int) -> list[int]:
        """The ``k`` labels with the largest inner product with ``query``, by brute force
        (``0 < k < len(self)``), unordered."""
        n = len(self._rows)
        labels = np.fromiter(self._rows.keys(), dtype=np.int64, count=n)
        rows = np.fromiter(self._rows.values(), dtype=np.int64, count=n)
        q = np.asarray(query, dtype=np.float32).reshape(self._dim)
        hi = int(rows.max()) + 1
        # In blocks of rows: OpenBLAS runs one product of this size on all its threads,
        # which costs ~10x more than one thread when other threads of this process (or
        # other processes) want the cores too (a 2,048 x 512 product: 2.3 ms against
        # 0.07-0.3 ms in blocks, on a loaded 2-core machine).
        mat = self._mat
        scores = np.concatenate(
            [mat[i : min(i + _EXACT_BLOCK, hi)] @ q for i in range(0, hi, _EXACT_BLOCK)]
        )[rows]
        best = np.argpartition(-scores, k - 1)[:k]
        return [int(x) for x in labels[best]]
