"""Vector maths on one embedding at a time that keeps the interpreter lock.

numpy lets go of the interpreter lock in loops over more than a few hundred elements
(copies, casts, ufuncs, ``np.dot``, ``np.zeros``), so another thread can run while it
works. For one embedding (a few hundred floats, a microsecond of work) that release is a
loss: when other threads want the lock, each release hands it over and the releasing
thread waits to get it back, a thread switch for a microsecond of arithmetic. The tiers
do several such operations per page, in one thread per user; with many users busy at
once the hand-offs, not the arithmetic, set the pace (measured in
``bench/results/throughput.json``).

The helpers here do the same operations in slices of at most :data:`CHUNK` elements, too
short for numpy to let go of the lock, and give **the same bits** as the plain numpy
expression named in each docstring: an element-wise operation does not depend on how the
array is cut, and an inner product of two vectors (``a @ b``, which keeps the lock) calls
the same routine as ``np.dot``. Large arrays (a matrix of many vectors) should still use
plain numpy: there the release lets other threads run during real work.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["CHUNK", "add_into", "cast", "divide_into", "dot", "set_row", "sub_into", "zeros"]

CHUNK = 256
"""Elements per slice: well under the few hundred above which numpy releases the lock."""

Array = npt.NDArray[Any]


def _flat(a: Array) -> Array:
    """A flat view of ``a`` (which must be C-contiguous, so the view shares its memory)."""
    if not a.flags.c_contiguous:
        raise ValueError("smallvec works on C-contiguous arrays")
    return a.reshape(-1)


def zeros(shape: int | tuple[int, ...], dtype: npt.DTypeLike = np.float64) -> Array:
    """``np.zeros(shape, dtype)``."""
    out = np.empty(shape, dtype=dtype)
    flat = out.reshape(-1)
    for i in range(0, flat.size, CHUNK):
        flat[i : i + CHUNK] = 0
    return out


def cast(a: Array, dtype: npt.DTypeLike) -> Array:
    """``a.astype(dtype)``: always a new C-contiguous array (a copy for the same dtype)."""
    src = np.ascontiguousarray(a)
    out = np.empty(src.shape, dtype=dtype)
    dst = out.reshape(-1)
    flat = src.reshape(-1)
    for i in range(0, flat.size, CHUNK):
        dst[i : i + CHUNK] = flat[i : i + CHUNK]
    return out


def _apply_into(ufunc: np.ufunc, out: Array, a: Array) -> None:
    """``ufunc(out, a, out=out)`` in slices (same shape, ``out`` C-contiguous)."""
    dst, src = _flat(out), np.ascontiguousarray(a).reshape(-1)
    if dst.shape != src.shape:
        raise ValueError(f"shapes differ: {out.shape} and {a.shape}")
    for i in range(0, dst.size, CHUNK):
        part = dst[i : i + CHUNK]
        ufunc(part, src[i : i + CHUNK], out=part)


def add_into(out: Array, a: Array) -> None:
    """``out += a`` (same shape, ``out`` C-contiguous)."""
    _apply_into(np.add, out, a)


def sub_into(out: Array, a: Array) -> None:
    """``out -= a`` (same shape, ``out`` C-contiguous)."""
    _apply_into(np.subtract, out, a)


def divide_into(out: Array, divisor: float) -> None:
    """``out /= divisor`` (``out`` C-contiguous; the divisor a Python float, so it takes
    ``out``'s dtype as in the plain expression)."""
    dst = _flat(out)
    for i in range(0, dst.size, CHUNK):
        part = dst[i : i + CHUNK]
        np.divide(part, divisor, out=part)


def dot(a: Array, b: Array) -> float:
    """``float(np.dot(a, b))`` of two 1-D vectors of one dtype."""
    if a.ndim != 1 or b.ndim != 1:
        raise ValueError("dot takes two 1-D vectors")
    return float(a @ b)


def set_row(mat: Array, r: int, row: Array) -> None:
    """``mat[r] = row`` for a C-contiguous 2-D ``mat``."""
    dst = mat[r]
    src = np.ascontiguousarray(row).reshape(-1)
    if dst.shape != src.shape:
        raise ValueError(f"row of shape {row.shape} does not fit a row of {mat.shape}")
    for i in range(0, dst.size, CHUNK):
        dst[i : i + CHUNK] = src[i : i + CHUNK]
