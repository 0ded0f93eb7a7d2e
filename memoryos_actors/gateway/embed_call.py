"""Embeddings through the gateway: the content-hash cache, coalescing of concurrent
callers' texts into one batch, and, for a provider embedder, breaker, limits and retries.

There is no offline fallback for embeddings: vectors from another model would not be
comparable with the stored ones, so an outage raises.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence

import numpy as np

from memoryos_actors.errors import GatewayError, InvalidInput, ProviderUnavailable
from memoryos_actors.gateway.accounting import Accounting
from memoryos_actors.gateway.base import Embedder, ProviderCallError
from memoryos_actors.gateway.batcher import MAX_EMBED_BATCH, EmbedBatcher
from memoryos_actors.gateway.cache import LRUCache, content_key
from memoryos_actors.gateway.embedders import HashingEmbedder
from memoryos_actors.gateway.failures import ProviderHealth
from memoryos_actors.gateway.provider_call import typed_config_error
from memoryos_actors.gateway.resilience import (
    CircuitBreaker,
    ConcurrencyLimiter,
    RateLimiter,
    RetryPolicy,
    call_with_retries,
)

__all__ = ["EmbedCalls"]


class EmbedCalls:
    """The service's embedding path over ``embedder``, with the service's shared cache,
    breaker, limits and accounting.

    ``window`` (seconds) is how long a batch waits for company (0: no batcher thread);
    ``retry_sleep(seconds)`` waits between retries and counts them; ``jitter()`` gives a
    fresh generator for one call's backoff jitter.
    """

    def __init__(
        self,
        embedder: Embedder,
        *,
        cache: LRUCache[np.ndarray],
        breaker: CircuitBreaker,
        limiter: ConcurrencyLimiter,
        rate: RateLimiter,
        health: ProviderHealth,
        acct: Accounting,
        policy: RetryPolicy,
        retry_sleep: Callable[[float], None],
        jitter: Callable[[], random.Random],
        window: float,
    ) -> None:
        self.embedder = embedder
        self.local = isinstance(embedder, HashingEmbedder)
        """True for an in-process embedder (no provider, nothing to retry or coalesce)."""
        self._cache = cache
        self._breaker = breaker
        self._limiter = limiter
        self._rate = rate
        self._health = health
        self._acct = acct
        self._policy = policy
        self._retry_sleep = retry_sleep
        self._jitter = jitter
        self.batcher = EmbedBatcher(self.direct, window, MAX_EMBED_BATCH) if window > 0 else None

    def embed(self, texts: Sequence[str], user_id: str | None) -> np.ndarray:
        """``texts`` as an ``(n, dim)`` float32 array of unit rows (see
        ``GatewayService.embed``)."""
        if isinstance(texts, str) or not all(isinstance(t, str) for t in texts):
            raise InvalidInput("embed() takes a sequence of str")
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.embedder.dim), dtype=np.float32)
        if self.local:
            # An in-process embedder costs less than the cache's key (a hash of the text's
            # JSON) and bookkeeping would, and keeps nothing derived from a user's text
            # after the call: it is called at once, every time.
            self._acct.record_embed_request(len(texts), 0)
            return self.direct(texts)
        return self._through_cache(texts, user_id)

    def _through_cache(self, texts: list[str], user_id: str | None) -> np.ndarray:
        """``embed`` for a provider embedder: cached rows reused, the rest in one request."""
        name = self.embedder.name
        keys = [content_key("embed", name, t) for t in texts]
        rows: list[np.ndarray | None] = [self._cache.get(k) for k in keys]
        if user_id is not None:
            for k, r in zip(keys, rows, strict=True):
                if r is not None:
                    self._cache.note_owner(k, user_id)
        missing = list(dict.fromkeys(t for t, r in zip(texts, rows, strict=True) if r is None))
        self._acct.record_embed_request(len(texts), sum(r is not None for r in rows))
        if missing:
            # Coalescing saves round trips to the provider.
            if self.batcher is not None:
                mat = self.batcher.submit(missing)
            else:
                mat = self.direct(missing)
            fresh = dict(zip(missing, mat, strict=True))
            for i, t in enumerate(texts):
                if rows[i] is None:
                    rows[i] = fresh[t]
                    self._cache.put(keys[i], fresh[t], owner=user_id)
        return np.stack(rows).astype(np.float32, copy=False)  # type: ignore[arg-type]

    def direct(self, texts: list[str]) -> np.ndarray:
        """One embedder call over ``texts`` (with resilience for provider embedders)."""
        t0 = time.perf_counter()
        ok = False
        try:
            if self.local:
                mat = self.embedder.embed(texts)
            else:
                mat = self._with_retries(texts)
            ok = True
            return mat
        finally:
            self._acct.record_embed_batch(len(texts), time.perf_counter() - t0, ok)

    def _with_retries(self, texts: list[str]) -> np.ndarray:
        if not self._breaker.allow():
            raise ProviderUnavailable("embedding provider unavailable (circuit breaker open)")

        def attempt() -> np.ndarray:
            self._rate.acquire(sum(len(t) // 4 + 1 for t in texts))
            with self._limiter:
                mat = self.embedder.embed(texts)
            self._breaker.record_success()
            self._health.success("embedding")
            return mat

        def on_failure(exc: ProviderCallError) -> None:
            if not exc.is_config_error:  # a configuration error is no outage
                self._breaker.record_failure()
            self._health.failure(exc, "embedding")

        first = True

        def before_attempt() -> None:
            nonlocal first
            if not first and not self._breaker.allow():
                raise ProviderUnavailable("embedding provider unavailable (circuit breaker open)")
            first = False

        try:
            return call_with_retries(
                attempt,
                self._policy,
                sleep=self._retry_sleep,
                rng=self._jitter(),
                before_attempt=before_attempt,
                on_failure=on_failure,
            )
        except ProviderCallError as exc:
            if exc.is_config_error:
                raise typed_config_error(exc, self.embedder) from None
            raise GatewayError(f"embedding failed: {exc}") from None

    def known_dim(self) -> int | None:
        """The embedder's dimension, or None for a provider embedder that has not answered
        yet (asking would cost a provider call)."""
        return self.embedder.dim if self.local else getattr(self.embedder, "_dim", None)

    def close(self) -> None:
        """Finish queued batches and stop the batcher thread."""
        if self.batcher is not None:
            self.batcher.close()
