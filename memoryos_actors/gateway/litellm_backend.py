"""The litellm backend: any provider litellm supports, by model name, base URL and key variable.

litellm is imported lazily, on the first call, never at ``import memoryos_actors``. Before
importing it we set ``LITELLM_LOCAL_MODEL_COST_MAP=True`` (unless the user already chose)
so litellm reads its bundled price map instead of fetching one over the network.

This module does one provider attempt per call; retries, the breaker and limits live in
:mod:`memoryos_actors.gateway.service`. Every provider failure becomes a
:class:`ProviderCallError` whose message names the failure class and status, never the
provider's body, so error text cannot leak into results or logs.
"""

from __future__ import annotations

import os
import threading
from datetime import UTC
from email.utils import parsedate_to_datetime
from types import ModuleType
from typing import Any

from memoryos_actors.errors import ConfigError
from memoryos_actors.gateway.base import BackendResult, ProviderCallError
from memoryos_actors.gateway.prompts import (
    MalformedOutput,
    parse_json_object,
    render_messages,
    validate_output,
)

__all__ = ["LiteLLMBackend", "classify_error", "estimate_tokens", "import_litellm"]

_import_lock = threading.Lock()
_litellm: ModuleType | None = None

# Class names litellm/openai/httpx use for failures where trying again may help.
_RETRYABLE_NAMES = frozenset(
    {
        "Timeout",
        "APITimeoutError",
        "TimeoutException",
        "ReadTimeout",
        "ConnectTimeout",
        "APIConnectionError",
        "ConnectError",
        "RemoteProtocolError",
        "ServiceUnavailableError",
        "InternalServerError",
        "BadGatewayError",
        "RateLimitError",
    }
)


def import_litellm() -> ModuleType:
    """Import litellm once (thread-safe), pinning it to its local price map."""
    global _litellm
    if _litellm is None:
        with _import_lock:
            if _litellm is None:
                os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
                try:
                    import litellm
                except ImportError as exc:
                    raise ConfigError(
                        "llm_backend='litellm' needs the 'llm' extra "
                        "(pip install memoryos-actors[llm])"
                    ) from exc
                litellm.suppress_debug_info = True
                litellm.telemetry = False
                _litellm = litellm
    return _litellm


