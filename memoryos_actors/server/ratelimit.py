"""Per-key request limits: a token bucket per API key (pure, clock injected).

Several front doors (server processes over the same shards) share a key's budget by
splitting it: each door allows ``rate / N`` and ``burst / N`` (at least 1) where N is the
number of live doors, counted again every few seconds through an injected function. A
shared budget would cost every request a round trip to a shared counter; this costs none.
The price: a key whose requests all reach one door gets ``1 / N`` of its budget there.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["DOOR_RECOUNT_SECONDS", "RateLimiter", "TokenBucket"]


@dataclass(slots=True)
class TokenBucket:
    """Allows ``burst`` requests at once and ``rate`` requests per second sustained.

    Attributes:
        rate: tokens added per second (> 0).
        burst: bucket size, tokens (>= 1).
        tokens: tokens available at ``updated``.
        updated: time of the last update, seconds (any monotonic clock).
    """

    rate: float
    burst: int
    tokens: float
    updated: float

    @classmethod
    def full(cls, rate: float, burst: int, now: float) -> TokenBucket:
        """A bucket with all ``burst`` tokens available at ``now``."""
        if not rate > 0 or burst < 1:
            raise ValueError(f"rate must be > 0 and burst >= 1, got {rate!r}, {burst!r}")
        return cls(rate, burst, float(burst), now)

    def refill(self, now: float) -> None:
        """Add the tokens earned up to ``now`` at the current rate (time going backwards
        adds none)."""
        if now > self.updated:
            self.tokens = min(float(self.burst), self.tokens + (now - self.updated) * self.rate)
            self.updated = now

    def take(self, now: float) -> float:
        """Take one token at ``now``: 0.0 if allowed, else the seconds until one is free.

        A refused request takes nothing. Time going backwards adds no tokens.
        """
        self.refill(now)
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return 0.0
        return (1.0 - self.tokens) / self.rate


#: Seconds between two counts of the live front doors.
DOOR_RECOUNT_SECONDS = 5.0

log = logging.getLogger("memoryos.server")


def _one_door() -> int:
    return 1


class RateLimiter:
    """Token buckets by key id, created full on a key's first request.

    Args:
        default_rate: a key's sustained limit unless its record says otherwise, requests
            per second (over all front doors).
        default_burst: requests a key may send at once, over all front doors.
        door_count: the number of live front doors sharing the keys' budgets (default:
            this one alone); called at most once per ``recount_seconds``, from the event
            loop, so it must be quick (a directory listing, not a network call).
        recount_seconds: seconds between two calls of ``door_count``.

    Not thread-safe: the server calls it from its event loop only.
    """

    def __init__(
        self,
        default_rate: float,
        default_burst: int,
        *,
        door_count: Callable[[], int] | None = None,
        recount_seconds: float = DOOR_RECOUNT_SECONDS,
    ) -> None:
        if not default_rate > 0 or default_burst < 1:
            raise ValueError("default_rate must be > 0 and default_burst >= 1")
        self.default_rate = float(default_rate)
        self.default_burst = int(default_burst)
        self.recount_seconds = float(recount_seconds)
        self._door_count = door_count if door_count is not None else _one_door
        self._doors = 1
        self._counted_at: float | None = None
        self._buckets: dict[str, TokenBucket] = {}

    def doors(self, now: float) -> int:
        """The live front doors at ``now`` (>= 1), counted again once ``recount_seconds``
        have passed since the last count. A count that fails keeps the last one."""
        if self._counted_at is None or not 0 <= now - self._counted_at < self.recount_seconds:
            self._counted_at = now
            try:
                self._doors = max(1, int(self._door_count()))
            except Exception as exc:  # noqa: BLE001 - a limit is no reason to refuse requests
                log.warning("counting the front doors failed (%r); keeping %d", exc, self._doors)
        return self._doors

    def check(
        self, key_id: str, now: float, rate: float | None = None, burst: int | None = None
    ) -> int:
        """0 if ``key_id`` may send a request at ``now``, else Retry-After in whole seconds
        (>= 1). ``rate``/``burst`` override the defaults for this key; this door's share
        is ``rate / N`` and ``burst // N`` (at least 1) with N the live front doors."""
        n = self.doors(now)
        r = (self.default_rate if rate is None else float(rate)) / n
        b = max(1, (self.default_burst if burst is None else int(burst)) // n)
        bucket = self._buckets.get(key_id)
        if bucket is None:
            bucket = self._buckets[key_id] = TokenBucket.full(r, b, now)
        elif bucket.rate != r or bucket.burst != b:
            # Another share (a door came or went) or a changed key: the tokens left carry
            # over, up to the new burst; a new share never hands out a fresh burst.
            bucket.refill(now)
            bucket.rate, bucket.burst = r, b
            bucket.tokens = min(bucket.tokens, float(b))
        wait = bucket.take(now)
        return 0 if wait == 0.0 else max(1, math.ceil(wait))
