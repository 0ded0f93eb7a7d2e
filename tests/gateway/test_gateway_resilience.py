"""Retry policy, circuit breaker, token buckets, concurrency cap, cache and accounting."""

from __future__ import annotations

import random
import threading

import pytest
from gwhelpers import SleepRecorder
from hypothesis import given
from hypothesis import strategies as st

from memoryos_actors.clock import ManualClock
from memoryos_actors.gateway.accounting import Accounting, LatencyHistogram
from memoryos_actors.gateway.base import ProviderCallError
from memoryos_actors.gateway.cache import LRUCache, content_key
from memoryos_actors.gateway.resilience import (
    BreakerState,
    CircuitBreaker,
    ConcurrencyLimiter,
    RateLimiter,
    RetryPolicy,
    TokenBucket,
    call_with_retries,
)


def test_backoff_grows_exponentially_within_jitter_and_cap() -> None:
    policy = RetryPolicy(max_retries=5, base_delay=1.0, max_delay=5.0, jitter=0.5)
    rng = random.Random(1)
    for attempt, top in enumerate([1.0, 2.0, 4.0, 5.0, 5.0]):
        d = policy.delay(attempt, rng)
        assert top * 0.5 <= d <= top
    assert policy.delay(0, rng, retry_after=4.0) == 4.0
    assert policy.delay(0, rng, retry_after=99.0) == 5.0  # Retry-After still capped


def test_retries_only_retryable_errors_up_to_the_limit() -> None:
    clock = ManualClock()
    sleep = SleepRecorder(clock)
    calls = []

    def flaky() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise ProviderCallError("boom", retryable=True)
        return "ok"

    assert call_with_retries(flaky, RetryPolicy(3, 0.1), sleep=sleep, rng=random.Random(0)) == "ok"
    assert len(calls) == 3 and len(sleep.calls) == 2

    def fatal() -> str:
        calls.append(1)
        raise ProviderCallError("bad request", retryable=False)

    calls.clear()
    with pytest.raises(ProviderCallError):
        call_with_retries(fatal, RetryPolicy(3, 0.1), sleep=sleep, rng=random.Random(0))
    assert len(calls) == 1

    def always_down() -> str:
        calls.append(1)
        raise ProviderCallError("down", retryable=True)

    calls.clear()
    with pytest.raises(ProviderCallError):
        call_with_retries(always_down, RetryPolicy(2, 0.1), sleep=sleep, rng=random.Random(0))
    assert len(calls) == 3  # the first try plus two retries


def test_breaker_opens_at_threshold_then_half_opens_and_closes_on_success() -> None:
    clock = ManualClock()
    br = CircuitBreaker(failure_threshold=3, reset_seconds=10.0, clock=clock)
    for _ in range(2):
        assert br.allow()
        br.record_failure()
    assert br.state is BreakerState.CLOSED
    br.record_failure()
    assert br.state is BreakerState.OPEN and not br.allow()
    clock.advance(9.9)
    assert not br.allow()
    clock.advance(0.1)
    assert br.state is BreakerState.HALF_OPEN
    assert br.allow()  # the probe
    assert not br.allow()  # only one probe at a time
    br.record_success()
    assert br.state is BreakerState.CLOSED and br.allow()


def test_failed_probe_reopens_the_breaker_for_another_period() -> None:
    clock = ManualClock()
    br = CircuitBreaker(failure_threshold=1, reset_seconds=5.0, clock=clock)
    br.record_failure()
    clock.advance(5.0)
    assert br.allow()
    br.record_failure()
    assert br.state is BreakerState.OPEN and br.times_opened == 2
    clock.advance(4.0)
    assert not br.allow()


def test_success_resets_the_consecutive_failure_count() -> None:
    br = CircuitBreaker(failure_threshold=2, reset_seconds=5.0, clock=ManualClock())
    br.record_failure()
    br.record_success()
    br.record_failure()
    assert br.state is BreakerState.CLOSED


def test_token_bucket_allows_a_burst_then_paces_to_the_rate() -> None:
    clock = ManualClock()
    sleep = SleepRecorder(clock)
    bucket = TokenBucket(120, capacity=2, clock=clock, sleep=sleep)  # 2 per second
    assert bucket.acquire() == 0.0 and bucket.acquire() == 0.0
    waited = [bucket.acquire() for _ in range(4)]
    assert waited == pytest.approx([0.5] * 4)
    assert bucket.waits == 4 and clock.now() == pytest.approx(2.0)


def test_rate_limiter_charges_tokens_and_settles_actual_usage() -> None:
    clock = ManualClock()
    sleep = SleepRecorder(clock)
    rl = RateLimiter(None, 600, clock=clock, sleep=sleep)  # 10 tokens per second, burst 600
    assert rl.acquire(500) == 0.0
    rl.settle(500, 700)  # 200 more than estimated: balance -100
    assert rl.acquire(100) == pytest.approx(20.0)
    assert rl.stats()["tokens_waits"] == 1


def test_concurrency_limiter_caps_calls_in_flight() -> None:
    lim = ConcurrencyLimiter(2)
    inside = threading.Barrier(2)
    release = threading.Event()

    def work() -> None:
        with lim:
            inside.wait(5)
            release.wait(5)

    threads = [threading.Thread(target=work) for _ in range(2)]
    for t in threads:
        t.start()
    third_got_in = threading.Event()

    def third() -> None:
        with lim:
            third_got_in.set()

    t3 = threading.Thread(target=third)
    t3.start()
    assert not third_got_in.wait(0.1)
    release.set()
    for t in (*threads, t3):
        t.join(5)
    assert third_got_in.is_set() and lim.peak == 2 and lim.in_flight == 0


