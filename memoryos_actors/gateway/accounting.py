"""Usage accounting: calls, tokens, latency percentiles, cost, per prompt kind and per user."""

from __future__ import annotations

import bisect
import math
import threading
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Accounting", "LatencyHistogram", "UsageCounters"]

# Log-spaced bucket edges from 0.1 ms to ~170 s, ~10% apart: bounded memory, and a
# percentile read back is within one bucket (~10%) of the true value.
_EDGES: tuple[float, ...] = tuple(1e-4 * (1.1**i) for i in range(151))
# Users beyond this many get folded into one bucket so accounting stays bounded.
_MAX_USERS = 10_000
_OTHER_USERS = "<other>"


class LatencyHistogram:
    """Fixed log-bucket histogram of latencies in seconds (not thread-safe on its own)."""

    def __init__(self) -> None:
        self.counts = [0] * (len(_EDGES) + 1)
        self.count = 0
        self.total = 0.0
        self.max = 0.0

    def record(self, seconds: float) -> None:
        """Add one latency (seconds)."""
        seconds = max(0.0, seconds)
        self.counts[bisect.bisect_left(_EDGES, seconds)] += 1
        self.count += 1
        self.total += seconds
        self.max = max(self.max, seconds)

    def percentile(self, q: float) -> float:
        """The ``q``-th percentile (0-100) in seconds: the upper edge of its bucket."""
        if self.count == 0:
            return 0.0
        rank = max(1, math.ceil(self.count * q / 100.0))
        seen = 0
        for i, c in enumerate(self.counts):
            seen += c
            if seen >= rank:
                return min(self.max, _EDGES[i]) if i < len(_EDGES) else self.max
        return self.max

    def summary(self) -> dict[str, float]:
        """``count``, ``mean_ms``, ``p50_ms``, ``p95_ms``, ``p99_ms``, ``max_ms``."""
        return {
            "count": self.count,
            "mean_ms": round(1000 * self.total / self.count, 3) if self.count else 0.0,
            "p50_ms": round(1000 * self.percentile(50), 3),
            "p95_ms": round(1000 * self.percentile(95), 3),
            "p99_ms": round(1000 * self.percentile(99), 3),
            "max_ms": round(1000 * self.max, 3),
        }


@dataclass
class UsageCounters:
    """Counters for one prompt kind or one user."""

    calls: int = 0
    errors: int = 0
    invalid_answers: int = 0
    echoed_answers: int = 0
    degraded: int = 0
    cache_hits: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    latency: LatencyHistogram = field(default_factory=LatencyHistogram)

    def to_dict(self) -> dict[str, Any]:
        """A plain-dict snapshot."""
        return {
            "calls": self.calls,
            "errors": self.errors,
            "invalid_answers": self.invalid_answers,
            "echoed_answers": self.echoed_answers,
            "degraded": self.degraded,
            "cache_hits": self.cache_hits,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "cost_usd": round(self.cost_usd, 8),
            "latency": self.latency.summary(),
        }


