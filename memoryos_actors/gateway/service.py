"""GatewayService: the one place where LLM and embedding calls happen.

Thread-safe and synchronous; the gateway actor pool is a thin shell around one shared
instance. What it adds on top of a backend:

* a content-hash LRU cache for completions and embeddings;
* retries with exponential backoff and jitter (honouring ``Retry-After``), a circuit
  breaker per operation, a concurrency cap and token-bucket rate limits;
* fallback to the offline backend when the provider is down (the answer is marked
  ``degraded`` and the request queued for :meth:`GatewayService.redo_pending`);
* coalescing of embedding requests from concurrent callers into one batch, by a single
  batcher thread;
* accounting, exposed by :meth:`GatewayService.stats` as a plain dict.
"""

from __future__ import annotations

import copy
import random
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Self

import numpy as np

from memoryos_actors.errors import (
    ConfigError,
    GatewayError,
    InvalidInput,
    ProviderUnavailable,
    SystemClosed,
)
from memoryos_actors.gateway.accounting import Accounting
from memoryos_actors.gateway.base import BackendResult, Completion, Embedder, ProviderCallError, cfg
from memoryos_actors.gateway.cache import LRUCache, content_key
from memoryos_actors.gateway.embedders import HashingEmbedder, make_embedder
from memoryos_actors.gateway.offline import OfflineBackend
from memoryos_actors.gateway.prompts import PROMPTS, validate_payload
from memoryos_actors.gateway.resilience import (
    CircuitBreaker,
    ClockLike,
    ConcurrencyLimiter,
    MonotonicClock,
    RateLimiter,
    RetryPolicy,
    call_with_retries,
)

__all__ = ["GatewayService", "RedoHook", "RedoResult"]

RedoHook = Callable[[str, dict[str, Any], "str | None", dict[str, Any]], None]
"""``on_redo(kind, payload, user_id, data)``: called with each redone request's fresh answer."""

_MAX_EMBED_BATCH = 256  # texts per embedder call; providers cap batch sizes


@dataclass(frozen=True, slots=True)
class RedoResult:
    """A degraded request re-run against the recovered provider, with its fresh answer."""

    kind: str
    payload: dict[str, Any]
    user_id: str | None
    completion: Completion


class _BreakerOpen(Exception):
    """Internal: the breaker refused (or opened during) a call."""


class _Request:
    __slots__ = ("done", "error", "result", "texts")

    def __init__(self, texts: list[str]) -> None:
        self.texts = texts
        self.done = threading.Event()
        self.result: np.ndarray | None = None
        self.error: BaseException | None = None