def estimate_tokens(text: str) -> int:
    """A rough token count (about 4 characters per token) for rate limiting."""
    return max(1, len(text) // 4)


def _retry_after(exc: BaseException) -> float | None:
    """Seconds the provider asked us to wait, from ``retry-after-ms`` / ``retry-after``."""
    headers: Any = None
    for source in (getattr(exc, "response", None), exc):
        h = getattr(source, "headers", None)
        if h:
            headers = h
            break
    if headers is None:
        headers = getattr(exc, "litellm_response_headers", None)
    if not headers:
        return None
    try:
        ms = headers.get("retry-after-ms")
        if ms is not None:
            return max(0.0, float(ms) / 1000.0)
        value = headers.get("retry-after")
        if value is None:
            return None
        try:
            return max(0.0, float(value))
        except ValueError:
            from datetime import datetime

            when = parsedate_to_datetime(value)
            return max(0.0, (when - datetime.now(UTC)).total_seconds())
    except (TypeError, ValueError, AttributeError):
        return None


def classify_error(exc: BaseException) -> ProviderCallError:
    """Turn any exception from a provider call into a :class:`ProviderCallError`.

    Retryable: timeouts, connection errors, 408, 409, 429 and 5xx. Other 4xx (bad request,
    authentication, not found) are not retried.
    """
    if isinstance(exc, ProviderCallError):
        return exc
    status = getattr(exc, "status_code", None)
    if not isinstance(status, int):
        status = None
    name = type(exc).__name__
    mro_names = {c.__name__ for c in type(exc).__mro__}
    if status is not None:
        retryable = status in (408, 409, 429) or status >= 500
    else:
        retryable = bool(mro_names & _RETRYABLE_NAMES) or isinstance(
            exc, (TimeoutError, ConnectionError)
        )
    if status == 429 or "RateLimitError" in mro_names:
        category = "rate_limited"
    elif "Timeout" in name or isinstance(exc, TimeoutError):
        category = "timeout"
    elif "Connection" in name or isinstance(exc, ConnectionError):
        category = "connection"
    elif status is not None and status >= 500:
        category = "server_error"
    else:
        category = "error"
    label = f"{name} (HTTP {status})" if status is not None else name
    return ProviderCallError(
        f"provider call failed: {label}",
        retryable=retryable,
        retry_after=_retry_after(exc) if category == "rate_limited" or status == 503 else None,
        status=status,
        category=category,
    )


class LiteLLMBackend:
    """Structured completions through ``litellm.completion``.

    ``model`` is litellm's model name (``"openai/gpt-4o-mini"``, ``"ollama/llama3"``, ...),
    ``api_base`` an optional base URL, ``api_key_env`` the name of the environment variable
    holding the API key (read at each call, never stored), ``timeout`` seconds per call,
    ``temperature`` passed through (0 keeps memory updates stable).
    """

    def __init__(
        self,
        model: str,
        *,
        api_base: str | None = None,
        api_key_env: str | None = None,
        timeout: float = 30.0,
        temperature: float = 0.0,
        max_output_tokens: int = 512,
    ) -> None:
        if not model:
            raise ConfigError("llm_model must be set when llm_backend='litellm'")
        self.model = model
        self.api_base = api_base
        self.api_key_env = api_key_env
        self.timeout = float(timeout)
        self.temperature = temperature
        self.max_output_tokens = max_output_tokens
        self.name = f"litellm:{model}"

    def estimate(self, kind: str, payload: dict[str, Any]) -> int:
        """Estimated tokens (prompt plus answer budget) of one call, for rate limiting."""
        msgs = render_messages(kind, payload)
        return sum(estimate_tokens(m["content"]) for m in msgs) + self.max_output_tokens // 4

    def call(self, kind: str, payload: dict[str, Any]) -> BackendResult:
        """One provider attempt: render, call, repair and validate the JSON answer.

        Raises :class:`ProviderCallError` on any failure, including an answer that stays
        malformed after repair (retryable: models often get it right the second time).
        """
        litellm = import_litellm()
        kwargs: dict[str, Any] = {
            "model": self.model,
            "messages": render_messages(kind, payload),
            "timeout": self.timeout,
            "temperature": self.temperature,
            "max_tokens": self.max_output_tokens,
            "max_retries": 0,  # the gateway retries; the client must not retry underneath
        }
        if self.api_base:
            kwargs["api_base"] = self.api_base
        if self.api_key_env:
            kwargs["api_key"] = os.environ.get(self.api_key_env, "")
        try:
            resp = litellm.completion(**kwargs)
        except Exception as exc:  # noqa: BLE001 - every provider error is classified
            raise classify_error(exc) from None
        try:
            text = resp.choices[0].message.content or ""
        except (AttributeError, IndexError, TypeError):
            raise ProviderCallError("answer had no message content", category="malformed") from None
        try:
            data = validate_output(kind, parse_json_object(text))
        except MalformedOutput as exc:
            raise ProviderCallError(
                f"answer was not valid {kind} JSON: {exc}", category="malformed"
            ) from None
        usage = getattr(resp, "usage", None)
        prompt_tokens = int(getattr(usage, "prompt_tokens", 0) or 0)
        completion_tokens = int(getattr(usage, "completion_tokens", 0) or 0)
        try:
            cost = float(litellm.completion_cost(completion_response=resp) or 0.0)
        except Exception:  # noqa: BLE001 - unknown model: no price, not an error
            cost = 0.0
        return BackendResult(data, prompt_tokens, completion_tokens, cost)

    def complete(self, kind: str, payload: dict[str, Any]) -> dict[str, Any]:
        """The :class:`LLMBackend` protocol: one attempt's validated answer."""
        return self.call(kind, payload).data
