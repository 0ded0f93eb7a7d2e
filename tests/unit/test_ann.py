"""The ANN wrapper: vectors kept as rows of one matrix, exact dots, stable labels."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memoryos_actors.tiers import _ann
from memoryos_actors.tiers._ann import AnnIndex

DIM = 8


@pytest.fixture
def small_graph_threshold(monkeypatch: pytest.MonkeyPatch) -> None:
    """Build the hnswlib graph past 64 vectors (not 2,048), so tests reach it cheaply."""
    monkeypatch.setattr(_ann, "_BUILD_AT", 64)


def _unit(seed: int) -> np.ndarray:
    v = np.random.default_rng(seed).standard_normal(DIM).astype(np.float32)
    return v / np.linalg.norm(v)


# An operation: (label, seed) upserts label with the vector of seed; (label, None) removes.
_ops = st.lists(
    st.tuples(st.integers(0, 90), st.one_of(st.none(), st.integers(0, 10_000))), max_size=220
)


@pytest.mark.usefixtures("small_graph_threshold")
@settings(max_examples=40, deadline=None)
@given(ops=_ops, query_seed=st.integers(0, 10_000))
def test_dots_and_vectors_match_a_plain_dict_after_any_upserts_and_removals(
    ops: list[tuple[int, int | None]], query_seed: int
) -> None:
    index = AnnIndex(DIM, seed=1)
    expected: dict[int, np.ndarray] = {}
    for label, seed in ops:  # past 64 live vectors the hnswlib graph is built too
        if seed is None:
            index.remove(label)
            expected.pop(label, None)
        else:
            index.upsert(label, _unit(seed))
            expected[label] = _unit(seed)
    assert len(index) == len(expected)
    assert sorted(index.candidates(_unit(query_seed), len(expected) + 1)) == sorted(expected)
    labels = sorted(expected)
    q = _unit(query_seed)
    want = np.array([float(expected[x].astype(np.float64) @ q.astype(np.float64)) for x in labels])
    got = index.dots(q, labels)
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, want.reshape(got.shape), rtol=1e-12, atol=1e-12)
    for x in labels:
        np.testing.assert_array_equal(index.vector(x), expected[x])
    # A restored index holds the same vectors under the same labels.
    again = AnnIndex(DIM, seed=1)
    again.restore({x: index.vector(x) for x in labels}, index.graph_bytes())
    np.testing.assert_array_equal(again.dots(q, labels), got)


def test_a_vector_handed_out_is_a_copy() -> None:
    index = AnnIndex(DIM, seed=1)
    index.upsert(1, _unit(1))
    v = index.vector(1)
    v[:] = 0.0
    np.testing.assert_array_equal(index.vector(1), _unit(1))
    index.remove(1)
    index.upsert(2, _unit(2))  # reuses the removed label's row
    np.testing.assert_array_equal(index.vector(2), _unit(2))
    assert index.dots(_unit(3), []).shape == (0,)


@pytest.mark.usefixtures("small_graph_threshold")
def test_the_graph_sees_a_changed_vector_before_it_is_searched_or_saved() -> None:
    # Past 64 vectors the graph is built; a label whose vector then changes many times is
    # given to the graph once, before the next search or save, with its current vector.
    index = AnnIndex(DIM, seed=1)
    for label in range(80):
        index.upsert(label, _unit(label))
    target = _unit(99_999)
    for step in range(10):
        index.upsert(7, _unit(50_000 + step))
    index.upsert(7, target)
    assert 7 in index.candidates(target, 1)  # the nearest to its own current vector
    index.upsert(8, target)
    saved = index.graph_bytes()
    again = AnnIndex(DIM, seed=1)
    again.restore({x: index.vector(x) for x in range(80)}, saved)
    assert set(again.candidates(target, 2)) == {7, 8}
    index.upsert(9, target)
    index.remove(9)  # a changed label removed before the graph saw it: gone, no error
    assert 9 not in index.candidates(target, 3)


@settings(max_examples=30, deadline=None)
@given(
    n=st.integers(65, 400),
    k=st.integers(1, 64),
    removed=st.sets(st.integers(0, 399), max_size=40),
    query_seed=st.integers(0, 10_000),
)
def test_without_a_graph_candidates_are_the_exact_nearest(
    n: int, k: int, removed: set[int], query_seed: int
) -> None:
    # Below the graph threshold a search is exact: the k largest inner products, after any
    # removals (whose rows are reused), never every label once there are more than 64.
    index = AnnIndex(DIM, seed=1)
    for label in range(n):
        index.upsert(label, _unit(label))
    for label in removed:
        index.remove(label)
    live = [x for x in range(n) if x not in removed]
    q = _unit(query_seed)
    got = index.candidates(q, k)
    assert index.graph_bytes() is None
    if k >= len(live) or len(live) <= 64:
        assert sorted(got) == live
        return
    scores = {x: float(_unit(x) @ q) for x in live}
    kth = sorted(scores.values(), reverse=True)[k - 1]
    assert len(got) == k == len(set(got))
    assert all(scores[x] >= kth - 1e-6 for x in got)


def test_a_small_index_holds_no_graph_and_drops_one_saved_by_an_older_version() -> None:
    # An hnswlib index costs ~2.6 MB however small: none is made below the threshold, and
    # a graph saved for a small index (older versions built one past 64 vectors) is not
    # loaded again; the search stays exact.
    older = AnnIndex(DIM, seed=1)
    for label in range(100):
        older.upsert(label, _unit(label))
    assert older.graph_bytes() is None
    vectors = {x: _unit(x) for x in range(100)}
    built = AnnIndex(DIM, seed=1)
    built.restore(vectors, None)
    big = AnnIndex(DIM, seed=1)
    for label in range(_ann._BUILD_AT + 1):
        big.upsert(label, _unit(label))
    assert big.graph_bytes() is not None  # past the threshold the graph is there
    saved = big.graph_bytes()
    again = AnnIndex(DIM, seed=1)
    again.restore(vectors, saved)
    assert again.graph_bytes() is None
    q = _unit(12_345)
    best = max(range(100), key=lambda x: float(_unit(x) @ q))
    assert best in again.candidates(q, 1)


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(0, 39), min_size=1, max_size=12), st.integers(0, 10_000))
def test_dots_gives_the_same_bits_for_few_rows_and_many(labels: list[int], qseed: int) -> None:
    # Few rows are gathered without numpy's lock-releasing loops, many with them: both are
    # the float64 product of the gathered rows, bit for bit.
    index = AnnIndex(DIM, seed=1)
    for x in range(40):
        index.upsert(x, _unit(x))
    q = _unit(qseed)
    mat = np.stack([_unit(x) for x in labels]).astype(np.float64)
    want = mat @ q.astype(np.float64)
    assert index.dots(q, labels).tobytes() == want.tobytes()
