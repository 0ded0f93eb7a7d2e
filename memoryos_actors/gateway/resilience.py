"""Resilience building blocks: retry with backoff, circuit breaker, rate and concurrency limits.

All time comes from an injected clock (``now() -> float`` seconds) and all waiting from an
injected ``sleep(seconds)``, so tests drive them without real delays. Randomness (jitter)
comes from a seeded :class:`random.Random`.
"""

from __future__ import annotations

import asyncio
import enum
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, Self, TypeVar

from memoryos_actors.fairness import FairQueue
from memoryos_actors.gateway.base import ProviderCallError

__all__ = [
    "BreakerState",
    "CircuitBreaker",
    "ClockLike",
    "AsyncConcurrencyLimiter",
    "ConcurrencyLimiter",
    "MonotonicClock",
    "RateLimiter",
    "RetryPolicy",
    "TokenBucket",
    "call_with_retries",
]

T = TypeVar("T")


class ClockLike(Protocol):
    """Anything with ``now() -> float`` (seconds)."""

    def now(self) -> float:
        """Current time in seconds."""
        ...


class MonotonicClock:
    """The default clock for intervals: :func:`time.monotonic`, in seconds."""

    def now(self) -> float:
        """Monotonic seconds (arbitrary origin)."""
        return time.monotonic()


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Exponential backoff with full jitter.

    Attempt ``k`` (0-based) waits ``uniform(base * 2**k * (1 - jitter), base * 2**k)``
    seconds, capped at ``max_delay``. ``max_retries`` is the number of retries after the
    first try. A provider's ``Retry-After`` overrides the backoff when longer (still capped
    by ``max_delay``).
    """

    max_retries: int = 3
    base_delay: float = 0.5
    max_delay: float = 30.0
    jitter: float = 0.5

    def delay(self, attempt: int, rng: random.Random, retry_after: float | None = None) -> float:
        """Seconds to wait before retry number ``attempt + 1``."""
        top = min(self.max_delay, self.base_delay * (2.0**attempt))
        d = top * (1.0 - self.jitter * rng.random())
        if retry_after is not None and retry_after > d:
            d = retry_after
        return max(0.0, min(self.max_delay, d))


def call_with_retries(
    fn: Callable[[], T],
    policy: RetryPolicy,
    *,
    sleep: Callable[[float], None],
    rng: random.Random,
    before_attempt: Callable[[], None] | None = None,
    on_failure: Callable[[ProviderCallError], None] | None = None,
) -> T:
    """Call ``fn`` until it succeeds, retrying retryable :class:`ProviderCallError` s.

    ``before_attempt`` runs before every try and may raise to stop early (the circuit
    breaker uses this to give up when it opens mid-way); ``on_failure`` sees every failed
    try. A non-retryable error, or the last retryable one, is re-raised.
    """
    attempt = 0
    while True:
        if before_attempt is not None:
            before_attempt()
        try:
            return fn()
        except ProviderCallError as exc:
            if on_failure is not None:
                on_failure(exc)
            if not exc.retryable or attempt >= policy.max_retries:
                raise
            sleep(policy.delay(attempt, rng, exc.retry_after))
            attempt += 1


class BreakerState(enum.Enum):
    """Circuit breaker states."""

    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"


class CircuitBreaker:
    """Per-backend circuit breaker.

    ``failure_threshold`` consecutive failures open it; after ``reset_seconds`` it becomes
    half-open and lets exactly one probe call through at a time. The probe's success closes
    it; its failure re-opens it for another ``reset_seconds``. Thread-safe.
    """

    def __init__(
        self,
        failure_threshold: int = 5,
        reset_seconds: float = 30.0,
        clock: ClockLike | None = None,
    ) -> None:
        if failure_threshold < 1:
            raise ValueError("failure_threshold must be >= 1")
        self.failure_threshold = failure_threshold
        self.reset_seconds = float(reset_seconds)
        self._clock = clock or MonotonicClock()
        self._lock = threading.Lock()
        self._state = BreakerState.CLOSED
        self._failures = 0
        self._opened_at = 0.0
        self._probe_in_flight = False
        self.times_opened = 0

    @property
    def state(self) -> BreakerState:
        """Current state; an open breaker past ``reset_seconds`` reports half-open."""
        with self._lock:
            self._refresh()
            return self._state

    def _refresh(self) -> None:
        if (
            self._state is BreakerState.OPEN
            and self._clock.now() - self._opened_at >= self.reset_seconds
        ):
            self._state = BreakerState.HALF_OPEN
            self._probe_in_flight = False

    def allow(self) -> bool:
        """True when a call may go to the provider now (claims the probe when half-open)."""
        with self._lock:
            self._refresh()
            if self._state is BreakerState.CLOSED:
                return True
            if self._state is BreakerState.HALF_OPEN and not self._probe_in_flight:
                self._probe_in_flight = True
                return True
            return False

    def record_success(self) -> None:
        """A call succeeded: close the breaker and forget past failures."""
        with self._lock:
            self._state = BreakerState.CLOSED
            self._failures = 0
            self._probe_in_flight = False

    def record_failure(self) -> None:
        """A call failed: count it, opening the breaker at the threshold or on a failed probe."""
        with self._lock:
            self._failures += 1
            if self._state is BreakerState.HALF_OPEN or (
                self._state is BreakerState.CLOSED and self._failures >= self.failure_threshold
            ):
                self._state = BreakerState.OPEN
                self._opened_at = self._clock.now()
                self._probe_in_flight = False
                self.times_opened += 1


class TokenBucket:
    """A token bucket refilled at ``rate_per_minute``, holding at most ``capacity`` tokens.

    :meth:`acquire` takes ``n`` tokens, sleeping (via the injected ``sleep``) until they are
    there; a request for more than ``capacity`` is allowed to drive the balance negative so
    huge prompts are slowed, not refused. :meth:`debit` charges tokens after the fact (e.g.
    completion tokens only known once the answer arrives). Thread-safe.
    """

    def __init__(
        self,
        rate_per_minute: float,
        *,
        capacity: float | None = None,
        clock: ClockLike | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if rate_per_minute <= 0:
            raise ValueError("rate_per_minute must be > 0")
        self.rate = rate_per_minute / 60.0  # tokens per second
        self.capacity = float(capacity if capacity is not None else rate_per_minute)
        self._clock = clock or MonotonicClock()
        self._sleep = sleep
        self._lock = threading.Lock()
        self._tokens = self.capacity
        self._stamp = self._clock.now()
        self.waits = 0
        self.waited_seconds = 0.0

    def _refill(self) -> None:
        now = self._clock.now()
        self._tokens = min(self.capacity, self._tokens + (now - self._stamp) * self.rate)
        self._stamp = now

    def acquire(self, n: float = 1.0) -> float:
        """Take ``n`` tokens, waiting as needed; returns the seconds waited."""
        need = min(float(n), self.capacity)
        waited = 0.0
        while True:
            with self._lock:
                self._refill()
                if self._tokens >= need:
                    self._tokens -= float(n)
                    if waited:
                        self.waits += 1
                        self.waited_seconds += waited
                    return waited
                wait = (need - self._tokens) / self.rate
            self._sleep(wait)
            waited += wait

    def reserve(self, n: float = 1.0) -> float:
        """Take ``n`` tokens now and return the seconds the caller must wait before using them.

        The non-blocking form of :meth:`acquire` for callers that wait on their own (an
        event loop): the balance may go negative, so later callers queue behind this one in
        arrival order and the long-run rate still holds.
        """
        need = min(float(n), self.capacity)
        with self._lock:
            self._refill()
            wait = max(0.0, (need - self._tokens) / self.rate)
            self._tokens -= float(n)
            if wait > 0:
                self.waits += 1
                self.waited_seconds += wait
            return wait

    def debit(self, n: float) -> None:
        """Charge ``n`` extra tokens without waiting (the balance may go negative)."""
        with self._lock:
            self._refill()
            self._tokens -= float(n)


class RateLimiter:
    """Requests-per-minute and tokens-per-minute buckets together; either may be None."""

    def __init__(
        self,
        requests_per_minute: float | None,
        tokens_per_minute: float | None,
        *,
        clock: ClockLike | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.requests = (
            TokenBucket(requests_per_minute, clock=clock, sleep=sleep)
            if requests_per_minute
            else None
        )
        self.tokens = (
            TokenBucket(tokens_per_minute, clock=clock, sleep=sleep) if tokens_per_minute else None
        )

    def acquire(self, estimated_tokens: int) -> float:
        """Wait for one request slot and ``estimated_tokens``; returns seconds waited."""
        waited = 0.0
        if self.requests is not None:
            waited += self.requests.acquire(1)
        if self.tokens is not None:
            waited += self.tokens.acquire(max(1, estimated_tokens))
        return waited

    def reserve(self, estimated_tokens: int) -> float:
        """Take one request slot and ``estimated_tokens`` now; return the seconds to wait.

        See :meth:`TokenBucket.reserve`: for callers that wait without blocking a thread.
        """
        wait = 0.0
        if self.requests is not None:
            wait = max(wait, self.requests.reserve(1))
        if self.tokens is not None:
            wait = max(wait, self.tokens.reserve(max(1, estimated_tokens)))
        return wait

    def settle(self, estimated_tokens: int, actual_tokens: int) -> None:
        """Correct the token bucket once the provider reports the real usage."""
        if self.tokens is not None and actual_tokens > estimated_tokens:
            self.tokens.debit(actual_tokens - estimated_tokens)

    def stats(self) -> dict[str, float]:
        """Waits and seconds waited so far, per bucket."""
        out: dict[str, float] = {}
        for label, bucket in (("requests", self.requests), ("tokens", self.tokens)):
            if bucket is not None:
                out[f"{label}_waits"] = bucket.waits
                out[f"{label}_waited_seconds"] = round(bucket.waited_seconds, 6)
        return out


class ConcurrencyLimiter:
    """At most ``limit`` calls in flight at once (a semaphore that reports its use)."""

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError("concurrency limit must be >= 1")
        self.limit = limit
        self._sem = threading.BoundedSemaphore(limit)
        self._lock = threading.Lock()
        self.in_flight = 0
        self.peak = 0

    def __enter__(self) -> Self:
        self._sem.acquire()
        with self._lock:
            self.in_flight += 1
            self.peak = max(self.peak, self.in_flight)
        return self

    def __exit__(self, *exc: object) -> None:
        with self._lock:
            self.in_flight -= 1
        self._sem.release()


class AsyncConcurrencyLimiter:
    """At most ``limit`` provider calls in flight on one event loop, shared fairly between
    users, with usage figures.

    Slots are granted in start-time fair queueing order by user
    (:class:`~memoryos_actors.fairness.FairQueue`, a call's cost being the seconds it held
    its slot): a user whose calls have kept the provider busy waits behind a user that
    asked for nothing lately, so a quiet user's call is not queued behind a flood of other
    users' calls. An ``urgent`` call (a page's chain meta: its placement waits for it) goes
    ahead of the same user's other waiting calls (summaries, persona updates), within that
    user's share. Used only from its event loop's thread. ``waiting`` counts calls queued
    for a slot: the gateway's backlog in front of the provider, observable in ``stats()``.
    """

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError("concurrency limit must be >= 1")
        self.limit = limit
        self._fair = FairQueue(limit)
        self._wakers: dict[object, asyncio.Future[None]] = {}
        self.in_flight = 0
        self.peak = 0
        self.waiting = 0

    def slot(self, user_id: str | None, *, urgent: bool = False) -> CallSlot:
        """An async context manager holding one slot for a call of ``user_id``; an
        ``urgent`` one goes ahead of that user's other waiting calls."""
        return CallSlot(self, user_id or "", urgent)

    async def _acquire(self, key: object, user: str, urgent: bool = False) -> None:
        if not self._fair.request(key, user, urgent=urgent):
            waker: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._wakers[key] = waker
            self.waiting += 1
            try:
                await waker
            except BaseException:
                # Cancelled while waiting, or just after being granted: give it back.
                if not self._fair.withdraw(key):
                    self._release(key, 0.0)
                raise
            finally:
                self.waiting -= 1
                self._wakers.pop(key, None)
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)

    def _release(self, key: object, used: float) -> None:
        nxt = self._fair.done(key, used)
        if nxt is not None:
            waker = self._wakers.get(nxt)
            if waker is not None and not waker.done():
                waker.set_result(None)


class CallSlot:
    """One call's hold on an :class:`AsyncConcurrencyLimiter` slot (``async with``)."""

    __slots__ = ("_limiter", "_started", "_urgent", "_user")

    def __init__(self, limiter: AsyncConcurrencyLimiter, user: str, urgent: bool = False) -> None:
        self._limiter = limiter
        self._user = user
        self._urgent = urgent
        self._started = 0.0

    async def __aenter__(self) -> Self:
        await self._limiter._acquire(self, self._user, self._urgent)  # noqa: SLF001
        self._started = time.monotonic()
        return self

    async def __aexit__(self, *exc: object) -> None:
        limiter = self._limiter
        limiter.in_flight -= 1
        limiter._release(self, time.monotonic() - self._started)  # noqa: SLF001