class Accounting:
    """Thread-safe usage ledger of a gateway service.

    A "call" is one :meth:`GatewayService.complete` that was not served from the cache;
    retries inside it are counted separately as ``retries``. ``errors`` counts failed
    provider attempts.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._total = UsageCounters()
        self._by_kind: dict[str, UsageCounters] = {}
        self._by_user: dict[str, UsageCounters] = {}
        self._by_backend: Counter[str] = Counter()
        self.retries = 0
        self.embed_requests = 0
        self.embed_texts = 0
        self.embed_batches = 0
        self.embed_cache_hits = 0
        self.embed_errors = 0
        self._batch_sizes: Counter[int] = Counter()
        self.embed_latency = LatencyHistogram()

    def _targets(self, kind: str, user_id: str | None) -> list[UsageCounters]:
        out = [self._total, self._by_kind.setdefault(kind, UsageCounters())]
        if user_id is not None:
            if user_id not in self._by_user and len(self._by_user) >= _MAX_USERS:
                user_id = _OTHER_USERS
            out.append(self._by_user.setdefault(user_id, UsageCounters()))
        return out

    def record_call(
        self,
        kind: str,
        user_id: str | None,
        *,
        backend: str,
        latency_s: float,
        prompt_tokens: int = 0,
        completion_tokens: int = 0,
        cost_usd: float = 0.0,
        degraded: bool = False,
    ) -> None:
        """Record one completed (possibly degraded) completion call."""
        with self._lock:
            self._by_backend[backend] += 1
            for c in self._targets(kind, user_id):
                c.calls += 1
                c.prompt_tokens += prompt_tokens
                c.completion_tokens += completion_tokens
                c.cost_usd += cost_usd
                c.degraded += int(degraded)
                c.latency.record(latency_s)

    def record_error(self, kind: str, user_id: str | None) -> None:
        """Record one failed provider attempt."""
        with self._lock:
            for c in self._targets(kind, user_id):
                c.errors += 1

    def record_invalid(self, kind: str, user_id: str | None, *, echoed: bool = False) -> None:
        """Record one provider answer that failed validation (asked again, not an outage);
        ``echoed``: it echoed the prompt back (also counted in ``echoed_answers``)."""
        with self._lock:
            for c in self._targets(kind, user_id):
                c.invalid_answers += 1
                c.echoed_answers += int(echoed)

    def record_retry(self) -> None:
        """Record one retry (a wait followed by another attempt)."""
        with self._lock:
            self.retries += 1

    def record_cache_hit(self, kind: str, user_id: str | None) -> None:
        """Record a completion served from the cache."""
        with self._lock:
            for c in self._targets(kind, user_id):
                c.cache_hits += 1

    def record_embed_request(self, n_texts: int, cache_hits: int) -> None:
        """Record one caller's embed request of ``n_texts`` texts."""
        with self._lock:
            self.embed_requests += 1
            self.embed_texts += n_texts
            self.embed_cache_hits += cache_hits

    def record_embed_batch(self, size: int, latency_s: float, ok: bool) -> None:
        """Record one embedder call over ``size`` texts."""
        with self._lock:
            self.embed_batches += 1
            self._batch_sizes[size] += 1
            self.embed_latency.record(latency_s)
            if not ok:
                self.embed_errors += 1

    def snapshot(self) -> dict[str, Any]:
        """Everything as plain dicts and numbers."""
        with self._lock:
            sizes = self._batch_sizes
            n_batches = sum(sizes.values())
            total_texts = sum(k * v for k, v in sizes.items())
            return {
                "calls": self._total.calls,
                "errors": self._total.errors,
                "invalid_answers": self._total.invalid_answers,
                "echoed_answers": self._total.echoed_answers,
                "degraded": self._total.degraded,
                "cache_hits": self._total.cache_hits,
                "retries": self.retries,
                "prompt_tokens": self._total.prompt_tokens,
                "completion_tokens": self._total.completion_tokens,
                "cost_usd": round(self._total.cost_usd, 8),
                "latency": self._total.latency.summary(),
                "by_backend": dict(self._by_backend),
                "by_kind": {k: v.to_dict() for k, v in sorted(self._by_kind.items())},
                "by_user": {k: v.to_dict() for k, v in sorted(self._by_user.items())},
                "embeddings": {
                    "requests": self.embed_requests,
                    "texts": self.embed_texts,
                    "cache_hits": self.embed_cache_hits,
                    "batches": self.embed_batches,
                    "errors": self.embed_errors,
                    "batch_size_mean": round(total_texts / n_batches, 3) if n_batches else 0.0,
                    "batch_size_max": max(sizes) if sizes else 0,
                    "batch_sizes": {str(k): v for k, v in sorted(sizes.items())},
                    "latency": self.embed_latency.summary(),
                },
            }
