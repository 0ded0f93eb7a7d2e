"""GatewayService: the one place where LLM and embedding calls happen.

Thread-safe. Completions run on one asyncio event loop (a thread the service owns): a
call waiting for the provider holds no thread, so how many calls are in flight is a
setting about the provider (``llm_max_concurrency``, ``llm_requests_per_minute``,
``llm_tokens_per_minute``), not a number of threads. :meth:`GatewayService.submit` hands
a completion to that loop and returns a future at once; :meth:`GatewayService.complete`
is the blocking form. What the service adds on top of a backend:

* a content-hash LRU cache for completions and embeddings;
* retries with exponential backoff and jitter (honouring ``Retry-After``), a circuit
  breaker per operation, a cap on calls in flight and token-bucket rate limits;
* answers that fail validation are asked again (``llm_validation_retries`` times), and
  count as the provider being up, not as an outage, for the breaker;
* fallback to the offline backend when the provider is down (the answer is marked
  ``degraded``, with the reason, and the request queued for
  :meth:`GatewayService.redo_pending`); a configuration error (rejected key, unknown model,
  unreachable base URL) never opens the breaker, and a caller who waits for the answer
  (``raise_config_errors=True``, as ``chat`` does) gets it as a typed
  :class:`~memoryos_actors.errors.ProviderConfigError` instead of a fallback;
* coalescing of embedding requests from concurrent callers into one batch, by a single
  batcher thread;
* accounting, exposed by :meth:`GatewayService.stats` as a plain dict.

Why this module is long (about 870 lines): the items above share one lock discipline and
one event loop, and each call passes through all of them in order (cache, breaker, limits,
retries, validation, fallback, accounting); the parts with a life of their own are already
modules of their own (``cache.py``, ``resilience.py``, ``accounting.py``, ``prompts.py``,
``offline.py``, ``litellm_backend.py``, ``embedders.py``, ``failures.py``).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
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
    ProviderConfigError,
    ProviderUnavailable,
    SystemClosed,
)
from memoryos_actors.gateway.accounting import Accounting
from memoryos_actors.gateway.base import BackendResult, Completion, Embedder, ProviderCallError, cfg
from memoryos_actors.gateway.cache import LRUCache, content_key
from memoryos_actors.gateway.embedders import HashingEmbedder, make_embedder
from memoryos_actors.gateway.failures import ProviderHealth, config_error, degraded_reason
from memoryos_actors.gateway.offline import OfflineBackend
from memoryos_actors.gateway.prompts import (
    PROMPTS,
    MalformedOutput,
    check_answer,
    validate_output,
    validate_payload,
)
from memoryos_actors.gateway.resilience import (
    AsyncConcurrencyLimiter,
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
        self._thread = threading.Thread(
            target=self._run, name="memoryos-embed-batcher", daemon=True
        )
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


class _LoopThread:
    """An asyncio event loop running on a thread of its own, until :meth:`close`."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self.thread = threading.Thread(target=self._run, name="memoryos-gateway-loop", daemon=True)
        self.thread.start()
        self._ready.wait()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.call_soon(self._ready.set)
        self.loop.run_forever()

    def run(self, coro: Any) -> concurrent.futures.Future[Any]:
        """Schedule ``coro`` on the loop; the returned future is thread-safe."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def close(self, grace: float, cleanup: Any = None) -> None:
        """Let running tasks finish for up to ``grace`` seconds, cancel the rest, stop."""

        async def shutdown() -> None:
            me = asyncio.current_task()
            tasks = [t for t in asyncio.all_tasks() if t is not me]
            if tasks:
                _done, pending = await asyncio.wait(tasks, timeout=grace)
                for t in pending:
                    t.cancel()
                if pending:
                    await asyncio.wait(pending, timeout=1.0)
            if cleanup is not None:
                try:
                    await cleanup()
                except Exception:  # noqa: BLE001, S110 - closing connections is best effort
                    pass
            await self.loop.shutdown_default_executor()

        if self.thread is threading.current_thread():
            raise RuntimeError("the gateway loop cannot close itself")
        try:
            self.run(shutdown()).result(grace + 10.0)
        except (concurrent.futures.TimeoutError, RuntimeError):
            pass
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5.0)
        if not self.thread.is_alive():
            self.loop.close()


class GatewayService:
    """Structured completions and embeddings with caching, resilience and accounting.

    ``config`` is a :class:`~memoryos_actors.config.MemoryConfig` (or any object with its
    field names; ``None`` means all defaults). Completions run on the service's event loop
    thread (started on first use, stopped by :meth:`close`); a backend with an async
    ``acall(kind, payload)`` is awaited there, a synchronous one runs in a small thread
    pool of ``llm_max_concurrency`` threads. The optional arguments exist for embedding
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
        concurrency = int(cfg(config, "llm_max_concurrency", 16))
        self._limiter = AsyncConcurrencyLimiter(concurrency)
        self._embed_limiter = ConcurrencyLimiter(concurrency)
        self._validation_retries = int(cfg(config, "llm_validation_retries", 2))
        self._loop_thread: _LoopThread | None = None
        self._loop_lock = threading.Lock()
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None
        self._jobs = 0  # completions handed to the loop and not finished
        self._futures: set[concurrent.futures.Future[Completion]] = set()
        self._jobs_peak = 0
        self._jobs_lock = threading.Lock()
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
        self._health = ProviderHealth(self._clock.now)  # for stats() and readiness
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
                client=str(cfg(config, "llm_client", "auto")),
                json_mode=str(cfg(config, "llm_json_mode", "auto")),
            )
        raise ConfigError(f"llm_backend must be 'offline' or 'litellm', got {kind!r}")

    @property
    def backend_name(self) -> str:
        """Name of the configured completion backend."""
        return (self._primary or self._offline).name

    # ------------------------------------------------------------------ completions

    def complete(
        self,
        kind: str,
        payload: dict[str, Any],
        *,
        user_id: str | None = None,
        fallback: bool = True,
        raise_config_errors: bool = False,
    ) -> Completion:
        """Answer prompt ``kind`` for ``payload`` with validated JSON of that kind's shape.

        Blocks until the answer is there (see :meth:`submit` for the non-blocking form).
        By default never raises for provider trouble: after retries (or with the breaker
        open) the offline backend answers, ``degraded=True`` with the ``reason``, and the
        request is queued for :meth:`redo_pending`. With ``fallback=False`` an outage raises
        :class:`ProviderUnavailable` instead; with ``raise_config_errors=True`` a
        configuration error (rejected key, unknown model, unreachable base URL) raises its
        :class:`~memoryos_actors.errors.ProviderConfigError` subclass instead. Raises
        :class:`InvalidInput` for an unknown kind or a bad payload and
        :class:`SystemClosed` after :meth:`close`.
        """
        if self._loop_thread is not None and self._loop_thread.thread is threading.current_thread():
            raise RuntimeError("complete() would block the gateway's own event loop")
        try:
            return self.submit(
                kind,
                payload,
                user_id=user_id,
                fallback=fallback,
                raise_config_errors=raise_config_errors,
            ).result()
        except concurrent.futures.CancelledError:
            raise SystemClosed("the gateway closed before the call ended") from None

    def submit(
        self,
        kind: str,
        payload: dict[str, Any],
        *,
        user_id: str | None = None,
        fallback: bool = True,
        raise_config_errors: bool = False,
    ) -> concurrent.futures.Future[Completion]:
        """Start a completion and return a future of its :class:`Completion` at once.

        The call runs on the service's event loop, concurrently with every other one, up to
        ``llm_max_concurrency`` in flight at the provider; the rest wait for a slot (their
        number is ``stats()["concurrency"]["waiting"]``). A cached answer gives a future that
        is already done. The future fails for provider trouble only as ``fallback`` and
        ``raise_config_errors`` ask (see :meth:`complete`); it is cancelled when the service
        closes before the call ends. Raises
        :class:`InvalidInput` for a bad kind or payload and :class:`SystemClosed` after
        :meth:`close`, at once.
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
            done: concurrent.futures.Future[Completion] = concurrent.futures.Future()
            done.set_result(Completion(copy.deepcopy(cached), False, primary.name))
            return done
        with self._jobs_lock:
            self._jobs += 1
            self._jobs_peak = max(self._jobs_peak, self._jobs)
        try:
            future = self._loop().run(
                self._complete_async(key, kind, payload, user_id, fallback, raise_config_errors)
            )
        except BaseException:
            with self._jobs_lock:
                self._jobs -= 1
            raise
        with self._jobs_lock:
            self._futures.add(future)
        future.add_done_callback(self._job_done)
        return future

    def _job_done(self, future: Any) -> None:
        with self._jobs_lock:
            if future in self._futures:
                self._futures.discard(future)
                self._jobs -= 1

    def _loop(self) -> _LoopThread:
        lt = self._loop_thread
        if lt is None:
            with self._loop_lock:
                self._check_open()
                if self._loop_thread is None:
                    self._loop_thread = _LoopThread()
                lt = self._loop_thread
        return lt

    async def _complete_async(
        self,
        key: str,
        kind: str,
        payload: dict[str, Any],
        user_id: str | None,
        fallback: bool = True,
        raise_config_errors: bool = False,
    ) -> Completion:
        t0 = time.perf_counter()
        if self._primary is None:
            result = self._offline.call(kind, payload)
            return self._finish(key, kind, user_id, result, self._offline.name, t0, degraded=False)
        try:
            result = await self._provider_call(kind, payload, user_id, self._policy)
        except ProviderCallError as exc:
            if exc.is_config_error and raise_config_errors:
                raise self._config_error(exc, self._primary) from None
            reason = degraded_reason(exc)
        except _BreakerOpen:
            reason = self._health.breaker_reason()
        else:
            return self._finish(key, kind, user_id, result, self._primary.name, t0, degraded=False)
        if not fallback:
            raise ProviderUnavailable(
                f"{self._primary.name}: {reason}; no offline fallback was allowed"
            )
        result = self._offline.call(kind, payload)
        self._enqueue_redo(kind, payload, user_id)
        return self._finish(
            key, kind, user_id, result, self._offline.name, t0, degraded=True, reason=reason
        )

    @staticmethod
    def _config_error(exc: ProviderCallError, source: Any) -> ProviderConfigError:
        """The public typed error for ``exc``, worded by the backend or embedder when it can."""
        build = getattr(source, "config_error", None)
        if callable(build):
            return build(exc)
        return config_error(
            exc, model=getattr(source, "name", "provider"), api_base=None, api_key_env=None
        )

    def provider_health(self) -> dict[str, Any]:
        """What a readiness probe and ``stats()`` say about the configured provider.

        ``state`` is ``"offline"`` (the offline backend, no provider), ``"ok"``,
        ``"degraded"`` (a circuit breaker is not closed: answers come from the fallback) or
        ``"misconfigured"`` (a configuration error since the last successful call);
        ``breaker`` the completion and embedding breakers' states; ``last_error`` the last
        failure's reason (no provider text beyond a masked reason) and
        ``last_error_age_seconds`` how long ago it was, or None.
        """
        return self._health.snapshot(
            offline=self._primary is None and self._local_embedder,
            backend=self.backend_name,
            breakers={
                "completion": self._breaker.state.value,
                "embedding": self._embed_breaker.state.value,
            },
        )

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
        reason: str | None = None,
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
        return Completion(result.data, degraded, backend, reason if degraded else None)

    async def _provider_call(
        self, kind: str, payload: dict[str, Any], user_id: str | None, policy: RetryPolicy
    ) -> BackendResult:
        """Call the primary backend with breaker, limits and retries; raise on failure.

        Transport failures (timeouts, 429, 5xx, resets) count against the breaker and are
        retried with backoff (``policy``). An answer that fails validation shows that the
        provider is up: it is asked again at once, up to ``llm_validation_retries`` times,
        and never opens the breaker. A configuration error (see ``CONFIG_CATEGORIES``) is
        no outage either: it never counts against the breaker; an unreachable base URL is
        retried like a transport failure, a rejected key or unknown model is not.
        """
        backend = self._primary
        assert backend is not None
        if not self._breaker.allow():
            raise _BreakerOpen()
        rng = self._rng_locked()
        attempt = 0
        invalid = 0
        while True:
            try:
                result = await self._attempt(backend, kind, payload)
            except ProviderCallError as exc:
                if exc.category == "malformed":
                    self._breaker.record_success()  # it answered: the provider is up
                    self._health.success("completion")
                    self._acct.record_invalid(kind, user_id)
                    if invalid >= self._validation_retries:
                        raise
                    invalid += 1
                else:
                    if not exc.is_config_error:
                        self._breaker.record_failure()
                    self._health.failure(exc, "completion")
                    self._acct.record_error(kind, user_id)
                    if not exc.retryable or attempt >= policy.max_retries:
                        raise
                    self._acct.record_retry()
                    await self._async_sleep(policy.delay(attempt, rng, exc.retry_after))
                    attempt += 1
                if not self._breaker.allow():
                    raise _BreakerOpen() from None
                continue
            self._breaker.record_success()
            self._health.success("completion")
            return result

    async def _attempt(self, backend: Any, kind: str, payload: dict[str, Any]) -> BackendResult:
        estimate = backend.estimate(kind, payload) if hasattr(backend, "estimate") else 1
        wait = self._rate.reserve(estimate)
        if wait > 0:
            await self._async_sleep(wait)
        async with self._limiter:
            if hasattr(backend, "acall"):
                result = await backend.acall(kind, payload)
            elif hasattr(backend, "call"):
                result = await self._in_thread(backend.call, kind, payload)
            else:  # a plain LLMBackend: validate its answer ourselves
                answer = await self._in_thread(backend.complete, kind, payload)
                try:
                    result = BackendResult(validate_output(kind, answer))
                except MalformedOutput as exc:
                    raise ProviderCallError(str(exc), category="malformed") from None
        try:
            check_answer(kind, payload, result.data)
        except MalformedOutput as exc:
            raise ProviderCallError(str(exc), category="malformed") from None
        self._rate.settle(estimate, result.prompt_tokens + result.completion_tokens)
        return result

    async def _in_thread(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Run a blocking backend call without blocking the loop."""
        if self._executor is None:
            self._executor = concurrent.futures.ThreadPoolExecutor(
                max_workers=self._limiter.limit, thread_name_prefix="memoryos-llm"
            )
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)

    async def _async_sleep(self, seconds: float) -> None:
        # An injected sleep (tests: a recorder that advances a manual clock) is called as
        # is; the real one becomes an asyncio sleep, which holds no thread.
        if self._sleep is time.sleep:
            await asyncio.sleep(seconds)
        else:
            self._sleep(seconds)

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
                    result = (
                        self._loop()
                        .run(self._provider_call(kind, payload, user_id, RetryPolicy(0)))
                        .result()
                    )
                except (ProviderCallError, _BreakerOpen, concurrent.futures.CancelledError):
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
        a :class:`~memoryos_actors.errors.ProviderConfigError` subclass on a configuration
        error, :class:`GatewayError` when retries are exhausted (no offline fallback exists
        for embeddings: vectors from another model would not be comparable).
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
            for k, r in zip(keys, rows, strict=True):
                if r is not None:
                    self._embeddings.note_owner(k, user_id)
        missing = list(dict.fromkeys(t for t, r in zip(texts, rows, strict=True) if r is None))
        self._acct.record_embed_request(len(texts), sum(r is not None for r in rows))
        if missing:
            # Coalescing saves round trips to a provider; an in-process embedder gains
            # nothing from waiting for company, so it is called at once.
            if self._batcher is not None and not self._local_embedder:
                mat = self._batcher.submit(missing)
            else:
                mat = self._embed_direct(missing)
            fresh = dict(zip(missing, mat, strict=True))
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
            with self._embed_limiter:
                mat = self._embedder.embed(texts)
            self._embed_breaker.record_success()
            self._health.success("embedding")
            return mat

        def on_failure(exc: ProviderCallError) -> None:
            if not exc.is_config_error:  # a configuration error is no outage
                self._embed_breaker.record_failure()
            self._health.failure(exc, "embedding")

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
                on_failure=on_failure,
            )
        except ProviderCallError as exc:
            if exc.is_config_error:
                raise self._config_error(exc, self._embedder) from None
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
        with self._jobs_lock:
            jobs, jobs_peak = self._jobs, self._jobs_peak
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
                "provider": self.provider_health(),
                "pending_redo": pending,
                "pending_dropped": dropped,
                "redone": redone,
                "concurrency": {
                    "limit": self._limiter.limit,
                    "in_flight": self._limiter.in_flight,
                    "peak": self._limiter.peak,
                    "waiting": self._limiter.waiting,
                    "jobs": jobs,
                    "jobs_peak": jobs_peak,
                },
                "rate_limit": self._rate.stats(),
                "closed": self._closed,
            }
        )
        return out

    def _check_open(self) -> None:
        if self._closed:
            raise SystemClosed("the gateway is closed")

    def close(self, grace: float = 5.0) -> None:
        """Stop accepting calls; let running completions end (up to ``grace`` seconds, then
        they are cancelled); finish queued embedding batches; stop the service's threads.

        Idempotent. Queued redo requests are kept in memory only and are dropped.
        """
        with self._loop_lock:
            if self._closed:
                return
            self._closed = True
            lt = self._loop_thread
        if lt is not None:
            aclose = getattr(self._primary, "aclose", None)
            lt.close(grace, aclose)
            # A call scheduled while the loop was stopping never ran: cancel its future so
            # nobody waits for it forever (its waiter gets SystemClosed or a cancellation).
            with self._jobs_lock:
                stranded = list(self._futures)
            for future in stranded:
                future.cancel()
                self._job_done(future)
        if self._executor is not None:
            self._executor.shutdown(wait=True, cancel_futures=True)
        if self._batcher is not None:
            self._batcher.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
