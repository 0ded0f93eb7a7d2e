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

This module holds the service: it builds the shared parts (caches, breakers, limits,
accounting) and runs a completion through them in order (cache, provider call, fallback,
redo queue, accounting). The parts are modules of their own: ``loop.py`` (the event loop
thread), ``provider_call.py`` (one resilient call of the provider), ``embed_call.py`` and
``batcher.py`` (the embedding path), ``redo.py`` (the redo queue), and ``cache.py``,
``resilience.py``, ``accounting.py``, ``failures.py``, ``prompts.py``, ``offline.py``,
``litellm_backend.py``, ``embedders.py``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import copy
import random
import threading
import time
from collections.abc import Callable, Sequence
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
from memoryos_actors.gateway.embed_call import EmbedCalls
from memoryos_actors.gateway.embedders import make_embedder
from memoryos_actors.gateway.failures import ProviderHealth, degraded_reason
from memoryos_actors.gateway.loop import LoopThread
from memoryos_actors.gateway.offline import OfflineBackend
from memoryos_actors.gateway.prompts import (
    PROMPTS,
    MalformedOutput,
    check_answer,
    not_serialisable,
    parse_answer,
    validate_payload,
)
from memoryos_actors.gateway.provider_call import (
    BreakerOpen,
    ProviderCalls,
    rejected,
    typed_config_error,
)
from memoryos_actors.gateway.redo import RedoHook, RedoQueue, RedoResult
from memoryos_actors.gateway.resilience import (
    AsyncConcurrencyLimiter,
    CircuitBreaker,
    ClockLike,
    ConcurrencyLimiter,
    MonotonicClock,
    RateLimiter,
    RetryPolicy,
)
from memoryos_actors.gateway.streaming import CompletionStream, text_pieces

__all__ = ["CLOSE_GRACE_S", "GatewayService"]

#: Seconds :meth:`GatewayService.close` lets running completions end, at most.
CLOSE_GRACE_S = 5.0