class _EmbedBatcher:
    """One thread that merges concurrent embed requests arriving within ``window`` seconds.

    The first request of a batch waits at most ``window`` seconds (or until ``max_batch``
    texts are queued) for company; then all queued requests share one embedder call.
    Callers block on their own event; no thread is created per caller.
    """

    def __init__(
        self, fn: Callable[[list[str]], np.ndarray], window: float, max_batch: int
    ) -> None:
        self._fn = fn
        self._window = window
        self._max_batch = max_batch
        self._cond = threading.Condition()
        self._queue: deque[_Request] = deque()
        self._queued_texts = 0
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="memoryos-embed-batcher", daemon=True)
        self._thread.start()

    def submit(self, texts: list[str]) -> np.ndarray:
        """Embed ``texts`` as part of the next batch; blocks until the batch is done."""
        req = _Request(texts)
        with self._cond:
            if self._closed:
                raise SystemClosed("the gateway is closed")
            self._queue.append(req)
            self._queued_texts += len(texts)
            self._cond.notify()
        req.done.wait()
        if req.error is not None:
            raise req.error
        assert req.result is not None
        return req.result

    def _take(self) -> list[_Request] | None:
        with self._cond:
            while not self._queue and not self._closed:
                self._cond.wait()
            if not self._queue:
                return None  # closed and drained
            deadline = time.monotonic() + self._window
            while self._queued_texts < self._max_batch and not self._closed:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                self._cond.wait(remaining)
            batch: list[_Request] = []
            n = 0
            while self._queue and (not batch or n + len(self._queue[0].texts) <= self._max_batch):
                req = self._queue.popleft()
                batch.append(req)
                n += len(req.texts)
            self._queued_texts -= n
            return batch

    def _run(self) -> None:
        while True:
            batch = self._take()
            if batch is None:
                return
            unique: dict[str, int] = {}
            for req in batch:
                for t in req.texts:
                    unique.setdefault(t, len(unique))
            try:
                mat = self._fn(list(unique))
                for req in batch:
                    req.result = mat[[unique[t] for t in req.texts]]
            except BaseException as exc:  # noqa: BLE001 - handed to every waiting caller
                for req in batch:
                    req.error = exc
            finally:
                for req in batch:
                    req.done.set()

    def close(self, timeout: float = 5.0) -> None:
        """Finish queued requests, then stop the thread (waits up to ``timeout`` seconds)."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        if self._thread is not threading.current_thread():
            self._thread.join(timeout)


class GatewayService:
    """Structured completions and embeddings with caching, resilience and accounting.

    ``config`` is a :class:`~memoryos_actors.config.MemoryConfig` (or any object with its
    field names; ``None`` means all defaults). The optional arguments exist for embedding
    and tests: ``backend`` / ``embedder`` replace the configured ones; ``clock`` (``now()``
    in seconds) drives the breaker and rate limits; ``sleep(seconds)`` is used for backoff
    and rate-limit waits; ``seed`` seeds the backoff jitter; ``retry_base_delay`` and
    ``retry_max_delay`` (seconds) shape the backoff; ``pending_limit`` bounds the redo
    queue (oldest dropped first); ``on_redo`` is called by :meth:`redo_pending` with each
    fresh answer.
    """

    def __init__(
        self,
        config: Any = None,
        *,
        backend: Any = None,
        embedder: Embedder | None = None,
        clock: ClockLike | None = None,
        sleep: Callable[[float], None] = time.sleep,
        seed: int | None = None,
        retry_base_delay: float = 0.5,
        retry_max_delay: float = 30.0,
        pending_limit: int = 1024,
        on_redo: RedoHook | None = None,
    ) -> None:
        self._config = config
        self._clock = clock or MonotonicClock()
        self._sleep = sleep
        self._rng = random.Random(cfg(config, "seed", 0) if seed is None else seed)
        self._rng_lock = threading.Lock()
        self._offline = OfflineBackend()
        self._primary = backend if backend is not None else self._build_backend(config)
        self._embedder: Embedder = embedder if embedder is not None else make_embedder(config)
        self._local_embedder = isinstance(self._embedder, HashingEmbedder)
        self._policy = RetryPolicy(
            max_retries=int(cfg(config, "llm_max_retries", 3)),
            base_delay=retry_base_delay,
            max_delay=retry_max_delay,
        )
        threshold = int(cfg(config, "breaker_failure_threshold", 5))
        reset = float(cfg(config, "breaker_reset_seconds", 30.0))
        self._breaker = CircuitBreaker(threshold, reset, self._clock)
        self._embed_breaker = CircuitBreaker(threshold, reset, self._clock)
        self._limiter = ConcurrencyLimiter(int(cfg(config, "llm_max_concurrency", 4)))
        self._rate = RateLimiter(
            cfg(config, "llm_requests_per_minute", None),
            cfg(config, "llm_tokens_per_minute", None),
            clock=self._clock,
            sleep=sleep,
        )
        size = int(cfg(config, "cache_size", 4096))
        self._completions: LRUCache[dict[str, Any]] = LRUCache(size)
        self._embeddings: LRUCache[np.ndarray] = LRUCache(size)
        self._acct = Accounting()
        self._pending: deque[tuple[str, dict[str, Any], str | None]] = deque()
        self._pending_limit = pending_limit
        self._pending_dropped = 0
        self._redone = 0
        self._pending_lock = threading.Lock()
        self._redo_lock = threading.Lock()
        self.on_redo = on_redo
        self._closed = False
        window = float(cfg(config, "embed_coalesce_ms", 2.0)) / 1000.0
        self._batcher = (
            _EmbedBatcher(self._embed_direct, window, _MAX_EMBED_BATCH) if window > 0 else None
        )

    @staticmethod
    def _build_backend(config: Any) -> Any:
        kind = cfg(config, "llm_backend", "offline")
        if kind == "offline":
            return None  # use the shared offline instance
        if kind == "litellm":
            from memoryos_actors.gateway.litellm_backend import LiteLLMBackend

            return LiteLLMBackend(
                cfg(config, "llm_model", None) or "",
                api_base=cfg(config, "llm_base_url", None),
                api_key_env=cfg(config, "llm_api_key_env", None),
                timeout=float(cfg(config, "llm_timeout_seconds", 30.0)),
            )
        raise ConfigError(f"llm_backend must be 'offline' or 'litellm', got {kind!r}")

    @property
    def backend_name(self) -> str:
        """Name of the configured completion backend."""
        return (self._primary or self._offline).name

    # ------------------------------------------------------------------ completions

    def complete(self, kind: str, payload: dict[str, Any], *, user_id: str | None = None) -> Completion:
        """Answer prompt ``kind`` for ``payload`` with validated JSON of that kind's shape.

        Never raises for provider trouble: after retries (or with the breaker open) the
        offline backend answers, ``degraded=True``, and the request is queued for
        :meth:`redo_pending`. Raises :class:`InvalidInput` for an unknown kind or a bad
        payload and :class:`SystemClosed` after :meth:`close`.
        """
        self._check_open()
        validate_payload(kind, payload)
        primary = self._primary or self._offline
        key = content_key("complete", primary.name, kind, PROMPTS[kind].version, payload)
        cached = self._completions.get(key)
        if cached is not None:
            if user_id is not None:
                self._completions.note_owner(key, user_id)
            self._acct.record_cache_hit(kind, user_id)
            return Completion(copy.deepcopy(cached), False, primary.name)
        t0 = time.perf_counter()
        if self._primary is None:
            result = self._offline.call(kind, payload)
            return self._finish(key, kind, user_id, result, primary.name, t0, degraded=False)
        try:
            result = self._provider_call(kind, payload, user_id, self._policy)
        except (ProviderCallError, _BreakerOpen):
            result = self._offline.call(kind, payload)
            self._enqueue_redo(kind, payload, user_id)
            return self._finish(key, kind, user_id, result, self._offline.name, t0, degraded=True)
        return self._finish(key, kind, user_id, result, primary.name, t0, degraded=False)

    def _finish(
        self,
        key: str,
        kind: str,
        user_id: str | None,
        result: BackendResult,
        backend: str,
        t0: float,
        *,
        degraded: bool,
    ) -> Completion:
        self._acct.record_call(
            kind,
            user_id,
            backend=backend,
            latency_s=time.perf_counter() - t0,
            prompt_tokens=result.prompt_tokens,
            completion_tokens=result.completion_tokens,
            cost_usd=result.cost_usd,
            degraded=degraded,
        )
        if not degraded:  # a degraded answer must not hide the real one once it is back
            self._completions.put(key, copy.deepcopy(result.data), owner=user_id)
        return Completion(result.data, degraded, backend)

    def _provider_call(
        self, kind: str, payload: dict[str, Any], user_id: str | None, policy: RetryPolicy
    ) -> BackendResult:
        """Call the primary backend with breaker, limits and retries; raise on failure."""
        backend = self._primary
        assert backend is not None
        if not self._breaker.allow():
            raise _BreakerOpen()
        first = True

        def before_attempt() -> None:
            nonlocal first
            if not first and not self._breaker.allow():
                raise _BreakerOpen()
            first = False

        def attempt() -> BackendResult:
            estimate = backend.estimate(kind, payload) if hasattr(backend, "estimate") else 1
            self._rate.acquire(estimate)
            with self._limiter:
                if hasattr(backend, "call"):
                    result = backend.call(kind, payload)
                else:  # a plain LLMBackend: validate its answer ourselves
                    from memoryos_actors.gateway.prompts import MalformedOutput, validate_output

                    try:
                        result = BackendResult(validate_output(kind, backend.complete(kind, payload)))
                    except MalformedOutput as exc:
                        raise ProviderCallError(str(exc), category="malformed") from None
            self._rate.settle(estimate, result.prompt_tokens + result.completion_tokens)
            self._breaker.record_success()
            return result

        def on_failure(exc: ProviderCallError) -> None:
            self._breaker.record_failure()
            self._acct.record_error(kind, user_id)

        return call_with_retries(
            attempt,
            policy,
            sleep=self._retry_sleep,
            rng=self._rng_locked(),
            before_attempt=before_attempt,
            on_failure=on_failure,
        )

    def _rng_locked(self) -> random.Random:
        # Jitter draws from a per-call generator seeded from the shared one, so concurrent
        # calls never share a Random while staying reproducible for a fixed call order.
        with self._rng_lock:
            return random.Random(self._rng.random())

    def _retry_sleep(self, seconds: float) -> None:
        self._acct.record_retry()
        self._sleep(seconds)

    def _enqueue_redo(self, kind: str, payload: dict[str, Any], user_id: str | None) -> None:
        with self._pending_lock:
            if self._pending_limit <= 0:
                self._pending_dropped += 1
                return
            if len(self._pending) >= self._pending_limit:
                self._pending.popleft()
                self._pending_dropped += 1
            self._pending.append((kind, copy.deepcopy(payload), user_id))

    def purge_user(self, user_id: str) -> dict[str, int]:
        """Drop what the gateway holds of ``user_id``'s content: cached completions and
        embeddings made for that user, and its queued redo requests.

        Returns the counts removed: ``{"gateway_cache": n, "redo_queue": n}``.
        """
        cached = self._completions.purge_owner(user_id) + self._embeddings.purge_owner(user_id)
        with self._pending_lock:
            kept = deque(item for item in self._pending if item[2] != user_id)
            redo = len(self._pending) - len(kept)
            self._pending = kept
        return {"gateway_cache": cached, "redo_queue": redo}

    def pending_count(self) -> int:
        """Degraded requests waiting to be redone."""
        with self._pending_lock:
            return len(self._pending)

    def redo_pending(self, limit: int | None = None) -> list[RedoResult]:
        """Re-run queued degraded requests against the provider, oldest first.

        Stops at the first failure (the request stays queued) or when the breaker does not
        allow calls; does nothing if another thread is already redoing. Each fresh answer
        is cached, passed to ``on_redo(kind, payload, user_id, data)`` if set, and returned.
        ``limit`` caps how many requests are redone in this call.
        """
        if self._primary is None or not self._redo_lock.acquire(blocking=False):
            return []
        out: list[RedoResult] = []
        try:
            while limit is None or len(out) < limit:
                with self._pending_lock:
                    if not self._pending:
                        break
                    item = self._pending[0]
                kind, payload, user_id = item
                t0 = time.perf_counter()
                try:
                    result = self._provider_call(kind, payload, user_id, RetryPolicy(0))
                except (ProviderCallError, _BreakerOpen):
                    break
                with self._pending_lock:
                    if self._pending and self._pending[0] is item:
                        self._pending.popleft()
                    self._redone += 1
                key = content_key(
                    "complete", self._primary.name, kind, PROMPTS[kind].version, payload
                )
                completion = self._finish(
                    key, kind, user_id, result, self._primary.name, t0, degraded=False
                )
                out.append(RedoResult(kind, payload, user_id, completion))
                if self.on_redo is not None:
                    self.on_redo(kind, payload, user_id, completion.data)
        finally:
            self._redo_lock.release()
        return out

    # ------------------------------------------------------------------- embeddings

    def embed(self, texts: Sequence[str], *, user_id: str | None = None) -> np.ndarray:
        """Embed ``texts`` (for ``user_id``): an ``(n, dim)`` float32 array of unit rows.

        Cached texts are served from the LRU; for a provider embedder the rest join the
        next coalesced batch, an in-process embedder is called at once.
        Raises :class:`ProviderUnavailable` when a provider embedder's breaker is open,
        :class:`GatewayError` when retries are exhausted (no offline fallback exists for
        embeddings: vectors from another model would not be comparable).
        """
        self._check_open()
        if isinstance(texts, str) or not all(isinstance(t, str) for t in texts):
            raise InvalidInput("embed() takes a sequence of str")
        texts = list(texts)
        if not texts:
            return np.zeros((0, self._embedder.dim), dtype=np.float32)
        name = self._embedder.name
        keys = [content_key("embed", name, t) for t in texts]
        rows: list[np.ndarray | None] = [self._embeddings.get(k) for k in keys]
        if user_id is not None:
            for k, r in zip(keys, rows):
                if r is not None:
                    self._embeddings.note_owner(k, user_id)
        missing = list(dict.fromkeys(t for t, r in zip(texts, rows) if r is None))
        self._acct.record_embed_request(len(texts), sum(r is not None for r in rows))
        if missing:
            # Coalescing saves round trips to a provider; an in-process embedder gains
            # nothing from waiting for company, so it is called at once.
            if self._batcher is not None and not self._local_embedder:
                mat = self._batcher.submit(missing)
            else:
                mat = self._embed_direct(missing)
            fresh = dict(zip(missing, mat))
            for i, t in enumerate(texts):
                if rows[i] is None:
                    rows[i] = fresh[t]
                    self._embeddings.put(keys[i], fresh[t], owner=user_id)
        return np.stack(rows).astype(np.float32, copy=False)  # type: ignore[arg-type]

    def _embed_direct(self, texts: list[str]) -> np.ndarray:
        """One embedder call over ``texts`` (with resilience for provider embedders)."""
        t0 = time.perf_counter()
        ok = False
        try:
            if self._local_embedder:
                mat = self._embedder.embed(texts)
            else:
                mat = self._embed_with_retries(texts)
            ok = True
            return mat
        finally:
            self._acct.record_embed_batch(len(texts), time.perf_counter() - t0, ok)

    def _embed_with_retries(self, texts: list[str]) -> np.ndarray:
        if not self._embed_breaker.allow():
            raise ProviderUnavailable("embedding provider unavailable (circuit breaker open)")

        def attempt() -> np.ndarray:
            self._rate.acquire(sum(len(t) // 4 + 1 for t in texts))
            with self._limiter:
                mat = self._embedder.embed(texts)
            self._embed_breaker.record_success()
            return mat

        first = True

        def before_attempt() -> None:
            nonlocal first
            if not first and not self._embed_breaker.allow():
                raise ProviderUnavailable("embedding provider unavailable (circuit breaker open)")
            first = False

        try:
            return call_with_retries(
                attempt,
                self._policy,
                sleep=self._retry_sleep,
                rng=self._rng_locked(),
                before_attempt=before_attempt,
                on_failure=lambda exc: self._embed_breaker.record_failure(),
            )
        except ProviderCallError as exc:
            raise GatewayError(f"embedding failed: {exc}") from None

    def embedder_info(self) -> tuple[str, int]:
        """``(name, dim)`` of the embedder; stored data records these."""
        return self._embedder.name, int(self._embedder.dim)

    # ---------------------------------------------------------------------- the rest

    def stats(self) -> dict[str, Any]:
        """Accounting, cache, breaker, limits and redo-queue figures as a plain dict."""
        name = self._embedder.name
        # A provider embedder learns its dim from its first answer; asking for it here
        # would cost a provider call, so report None until it is known.
        dim = self._embedder.dim if self._local_embedder else getattr(self._embedder, "_dim", None)
        out = self._acct.snapshot()
        with self._pending_lock:
            pending, dropped, redone = len(self._pending), self._pending_dropped, self._redone
        out.update(
            {
                "backend": self.backend_name,
                "fallback_backend": self._offline.name,
                "embedder": {"name": name, "dim": dim},
                "cache": {
                    "completions": self._completions.stats(),
                    "embeddings": self._embeddings.stats(),
                },
                "breaker": {
                    "completion": self._breaker.state.value,
                    "completion_times_opened": self._breaker.times_opened,
                    "embedding": self._embed_breaker.state.value,
                    "embedding_times_opened": self._embed_breaker.times_opened,
                },
                "pending_redo": pending,
                "pending_dropped": dropped,
                "redone": redone,
                "concurrency": {
                    "limit": self._limiter.limit,
                    "in_flight": self._limiter.in_flight,
                    "peak": self._limiter.peak,
                },
                "rate_limit": self._rate.stats(),
                "closed": self._closed,
            }
        )
        return out

    def _check_open(self) -> None:
        if self._closed:
            raise SystemClosed("the gateway is closed")

    def close(self) -> None:
        """Stop accepting calls, finish queued embedding batches and stop the batcher thread.

        Idempotent. Queued redo requests are kept in memory only and are dropped.
        """
        if self._closed:
            return
        self._closed = True
        if self._batcher is not None:
            self._batcher.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
