"""One completion asked of the provider, on the gateway's event loop: circuit breaker,
rate limits, a cap on calls in flight, retries with backoff, and validation of the answer
(an invalid answer is asked again and counts as the provider being up)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import random
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from typing import Any

from memoryos_actors.errors import ProviderConfigError
from memoryos_actors.gateway.accounting import Accounting
from memoryos_actors.gateway.base import BackendResult, ProviderCallError
from memoryos_actors.gateway.failures import ProviderHealth, config_error
from memoryos_actors.gateway.prompts import (
    PROMPTS,
    EchoedPrompt,
    MalformedOutput,
    check_answer,
    validate_output,
)
from memoryos_actors.gateway.resilience import (
    AsyncConcurrencyLimiter,
    CircuitBreaker,
    RateLimiter,
    RetryPolicy,
)

__all__ = ["BreakerOpen", "ProviderCalls", "rejected", "typed_config_error"]


class BreakerOpen(Exception):
    """The breaker refused (or opened during) a call; the caller falls back or raises."""


def rejected(exc: MalformedOutput) -> ProviderCallError:
    """The provider error for an answer that failed a check: ``"echoed"`` for a reply that
    echoes the prompt (not asked again: a model that echoes its prompt does it again),
    ``"malformed"`` for the rest (asked again)."""
    if isinstance(exc, EchoedPrompt):
        return ProviderCallError(
            f"the model echoed the prompt back ({exc})", retryable=False, category="echoed"
        )
    return ProviderCallError(str(exc), category="malformed")


def typed_config_error(exc: ProviderCallError, source: Any) -> ProviderConfigError:
    """The public typed error for ``exc``, worded by the backend or embedder ``source``
    when it can."""
    build = getattr(source, "config_error", None)
    if callable(build):
        return build(exc)
    return config_error(
        exc, model=getattr(source, "name", "provider"), api_base=None, api_key_env=None
    )


class ProviderCalls:
    """Calls of the primary completion ``backend`` with the service's breaker, limits and
    accounting (shared objects, also read by ``GatewayService.stats``).

    ``sleep(seconds)`` is the injected sleep (``time.sleep`` means a real wait, done as an
    asyncio sleep); ``jitter()`` gives a fresh generator for one call's backoff jitter.
    """

    def __init__(
        self,
        backend: Any,
        *,
        breaker: CircuitBreaker,
        limiter: AsyncConcurrencyLimiter,
        rate: RateLimiter,
        health: ProviderHealth,
        acct: Accounting,
        validation_retries: int,
        sleep: Callable[[float], None],
        jitter: Callable[[], random.Random],
    ) -> None:
        self._backend = backend
        self._breaker = breaker
        self._limiter = limiter
        self._rate = rate
        self._health = health
        self._acct = acct
        self._validation_retries = validation_retries
        self._sleep = sleep
        self._jitter = jitter
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None

    async def call(
        self, kind: str, payload: dict[str, Any], user_id: str | None, policy: RetryPolicy
    ) -> BackendResult:
        """Call the primary backend with breaker, limits and retries; raise on failure.

        Transport failures (timeouts, 429, 5xx, resets) count against the breaker and are
        retried with backoff (``policy``). An answer that fails validation shows that the
        provider is up: it is asked again at once, up to ``llm_validation_retries`` times,
        and never opens the breaker. A configuration error (see ``CONFIG_CATEGORIES``) is
        no outage either: it never counts against the breaker; an unreachable base URL is
        retried like a transport failure, a rejected key or unknown model is not. Raises
        :class:`ProviderCallError` or :class:`BreakerOpen`.
        """
        backend = self._backend
        assert backend is not None
        if not self._breaker.allow():
            raise BreakerOpen()
        rng = self._jitter()
        attempt = 0
        invalid = 0
        while True:
            try:
                result = await self._attempt(backend, kind, payload, user_id)
            except ProviderCallError as exc:
                if exc.category in ("malformed", "echoed"):
                    self._breaker.record_success()  # it answered: the provider is up
                    self._health.success("completion")
                    self._acct.record_invalid(kind, user_id, echoed=exc.category == "echoed")
                    if exc.category == "echoed" or invalid >= self._validation_retries:
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
                    raise BreakerOpen() from None
                continue
            self._breaker.record_success()
            self._health.success("completion")
            return result

    async def _attempt(
        self, backend: Any, kind: str, payload: dict[str, Any], user_id: str | None
    ) -> BackendResult:
        estimate = backend.estimate(kind, payload) if hasattr(backend, "estimate") else 1
        wait = self._rate.reserve(estimate)
        if wait > 0:
            await self._async_sleep(wait)
        async with self._limiter.slot(user_id, urgent=PROMPTS[kind].urgent):
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
            raise rejected(exc) from None
        self._rate.settle(estimate, result.prompt_tokens + result.completion_tokens)
        return result

    async def stream(
        self, kind: str, payload: dict[str, Any], user_id: str | None, policy: RetryPolicy
    ) -> AsyncGenerator[str, None]:
        """The backend's streamed answer (its ``astream``), piece by piece, with the
        breaker, limits and retries of :meth:`call` up to the first piece: a failure
        before it is retried with backoff (nothing was given out yet); a failure after
        it raises at once (the caller already has part of the answer). The answer is not
        checked here (the caller checks the whole text). The slot among the calls in
        flight is held until the stream ends or is closed. Raises
        :class:`ProviderCallError` or :class:`BreakerOpen`.
        """
        backend = self._backend
        if not self._breaker.allow():
            raise BreakerOpen()
        rng = self._jitter()
        attempt = 0
        while True:
            estimate = backend.estimate(kind, payload) if hasattr(backend, "estimate") else 1
            wait = self._rate.reserve(estimate)
            if wait > 0:
                await self._async_sleep(wait)
            async with self._limiter.slot(user_id, urgent=PROMPTS[kind].urgent):
                pieces = backend.astream(kind, payload)
                try:
                    first = await self._first(
                        pieces, kind, user_id, last=attempt >= policy.max_retries
                    )
                    if isinstance(first, str):
                        yield first
                        try:
                            async for piece in pieces:
                                yield piece
                        except ProviderCallError as exc:
                            self._failed(exc, kind, user_id)
                            raise
                        self._rate.settle(estimate, estimate)
                        return
                finally:
                    await pieces.aclose()
            self._acct.record_retry()
            await self._async_sleep(policy.delay(attempt, rng, first.retry_after))
            attempt += 1
            if not self._breaker.allow():
                raise BreakerOpen()

    async def _first(
        self, pieces: AsyncIterator[str], kind: str, user_id: str | None, *, last: bool
    ) -> str | ProviderCallError:
        """The stream's first piece, or the failure to retry after (raised when it is not
        to be retried: ``last`` attempt, or not retryable). A success so far resets the
        breaker's count."""
        try:
            first = await anext(pieces)
        except StopAsyncIteration:
            raise ProviderCallError("empty answer", category="malformed") from None
        except ProviderCallError as exc:
            self._failed(exc, kind, user_id)
            if not exc.retryable or last:
                raise
            return exc
        self._breaker.record_success()
        self._health.success("completion")
        return first

    def _failed(self, exc: ProviderCallError, kind: str, user_id: str | None) -> None:
        """Count a failed provider attempt (against the breaker, unless it is a
        configuration error)."""
        if not exc.is_config_error:
            self._breaker.record_failure()
        self._health.failure(exc, "completion")
        self._acct.record_error(kind, user_id)

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

    def close(self) -> None:
        """Stop the thread pool of synchronous backends (after the loop has stopped)."""
        if self._executor is not None:
            self._executor.shutdown(wait=True, cancel_futures=True)