def test_lru_cache_evicts_least_recently_used_and_counts_hits() -> None:
    cache: LRUCache[int] = LRUCache(2)
    cache.put("a", 1)
    cache.put("b", 2)
    assert cache.get("a") == 1  # a is now most recent
    cache.put("c", 3)
    assert cache.get("b") is None and cache.get("a") == 1 and cache.get("c") == 3
    assert cache.stats() == {"hits": 3, "misses": 1, "size": 2, "maxsize": 2}
    off: LRUCache[int] = LRUCache(0)
    off.put("a", 1)
    assert off.get("a") is None


def test_content_key_ignores_dict_order_and_separates_content() -> None:
    assert content_key("k", {"a": 1, "b": 2}) == content_key("k", {"b": 2, "a": 1})
    assert content_key("k", {"a": 1}) != content_key("k", {"a": 2})


def test_latency_percentiles_are_within_a_bucket_of_truth() -> None:
    h = LatencyHistogram()
    for ms in range(1, 101):
        h.record(ms / 1000)
    assert h.percentile(50) == pytest.approx(0.050, rel=0.11)
    assert h.percentile(99) == pytest.approx(0.099, rel=0.11)
    assert h.percentile(100) == pytest.approx(0.100)


def test_accounting_splits_usage_by_kind_and_user() -> None:
    acct = Accounting()
    acct.record_call(
        "page_meta",
        "u1",
        backend="b",
        latency_s=0.01,
        prompt_tokens=10,
        completion_tokens=5,
        cost_usd=0.001,
    )
    acct.record_call("chat_reply", "u2", backend="b", latency_s=0.02, degraded=True)
    acct.record_cache_hit("page_meta", "u1")
    acct.record_embed_batch(3, 0.001, True)
    acct.record_embed_batch(5, 0.001, True)
    snap = acct.snapshot()
    assert snap["calls"] == 2 and snap["degraded"] == 1 and snap["cache_hits"] == 1
    assert snap["by_kind"]["page_meta"]["prompt_tokens"] == 10
    assert snap["by_user"]["u1"]["cost_usd"] == pytest.approx(0.001)
    assert snap["by_user"]["u2"]["degraded"] == 1
    assert (
        snap["embeddings"]["batch_size_mean"] == 4.0 and snap["embeddings"]["batch_size_max"] == 5
    )


@given(
    capacity=st.integers(1, 50),
    per_minute=st.integers(1, 6000),
    sizes=st.lists(st.integers(1, 20), min_size=1, max_size=40),
)
def test_token_bucket_reservations_queue_in_arrival_order_and_keep_the_rate(
    capacity: int, per_minute: int, sizes: list[int]
) -> None:
    clock = ManualClock()
    bucket = TokenBucket(per_minute, capacity=capacity, clock=clock)
    rate = per_minute / 60.0
    taken = 0.0
    last_wait = 0.0
    for n in sizes:  # all reserved at the same instant
        wait = bucket.reserve(n)
        taken += n
        # The caller may use its tokens once the refill has covered everything reserved so
        # far beyond the burst (a request bigger than the burst waits for the burst only).
        assert wait == pytest.approx(max(0.0, (taken - n + min(n, capacity) - capacity) / rate))
        assert wait >= last_wait - 1e-9
        last_wait = wait


def test_async_limiter_reports_in_flight_peak_and_waiting() -> None:
    import asyncio

    from memoryos_actors.gateway.resilience import AsyncConcurrencyLimiter

    lim = AsyncConcurrencyLimiter(2)
    seen: list[tuple[int, int]] = []

    async def one(gate: asyncio.Event) -> None:
        async with lim.slot("u"):
            seen.append((lim.in_flight, lim.waiting))
            await gate.wait()

    async def main() -> None:
        gate = asyncio.Event()
        tasks = [asyncio.create_task(one(gate)) for _ in range(5)]
        for _ in range(5):
            await asyncio.sleep(0)
        assert lim.in_flight == 2 and lim.waiting == 3
        gate.set()
        await asyncio.gather(*tasks)

    asyncio.run(main())
    assert lim.peak == 2 and lim.in_flight == 0 and lim.waiting == 0
    assert max(n for n, _ in seen) == 2


def test_async_limiter_serves_a_quiet_user_before_a_flooding_one() -> None:
    # One slot; a flooding user has kept it busy and queued 5 more calls; a quiet user's
    # call, queued last, gets the slot next; a cancelled waiter gives its place up.
    import asyncio

    from memoryos_actors.gateway.resilience import AsyncConcurrencyLimiter

    lim = AsyncConcurrencyLimiter(1)
    order: list[str] = []

    async def call(user: str, name: str, hold: float) -> None:
        async with lim.slot(user):
            order.append(name)
            await asyncio.sleep(hold)

    async def main() -> None:
        await call("flood", "warm", 0.05)  # the flood has used the provider already
        first = asyncio.create_task(call("flood", "f0", 0.05))
        await asyncio.sleep(0)
        tasks = [asyncio.create_task(call("flood", f"f{i}", 0.0)) for i in range(1, 6)]
        doomed = asyncio.create_task(call("other", "cancelled", 0.0))
        tasks.append(asyncio.create_task(call("quiet", "quiet", 0.0)))
        for _ in range(3):
            await asyncio.sleep(0)
        assert lim.waiting == 7
        doomed.cancel()
        await asyncio.gather(first, *tasks)
        assert doomed.cancelled()

    asyncio.run(main())
    assert order[:3] == ["warm", "f0", "quiet"], order
    assert sorted(order[3:]) == [f"f{i}" for i in range(1, 6)]
    assert lim.in_flight == 0 and lim.waiting == 0
