from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import keyword_sets, unit_vectors

from memoryos_actors.scoring import cosine, f_score, heat, jaccard, recency


def test_cosine_of_same_orthogonal_and_opposite_vectors() -> None:
    a = np.array([3.0, 4.0])
    assert cosine(a, a) == pytest.approx(1.0)
    assert cosine(a, np.array([-4.0, 3.0])) == pytest.approx(0.0)
    assert cosine(a, -a) == pytest.approx(-1.0)


def test_cosine_ignores_length_and_is_zero_for_a_zero_vector() -> None:
    assert cosine([1.0, 1.0], [10.0, 10.0]) == pytest.approx(1.0)
    assert cosine([0.0, 0.0], [1.0, 0.0]) == 0.0


def test_cosine_of_vectors_of_different_lengths_is_an_error() -> None:
    with pytest.raises(ValueError):
        cosine([1.0, 0.0], [1.0, 0.0, 0.0])


def test_jaccard_hand_computed_and_empty_sets_score_zero() -> None:
    assert jaccard(frozenset("abc"), frozenset("bcd")) == pytest.approx(2 / 4)
    assert jaccard(frozenset("ab"), frozenset("ab")) == 1.0
    assert jaccard(frozenset(), frozenset()) == 0.0
    assert jaccard(frozenset("a"), frozenset()) == 0.0


def test_f_score_is_cosine_plus_jaccard() -> None:
    # cos([1,0], [0.6,0.8]) = 0.6; Jaccard({a,b},{b,c}) = 1/3
    value = f_score(
        np.array([1.0, 0.0]), np.array([0.6, 0.8]), frozenset({"a", "b"}), frozenset({"b", "c"})
    )
    assert value == pytest.approx(0.6 + 1 / 3)


def test_recency_decays_exponentially_with_mu() -> None:
    assert recency(0.0, 10.0) == 1.0
    assert recency(10.0, 10.0) == pytest.approx(math.exp(-1))
    assert recency(30.0, 10.0) == pytest.approx(math.exp(-3))
    # A clock that went backwards must not make recency exceed 1.
    assert recency(-5.0, 10.0) == 1.0
    with pytest.raises(ValueError):
        recency(1.0, 0.0)


def test_heat_hand_computed() -> None:
    # alpha*N + beta*L + gamma*exp(-dt/mu) = 2*4 + 0.5*6 + 3*exp(-1)
    value = heat(
        n_visit=4,
        l_interaction=6,
        last_access=100.0,
        now=150.0,
        alpha=2.0,
        beta=0.5,
        gamma=3.0,
        mu=50.0,
    )
    assert value == pytest.approx(8.0 + 3.0 + 3.0 * math.exp(-1))


def test_heat_with_paper_defaults_for_a_fresh_one_page_segment_is_two() -> None:
    assert heat(0, 1, 10.0, 10.0, 1.0, 1.0, 1.0, 1e7) == 2.0


@settings(max_examples=60)
@given(unit_vectors(6), unit_vectors(6))
def test_cosine_is_symmetric_and_within_minus_one_and_one(a: np.ndarray, b: np.ndarray) -> None:
    c = cosine(a, b)
    assert -1.0 <= c <= 1.0
    assert c == pytest.approx(cosine(b, a))


@settings(max_examples=60)
@given(keyword_sets, keyword_sets)
def test_jaccard_is_symmetric_bounded_and_one_only_for_equal_sets(a, b) -> None:
    j = jaccard(a, b)
    assert 0.0 <= j <= 1.0 and j == jaccard(b, a)
    assert (j == 1.0) == (a == b and bool(a))


@settings(max_examples=60)
@given(st.floats(0, 1e9), st.floats(0, 1e9), st.floats(1e-3, 1e9))
def test_recency_is_in_zero_one_and_never_increases_with_age(dt1, dt2, mu) -> None:
    r1, r2 = recency(dt1, mu), recency(dt2, mu)
    assert 0.0 <= r1 <= 1.0
    if dt1 <= dt2:
        assert r1 >= r2