#: Characters of a streamed reply held back until they are checked for an echo of the
#: prompt: an echo found in them is answered by the fallback, as a whole answer's is.
HOLD_CHARS = 80


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
        self._offline_slot = AsyncConcurrencyLimiter(1)
        self._loop_thread: LoopThread | None = None
        self._loop_lock = threading.Lock()
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
        self._redo = RedoQueue(pending_limit)
        self._redo_lock = threading.Lock()
        self._health = ProviderHealth(self._clock.now)  # for stats() and readiness
        self.on_redo = on_redo
        self._closed = False
        self._calls = ProviderCalls(
            self._primary,
            breaker=self._breaker,
            limiter=self._limiter,
            rate=self._rate,
            health=self._health,
            acct=self._acct,
            validation_retries=int(cfg(config, "llm_validation_retries", 2)),
            sleep=sleep,
            jitter=self._rng_locked,
        )
        self._embeds = EmbedCalls(
            embedder if embedder is not None else make_embedder(config),
            cache=self._embeddings,
            breaker=self._embed_breaker,
            limiter=ConcurrencyLimiter(concurrency),
            rate=self._rate,
            health=self._health,
            acct=self._acct,
            policy=self._policy,
            retry_sleep=self._retry_sleep,
            jitter=self._rng_locked,
            window=float(cfg(config, "embed_coalesce_ms", 2.0)) / 1000.0,
        )
        # The batcher thread (None when coalescing is off), where tests watch its queue.
        self._batcher = self._embeds.batcher

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
        here: bool = False,
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

        With ``here`` and no provider configured (:attr:`answers_locally`), the offline
        backend answers in the calling thread and the future is done when this returns: an
        in-process answer is the interpreter's work wherever it runs, and the loop only
        added two thread hand-offs to it. Such an answer is not cached (it costs less than
        the cache's key). For callers whose thread is theirs to spend (the tiers'
        background jobs); a caller that must not be held up leaves ``here`` false.
        """
        self._check_open()
        if here and self.answers_locally:
            validate_payload(kind, payload)
            return self._answer_here(kind, payload, user_id)
        # The cache key is the payload's canonical JSON: making it is the JSON check too.
        validate_payload(kind, payload, serialised=True)
        primary = self._primary or self._offline
        try:
            key = content_key("complete", primary.name, kind, PROMPTS[kind].version, payload)
        except (TypeError, ValueError) as exc:
            raise not_serialisable(kind, exc) from None
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

    def stream(
        self,
        kind: str,
        payload: dict[str, Any],
        *,
        user_id: str | None = None,
        fallback: bool = True,
        raise_config_errors: bool = False,
    ) -> CompletionStream:
        """Start a completion of a text kind (``chat_reply``) and return its pieces as the
        provider streams them (a :class:`CompletionStream`; its ``completion`` once it
        ends).

        A backend that cannot stream (the offline one, a plain ``LLMBackend``) and a cached
        answer give the whole answer, cut into pieces. The first :data:`HOLD_CHARS`
        characters are held back until they are checked for an echo of the prompt. Up to
        the first piece given out, the stream is a completion like :meth:`complete`'s:
        retried, and answered by the offline fallback (``degraded``, queued for
        :meth:`redo_pending`) or raising as ``fallback`` and ``raise_config_errors`` ask.
        After it, a failure raises from the iteration: :class:`ProviderUnavailable` for a
        stream that broke off, :class:`GatewayError` for a whole reply that turns out to
        echo the prompt. A streamed answer is cached as a whole one is. Raises
        :class:`InvalidInput` for a JSON kind or a bad payload and :class:`SystemClosed`
        after :meth:`close`, at once.
        """
        self._check_open()
        validate_payload(kind, payload, serialised=True)
        if PROMPTS[kind].answer != "text":
            raise InvalidInput(f"{kind} is answered in JSON; only text kinds stream")
        primary = self._primary or self._offline
        try:
            key = content_key("complete", primary.name, kind, PROMPTS[kind].version, payload)
        except (TypeError, ValueError) as exc:
            raise not_serialisable(kind, exc) from None
        out = CompletionStream()
        if not hasattr(self._primary, "astream"):  # answered whole: the completion, in pieces
            future = self.submit(
                kind,
                payload,
                user_id=user_id,
                fallback=fallback,
                raise_config_errors=raise_config_errors,
            )
            future.add_done_callback(lambda f: self._whole(out, f))
            return out
        with self._jobs_lock:
            self._jobs += 1
            self._jobs_peak = max(self._jobs_peak, self._jobs)
        try:
            future = self._loop().run(
                self._stream_async(out, key, kind, payload, user_id, fallback, raise_config_errors)
            )
        except BaseException:
            with self._jobs_lock:
                self._jobs -= 1
            raise
        with self._jobs_lock:
            self._futures.add(future)
        future.add_done_callback(self._job_done)
        out.attach(future)
        return out

    @staticmethod
    def _whole(out: CompletionStream, future: concurrent.futures.Future[Completion]) -> None:
        """Feed ``out`` from a whole answer's future."""
        if future.cancelled():
            out.fail(SystemClosed("the gateway closed before the call ended"))
            return
        exc = future.exception()
        if exc is not None:
            out.fail(exc)
            return
        completion = future.result()
        for piece in text_pieces(str(completion.data["reply"])):
            out.piece(piece)
        out.end(completion)

    async def _stream_async(
        self,
        out: CompletionStream,
        key: str,
        kind: str,
        payload: dict[str, Any],
        user_id: str | None,
        fallback: bool,
        raise_config_errors: bool,
    ) -> None:
        t0 = time.perf_counter()
        primary = self._primary
        assert primary is not None
        cached = self._completions.get(key)
        if cached is not None:
            self._acct.record_cache_hit(kind, user_id)
            self._whole_answer(out, Completion(copy.deepcopy(cached), False, primary.name))
            return
        sent: list[bool] = []  # [True] once a piece went out: then no fallback
        try:
            data, tokens = await self._streamed(out, kind, payload, user_id, sent)
        except ProviderCallError as exc:
            if sent:
                out.fail(self._broken(exc))
                return
            if exc.is_config_error and raise_config_errors:
                out.fail(typed_config_error(exc, primary))
                return
            reason = degraded_reason(exc)
        except BreakerOpen:
            reason = self._health.breaker_reason()
        else:
            result = BackendResult(data, completion_tokens=tokens)
            completion = self._finish(key, kind, user_id, result, primary.name, t0, degraded=False)
            out.end(completion)
            return
        if not fallback:
            out.fail(
                ProviderUnavailable(f"{primary.name}: {reason}; no offline fallback was allowed")
            )
            return
        result = self._offline.answer(kind, payload)
        self._enqueue_redo(kind, payload, user_id)
        completion = self._finish(
            key, kind, user_id, result, self._offline.name, t0, degraded=True, reason=reason
        )
        self._whole_answer(out, completion)

    async def _streamed(
        self,
        out: CompletionStream,
        kind: str,
        payload: dict[str, Any],
        user_id: str | None,
        sent: list[bool],
    ) -> tuple[dict[str, Any], int]:
        """Stream the provider's answer into ``out`` (the first :data:`HOLD_CHARS` held
        back until checked), then check the whole; the checked answer and its estimated
        tokens. ``sent`` gets ``True`` once a piece went out."""
        parts: list[str] = []
        # Closed on the way out, also when a check here fails mid-stream: the provider's
        # request and the slot among the calls in flight are released at once.
        async with contextlib.aclosing(
            self._calls.stream(kind, payload, user_id, self._policy)
        ) as pieces:
            async for piece in pieces:
                parts.append(piece)
                if sent:
                    out.piece(piece)
                    continue
                held = "".join(parts)
                if len(held) >= HOLD_CHARS:
                    self._check_streamed(kind, payload, held, user_id)
                    sent.append(True)
                    out.piece(held)
        text = "".join(parts)
        data = self._check_streamed(kind, payload, text, user_id, whole=not sent)
        if not sent:
            self._whole_answer(out, None, data)
        return data, max(1, len(text) // 4)

    def _check_streamed(
        self,
        kind: str,
        payload: dict[str, Any],
        text: str,
        user_id: str | None,
        *,
        whole: bool = True,
    ) -> dict[str, Any]:
        """The streamed ``text`` as the kind's answer, checked (an echo of the prompt, an
        empty answer); raises the :class:`ProviderCallError` of a rejected answer, counted
        as an invalid answer. ``whole=False``: the text went out piece by piece already, so
        it is taken as it is (stripped), not unwrapped from JSON."""
        try:
            data = parse_answer(kind, text) if whole else PROMPTS[kind].validate({"reply": text})
            check_answer(kind, payload, data)
        except MalformedOutput as exc:
            error = rejected(exc)
            self._acct.record_invalid(kind, user_id, echoed=error.category == "echoed")
            raise error from None
        return data

    def _broken(self, exc: ProviderCallError) -> GatewayError:
        """The error of a stream that failed after pieces of it went out."""
        name = (self._primary or self._offline).name
        if exc.category in ("malformed", "echoed"):
            return GatewayError(f"{name}: the streamed answer was rejected: {degraded_reason(exc)}")
        return ProviderUnavailable(f"{name}: the stream broke off: {degraded_reason(exc)}")

    @staticmethod
    def _whole_answer(
        out: CompletionStream, completion: Completion | None, data: dict[str, Any] | None = None
    ) -> None:
        """Give out a whole answer in pieces (the completion's, or ``data``'s pieces only)."""
        answer = completion.data if completion is not None else data
        assert answer is not None
        for piece in text_pieces(str(answer["reply"])):
            out.piece(piece)
        if completion is not None:
            out.end(completion)

    def _job_done(self, future: Any) -> None:
        with self._jobs_lock:
            if future in self._futures:
                self._futures.discard(future)
                self._jobs -= 1

    def _loop(self) -> LoopThread:
        lt = self._loop_thread
        if lt is None:
            with self._loop_lock:
                self._check_open()
                if self._loop_thread is None:
                    self._loop_thread = LoopThread()
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
            # The offline backend is CPU work on this loop's thread, one call at a time: the
            # calls waiting go in fair order between users (the one slot is held across one
            # yield, so the calls that arrived meanwhile queue up and the fair order picks
            # among them), not in arrival order behind a flood of other users' calls.
            async with self._offline_slot.slot(user_id, urgent=PROMPTS[kind].urgent):
                await asyncio.sleep(0)
                result = self._offline.answer(kind, payload)
            return self._finish(key, kind, user_id, result, self._offline.name, t0, degraded=False)
        try:
            result = await self._calls.call(kind, payload, user_id, self._policy)
        except ProviderCallError as exc:
            if exc.is_config_error and raise_config_errors:
                raise typed_config_error(exc, self._primary) from None
            reason = degraded_reason(exc)
        except BreakerOpen:
            reason = self._health.breaker_reason()
        else:
            return self._finish(key, kind, user_id, result, self._primary.name, t0, degraded=False)
        if not fallback:
            raise ProviderUnavailable(
                f"{self._primary.name}: {reason}; no offline fallback was allowed"
            )
        result = self._offline.answer(kind, payload)
        self._enqueue_redo(kind, payload, user_id)
        return self._finish(
            key, kind, user_id, result, self._offline.name, t0, degraded=True, reason=reason
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
            offline=self._primary is None and self._embeds.local,
            backend=self.backend_name,
            breakers={
                "completion": self._breaker.state.value,
                "embedding": self._embed_breaker.state.value,
            },
        )

    def _answer_here(
        self, kind: str, payload: dict[str, Any], user_id: str | None
    ) -> concurrent.futures.Future[Completion]:
        """The offline backend's answer to a validated job, computed in the calling thread:
        a future that is done on return, failed as a job on the loop fails.

        It is counted as a call but not cached: the answer is deterministic and costs less
        than the cache's canonical JSON key, its hash and the copy it keeps (measured: the
        chain meta of a page, the most frequent job, is asked once per page anyway)."""
        t0 = time.perf_counter()
        answered: concurrent.futures.Future[Completion] = concurrent.futures.Future()
        try:
            result = self._offline.answer(kind, payload)
        except Exception as exc:  # noqa: BLE001 - the future carries it, as on the loop
            answered.set_exception(exc)
            return answered
        answered.set_result(
            self._finish(None, kind, user_id, result, self._offline.name, t0, degraded=False)
        )
        return answered

    def _finish(
        self,
        key: str | None,
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
        # A degraded answer must not hide the real one once it is back; no key: not cached.
        if key is not None and not degraded:
            self._completions.put(key, copy.deepcopy(result.data), owner=user_id)
        return Completion(result.data, degraded, backend, reason if degraded else None)

    def _rng_locked(self) -> random.Random:
        # Jitter draws from a per-call generator seeded from the shared one, so concurrent
        # calls never share a Random while staying reproducible for a fixed call order.
        with self._rng_lock:
            return random.Random(self._rng.random())

    def _retry_sleep(self, seconds: float) -> None:
        self._acct.record_retry()
        self._sleep(seconds)

    def _enqueue_redo(self, kind: str, payload: dict[str, Any], user_id: str | None) -> None:
        self._redo.push(kind, payload, user_id)

    def purge_user(self, user_id: str) -> dict[str, int]:
        """Drop what the gateway holds of ``user_id``'s content: cached completions and
        embeddings made for that user, and its queued redo requests.

        Returns the counts removed: ``{"gateway_cache": n, "redo_queue": n}``.
        """
        cached = self._completions.purge_owner(user_id) + self._embeddings.purge_owner(user_id)
        return {"gateway_cache": cached, "redo_queue": self._redo.purge_user(user_id)}

    def pending_count(self) -> int:
        """Degraded requests waiting to be redone."""
        return len(self._redo)

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
                item = self._redo.head()
                if item is None:
                    break
                kind, payload, user_id = item
                t0 = time.perf_counter()
                try:
                    result = (
                        self._loop()
                        .run(self._calls.call(kind, payload, user_id, RetryPolicy(0)))
                        .result()
                    )
                except (ProviderCallError, BreakerOpen, concurrent.futures.CancelledError):
                    break
                self._redo.done(item)
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
        return self._embeds.embed(texts, user_id)

    @property
    def answers_locally(self) -> bool:
        """Whether completions are CPU work in this process (no provider configured: the
        offline backend answers), which :meth:`submit` can do in the caller's thread."""
        return self._primary is None

    @property
    def embeds_locally(self) -> bool:
        """Whether embedding is CPU work in the calling thread (the hashing embedder),
        not a wait on a provider or a model that runs outside the interpreter lock."""
        return bool(self._embeds.local)

    def embedder_info(self) -> tuple[str, int]:
        """``(name, dim)`` of the embedder; stored data records these."""
        return self._embeds.embedder.name, int(self._embeds.embedder.dim)

    # ---------------------------------------------------------------------- the rest

    def stats(self) -> dict[str, Any]:
        """Accounting, cache, breaker, limits and redo-queue figures as a plain dict."""
        name = self._embeds.embedder.name
        dim = self._embeds.known_dim()
        out = self._acct.snapshot()
        pending, dropped, redone = self._redo.counts()
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

    def close(self, grace: float = CLOSE_GRACE_S) -> None:
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
        self._calls.close()
        self._embeds.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
