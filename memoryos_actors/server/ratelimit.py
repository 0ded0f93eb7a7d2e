"""Per-key request limits: a token bucket per API key (pure, clock injected)."""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["RateLimiter", "TokenBucket"]


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

    def take(self, now: float) -> float:
        """Take one token at ``now``: 0.0 if allowed, else the seconds until one is free.

        A refused request takes nothing. Time going backwards adds no tokens.
        """
        if now > self.updated:
            self.tokens = min(float(self.burst), self.tokens + (now - self.updated) * self.rate)
            self.updated = now
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return 0.0
        return (1.0 - self.tokens) / self.rate


class RateLimiter:
    """Token buckets by key id, created full on a key's first request.

    Not thread-safe: the server calls it from its event loop only.
    """

    def __init__(self, default_rate: float, default_burst: int) -> None:
        if not default_rate > 0 or default_burst < 1:
            raise ValueError("default_rate must be > 0 and default_burst >= 1")
        self.default_rate = float(default_rate)
        self.default_burst = int(default_burst)
        self._buckets: dict[str, TokenBucket] = {}

    def check(
        self, key_id: str, now: float, rate: float | None = None, burst: int | None = None
    ) -> int:
        """0 if ``key_id`` may send a request at ``now``, else Retry-After in whole seconds
        (>= 1). ``rate``/``burst`` override the defaults for this key."""
        r = self.default_rate if rate is None else float(rate)
        b = self.default_burst if burst is None else int(burst)
        bucket = self._buckets.get(key_id)
        if bucket is None or bucket.rate != r or bucket.burst != b:
            bucket = self._buckets[key_id] = TokenBucket.full(r, b, now)
        wait = bucket.take(now)
        return 0 if wait == 0.0 else max(1, math.ceil(wait))
