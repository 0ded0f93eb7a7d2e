"""Per-key request limits: token-bucket properties."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from memoryos_actors.server.ratelimit import RateLimiter, TokenBucket

rates = st.floats(min_value=0.01, max_value=1000.0, allow_nan=False)
bursts = st.integers(min_value=1, max_value=50)
gaps = st.lists(st.floats(min_value=0.0, max_value=5.0, allow_nan=False), max_size=200)


@given(rates, bursts, gaps)
def test_allowed_requests_never_exceed_burst_plus_rate_times_elapsed(
    rate: float,
    burst: int,
    steps: list[float],
) -> None:
    bucket = TokenBucket.full(rate, burst, 0.0)
    now, allowed = 0.0, 0
    for gap in steps:
        now += gap
        if bucket.take(now) == 0.0:
            allowed += 1
        assert allowed <= burst + rate * now + 1e-6


@given(rates, bursts, gaps)
def test_a_refused_request_is_allowed_once_its_wait_has_passed(
    rate: float,
    burst: int,
    steps: list[float],
) -> None:
    bucket = TokenBucket.full(rate, burst, 0.0)
    now = 0.0
    for gap in steps:
        now += gap
        wait = bucket.take(now)
        if wait > 0.0:
            assert bucket.take(now + wait * (1 + 1e-9) + 1e-9) == 0.0
            now += wait * (1 + 1e-9) + 1e-9


@given(rates, bursts)
def test_a_full_bucket_allows_exactly_burst_requests_at_once(rate: float, burst: int) -> None:
    bucket = TokenBucket.full(rate, burst, 10.0)
    results = [bucket.take(10.0) for _ in range(burst + 1)]
    assert results[:burst] == [0.0] * burst and results[burst] > 0.0


@given(rates, bursts, st.floats(min_value=0.0, max_value=100.0))
def test_time_going_backwards_adds_no_tokens(rate: float, burst: int, back: float) -> None:
    bucket = TokenBucket.full(rate, burst, 100.0)
    for _ in range(burst):
        bucket.take(100.0)
    assert bucket.take(100.0 - back) > 0.0


def test_limiter_answers_retry_after_in_whole_seconds_per_key() -> None:
    lim = RateLimiter(default_rate=0.5, default_burst=2)
    assert [lim.check("a", 0.0) for _ in range(3)] == [0, 0, 2]
    assert lim.check("b", 0.0) == 0  # keys do not share a bucket
    assert lim.check("a", 2.0) == 0
    assert lim.check("c", 0.0, rate=100.0, burst=1) == 0
    assert lim.check("c", 0.0, rate=100.0, burst=1) == math.ceil(1 / 100.0)
