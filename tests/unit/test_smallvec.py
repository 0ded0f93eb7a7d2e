"""smallvec: the same bits as plain numpy, without letting go of the interpreter lock."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from lock_watch import lock_watcher

from memoryos_actors import smallvec as sv

DIM = 512  # the default embedding length, above numpy's threshold for letting go


def _vectors(dtype: type[np.floating], size: st.SearchStrategy[int]) -> st.SearchStrategy:
    return size.flatmap(
        lambda n: arrays(dtype, n, elements=st.floats(-1e6, 1e6, allow_nan=False, width=32))
    )


sizes = st.integers(0, 3 * sv.CHUNK + 7)


@settings(max_examples=60, deadline=None)
@given(_vectors(np.float32, sizes))
def test_cast_is_astype_bit_for_bit(a: np.ndarray) -> None:
    for dtype in (np.float64, np.float32):
        got = sv.cast(a, dtype)
        want = a.astype(dtype)
        assert got.dtype == want.dtype and got.tobytes() == want.tobytes()
        assert got is not a and got.flags.c_contiguous


@settings(max_examples=60, deadline=None)
@given(
    sizes.flatmap(
        lambda n: st.tuples(*[arrays(np.float32, n, elements=st.floats(-1e6, 1e6, width=32))] * 2)
    )
)
def test_add_sub_into_are_the_inplace_operators(pair: tuple[np.ndarray, np.ndarray]) -> None:
    a, b = pair
    total = a.astype(np.float64)
    want_add = total.copy()
    want_add += b
    got = total.copy()
    sv.add_into(got, b)
    assert got.tobytes() == want_add.tobytes()
    want_sub = want_add.copy()
    want_sub -= a
    sv.sub_into(got, a)
    assert got.tobytes() == want_sub.tobytes()


@settings(max_examples=60, deadline=None)
@given(
    _vectors(np.float32, sizes),
    st.floats(1e-6, 1e6, allow_nan=False),
)
def test_divide_into_is_division_by_a_python_float(a: np.ndarray, d: float) -> None:
    for arr in (a, a.astype(np.float64)):
        got = arr.copy()
        sv.divide_into(got, d)
        want = arr / d
        assert got.dtype == want.dtype and got.tobytes() == want.tobytes()


@settings(max_examples=60, deadline=None)
@given(
    sizes.flatmap(lambda n: st.tuples(*[arrays(np.float64, n, elements=st.floats(-1e3, 1e3))] * 2))
)
def test_dot_is_np_dot(pair: tuple[np.ndarray, np.ndarray]) -> None:
    a, b = pair
    assert sv.dot(a, b) == float(np.dot(a, b))
    a32, b32 = a.astype(np.float32), b.astype(np.float32)
    assert sv.dot(a32, b32) == float(np.dot(a32, b32))


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 4), st.integers(0, 3 * sv.CHUNK + 7))
def test_zeros_and_set_row(rows: int, n: int) -> None:
    z = sv.zeros((rows, n), np.float32)
    assert z.dtype == np.float32 and z.shape == (rows, n) and not z.any()
    assert sv.zeros(n).tobytes() == np.zeros(n).tobytes()
    if rows:
        row = np.arange(n, dtype=np.float64) / 7
        sv.set_row(z, rows - 1, row)
        want = np.zeros((rows, n), np.float32)
        want[rows - 1] = row
        assert z.tobytes() == want.tobytes()


def test_shape_mismatches_and_strided_targets_are_refused() -> None:
    with pytest.raises(ValueError):
        sv.add_into(np.zeros(4), np.zeros(5))
    with pytest.raises(ValueError):
        sv.sub_into(np.zeros(4), np.zeros(3))
    with pytest.raises(ValueError):
        sv.divide_into(np.zeros((4, 4))[:, 0], 2.0)
    with pytest.raises(ValueError):
        sv.set_row(np.zeros((2, 4)), 0, np.zeros(5))
    with pytest.raises(ValueError):
        sv.dot(np.zeros((2, 2)), np.zeros(2))


# -- the interpreter lock ---------------------------------------------------------------


@pytest.fixture
def waiting_thread() -> Iterator[Callable[[Callable[[], object], int], int]]:
    """A function that runs an operation a number of times and says how often a thread
    waiting for the interpreter lock ran meanwhile (see ``tests/lock_watch.py``)."""
    with lock_watcher() as watcher:
        time.sleep(0.01)

        def runs_beside(op: Callable[[], object], reps: int) -> int:
            before = watcher.runs
            for _ in range(reps):
                op()
            return watcher.runs - before

        yield runs_beside


def test_the_helpers_keep_the_lock_where_plain_numpy_lets_go(
    waiting_thread: Callable[[Callable[[], object], int], int],
) -> None:
    rng = np.random.default_rng(1)
    a = rng.random(DIM).astype(np.float32)
    b = rng.random(DIM)
    mat = np.zeros((8, DIM), np.float32)
    helpers: dict[str, Callable[[], object]] = {
        "zeros": lambda: sv.zeros(DIM),
        "cast": lambda: sv.cast(a, np.float64),
        "add_into": lambda: sv.add_into(b, a),
        "sub_into": lambda: sv.sub_into(b, a),
        "divide_into": lambda: sv.divide_into(b, 1.0),
        "dot": lambda: sv.dot(b, b),
        "set_row": lambda: sv.set_row(mat, 3, a),
    }
    for name, op in helpers.items():
        assert waiting_thread(op, 2000) == 0, name
    # The check can fail: the same operations in plain numpy let the thread run.
    plain: dict[str, Callable[[], object]] = {
        "np.zeros": lambda: np.zeros(DIM),
        "astype": lambda: a.astype(np.float64),
        "+=": lambda: b.__iadd__(a),
        "np.dot": lambda: np.dot(b, b),
        "row set": lambda: mat.__setitem__(3, a),
    }
    # (Whether the waiting thread wins the lock in the moment numpy lets go is a race,
    # so each is tried until it does, up to a generous bound.)
    for name, op in plain.items():
        assert any(waiting_thread(op, 2000) for _ in range(100)), name
