"""What a provider failure is: classified, worded for the user, and remembered.

:func:`classify_error` turns any exception of a provider call (litellm's, openai's,
httpx's, aiohttp's, or :class:`HTTPStatusError` from the plain HTTP path) into a
:class:`~memoryos_actors.gateway.base.ProviderCallError` with a category. Outages
(timeouts, resets, 429, 5xx) are retried and count against the circuit breaker;
configuration errors (``auth``, ``not_found``, ``unreachable``: see
:data:`~memoryos_actors.gateway.base.CONFIG_CATEGORIES`) do not, and carry the provider's
own reason with every API key masked (:func:`mask_secrets`). :func:`config_error` words
one as the typed public error (what is wrong, the reason, how to fix it);
:func:`degraded_reason` gives the reason a degraded answer carries. :class:`ProviderHealth`
keeps the last failure and any standing configuration error for ``stats()`` and readiness.

The message of a :class:`ProviderCallError` never holds the provider's body, so it is safe
to log; only a configuration error's ``reason`` quotes the provider, masked.
"""

from __future__ import annotations

import errno
import json
import os
import re
import threading
from datetime import UTC
from email.utils import parsedate_to_datetime
from typing import Any

from memoryos_actors.errors import (
    ProviderAuthError,
    ProviderConfigError,
    ProviderModelNotFound,
    ProviderUnreachable,
)
from memoryos_actors.gateway.base import CONFIG_CATEGORIES, ProviderCallError

__all__ = [
    "HTTPStatusError",
    "ProviderHealth",
    "classify_error",
    "config_error",
    "degraded_reason",
    "mask_secrets",
    "provider_reason",
]

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
        # aiohttp (the plain HTTP path)
        "ClientConnectionError",
        "ClientPayloadError",
        "ServerTimeoutError",
    }
)


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


# Root causes that say the base URL leads nowhere (a configuration error, not an outage):
# nothing listens there, the host name does not resolve, the URL is not a URL.
_UNREACHABLE_NAMES = frozenset(
    {
        "ConnectionRefusedError",
        "gaierror",
        "ClientConnectorDNSError",
        "InvalidURL",
        "InvalidUrlClientError",
        "NonHttpUrlClientError",
        "UnsupportedProtocol",
        "LocalProtocolError",
    }
)
_UNREACHABLE_ERRNOS = frozenset(
    {errno.ECONNREFUSED, errno.EHOSTUNREACH, errno.ENETUNREACH, errno.EADDRNOTAVAIL}
)
# Client-side messages of a missing key (openai's client says so before any request).
_MISSING_KEY_RE = re.compile(
    r"missing credentials|api_key client option must be set|no api key", re.IGNORECASE
)
# A 400 that names the model as the problem (litellm's "LLM Provider NOT provided", a
# server's "model ... does not exist"); one naming response_format is about JSON mode.
_BAD_MODEL_RE = re.compile(
    r"model.{0,80}(?:not found|does not exist|unknown|invalid|not supported|no such)"
    r"|(?:unknown|invalid|no such).{0,20}model|llm provider not provided",
    re.IGNORECASE | re.DOTALL,
)
_LITELLM_PREFIX_RE = re.compile(
    r"^(?:\s*(?:litellm\.)?[A-Za-z]+(?:Error|Exception)?:\s+|\s*[A-Za-z]+Exception\s+-\s+)+"
)
_REASON_CHARS = 300


def _causes(exc: BaseException) -> list[BaseException]:
    """``exc`` and the exceptions it was raised from, outermost first (at most 20)."""
    out: list[BaseException] = []
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen and len(out) < 20:
        seen.add(id(cur))
        out.append(cur)
        cur = cur.__cause__ or cur.__context__
    return out


def _is_unreachable(chain: list[BaseException]) -> bool:
    for e in chain:
        if any(c.__name__ in _UNREACHABLE_NAMES for c in type(e).__mro__):
            return True
        if isinstance(e, OSError) and e.errno in _UNREACHABLE_ERRNOS:
            return True
    return False


def _secrets() -> list[str]:
    """Values that must never be shown: API keys in the environment (8+ characters)."""
    return [
        v
        for k, v in os.environ.items()
        if len(v) >= 8 and k.upper().endswith(("_KEY", "_TOKEN", "_SECRET"))
    ]


def mask_secrets(text: str, secrets: list[str] | None = None) -> str:
    """``text`` (a provider's error message) with anything that may be a key masked.

    Masks every word that contains one of ``secrets`` (default: the API keys in the
    environment) or its first or last 4 characters, a word that looks like a key (``sk-``
    and similar prefixes, a masked key with ``**``), and long runs mixing letters and
    digits; URLs are kept. Providers echo a masked key in their 401 messages
    (``sk-ab****wxyz``): its visible ends are a secret's ends too.
    """
    keys = _secrets() if secrets is None else [k for k in secrets if k]
    pieces: list[str] = []
    for word in re.split(r"(\s+)", text):
        core = word.strip(".,;:'\"()[]{}<>`")
        if core and _secret_like(core, keys):
            word = word.replace(core, "[masked]")
        pieces.append(word)
    return "".join(pieces)


def _secret_like(word: str, keys: list[str]) -> bool:
    for key in keys:
        if key in word or (len(key) >= 8 and (key[:4] in word or key[-4:] in word)):
            return True
    if "://" in word:
        return False
    if "**" in word or re.match(r"(?:sk|pk|rk|ak)[-_]", word, re.IGNORECASE):
        return True
    return (
        len(word) >= 24
        and "/" not in word
        and any(c.isdigit() for c in word)
        and any(c.isalpha() for c in word)
    )


def _one_line(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= _REASON_CHARS else flat[: _REASON_CHARS - 1] + "…"


def provider_reason(exc: BaseException, secrets: list[str] | None = None) -> str:
    """The provider's (or the transport's) own explanation of ``exc``, on one line, keys
    masked (see :func:`mask_secrets`)."""
    chain = _causes(exc)
    if _is_unreachable(chain):
        root = next((e for e in reversed(chain) if isinstance(e, OSError)), None)
        if root is not None:
            text = str(root) or type(root).__name__
        else:  # not a socket error: the URL itself is unusable
            text = f"{type(chain[-1]).__name__}: {chain[-1]}"
    else:
        body = getattr(exc, "body", None)
        found = _body_message(body) if isinstance(body, (bytes, str, dict)) else None
        text = found or _LITELLM_PREFIX_RE.sub("", str(getattr(exc, "message", "") or exc))
    return mask_secrets(_one_line(text), (secrets or []) + _secrets())


def _body_message(body: Any) -> str | None:
    """The ``error.message`` (or ``message``, ``detail``, ``error``) of an error body."""
    if isinstance(body, bytes):
        try:
            body = json.loads(body)
        except ValueError:
            text = body.decode("utf-8", "replace").strip()
            return text or None
    if isinstance(body, str):
        try:
            body = json.loads(body)
        except ValueError:
            return body.strip() or None
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict):
            for k in ("message", "detail", "error"):
                if isinstance(err.get(k), str) and err[k]:
                    return str(err[k])
        if isinstance(err, str) and err:
            return err
        if isinstance(body.get("detail"), str):
            return str(body["detail"])
    return None


def classify_error(exc: BaseException, secrets: list[str] | None = None) -> ProviderCallError:
    """Turn any exception from a provider call into a :class:`ProviderCallError`.

    Retryable: timeouts, connection errors, 408, 409, 429 and 5xx. Other 4xx (bad request,
    authentication, not found) are not retried. Configuration errors get their own
    category with the provider's reason (keys in ``secrets`` and the environment masked):
    ``"auth"`` (401, 403, no key set), ``"not_found"`` (404, a 400 naming the model) and
    ``"unreachable"`` (connection refused, unknown host, invalid URL: retried, since a local
    server may be restarting, but never taken for an outage).
    """
    if isinstance(exc, ProviderCallError):
        return exc
    status = getattr(exc, "status_code", None)
    if not isinstance(status, int):
        status = None
    name = type(exc).__name__
    mro_names = {c.__name__ for c in type(exc).__mro__}
    chain = _causes(exc)
    text = str(getattr(exc, "message", "") or exc)
    if status is not None:
        retryable = status in (408, 409, 429) or status >= 500
    else:
        retryable = bool(mro_names & _RETRYABLE_NAMES) or isinstance(
            exc, (TimeoutError, ConnectionError)
        )
    if (
        status in (401, 403)
        or mro_names & {"AuthenticationError", "PermissionDeniedError"}
        or _MISSING_KEY_RE.search(text)
    ):
        category, retryable = "auth", False
    elif (
        status == 404
        or "NotFoundError" in mro_names
        or (
            (status == 400 or "BadRequestError" in mro_names)
            and "response_format" not in text
            and _BAD_MODEL_RE.search(text)
        )
    ):
        category, retryable = "not_found", False
    elif _is_unreachable(chain):
        category, retryable = "unreachable", True
    elif status == 429 or "RateLimitError" in mro_names:
        category = "rate_limited"
    elif "Timeout" in name or isinstance(exc, TimeoutError):
        category = "timeout"
    elif (
        "Connection" in name
        or "ClientConnectionError" in mro_names
        or isinstance(exc, ConnectionError)
    ):
        category = "connection"
    elif status is not None and status >= 500:
        category = "server_error"
    else:
        category = "error"
    if isinstance(exc, HTTPStatusError):
        label = f"HTTP {status}"
    else:
        label = f"{name} (HTTP {status})" if status is not None else name
    return ProviderCallError(
        f"provider call failed: {label}",
        retryable=retryable,
        retry_after=_retry_after(exc) if category == "rate_limited" or status == 503 else None,
        status=status,
        category=category,
        reason=provider_reason(exc, secrets) if category in CONFIG_CATEGORIES else None,
    )


def config_error(
    exc: ProviderCallError,
    *,
    model: str,
    api_base: str | None,
    api_key_env: str | None,
    setting: str = "llm_model",
) -> ProviderConfigError:
    """The typed, one-line error for a configuration-class ``exc`` (see
    :data:`~memoryos_actors.gateway.base.CONFIG_CATEGORIES`): what is wrong, the provider's
    reason, and how to fix it. ``setting`` names the config field of the model
    (``llm_model`` or ``embedding_model``). The key itself is never in the message.
    """
    what = "LLM" if setting == "llm_model" else "embedder"
    reason = exc.reason or exc.message
    status = f"HTTP {exc.status}: " if exc.status is not None and exc.status < 500 else ""
    where = api_base or "the provider"
    if exc.category == "auth":
        if exc.status in (401, 403):
            fix = (
                f"put a valid key in ${api_key_env} (llm_api_key_env)"
                if api_key_env
                else "set llm_api_key_env to the variable holding a valid key"
            )
            return ProviderAuthError(
                f"{what} {model}: the provider rejected the API key ({status}{reason}): {fix}",
                reason=reason,
                hint=fix,
                status=exc.status,
            )
        fix = (
            f"export {api_key_env}=<your key>"
            if api_key_env
            else "export the provider's key variable (e.g. OPENAI_API_KEY) or set "
            "llm_api_key_env to the variable holding it"
        )
        return ProviderAuthError(
            f"{what} {model}: no API key ({reason}): {fix}",
            reason=reason,
            hint=fix,
            status=exc.status,
        )
    if exc.category == "not_found":
        fix = f"check {setting} (litellm's provider/model name, e.g. openai/gpt-4o-mini)" + (
            " and llm_base_url (OpenAI-compatible servers usually end in /v1)" if api_base else ""
        )
        return ProviderModelNotFound(
            f"{what} {model}: {where} does not serve this model ({status}{reason}): {fix}",
            reason=reason,
            hint=fix,
            status=exc.status,
        )
    fix = (
        "start the server there or fix llm_base_url"
        if api_base
        else "check the network or set llm_base_url"
    )
    return ProviderUnreachable(
        f"{what} {model}: cannot reach {where} ({reason}): {fix}",
        reason=reason,
        hint=fix,
        status=exc.status,
    )


class HTTPStatusError(Exception):
    """An HTTP error answer on the plain HTTP path (classified like litellm's errors).

    ``body`` is the answer's body: read only for the reason of a configuration error and
    for telling a 400 about the model from other bad requests.
    """

    def __init__(self, status: int, headers: Any, body: bytes = b"") -> None:
        super().__init__(f"HTTP {status}")
        self.status_code = status
        self.headers = headers
        self.body = body
        self.message = (_body_message(body) or "") if status in (400, 401, 403, 404) else ""


def degraded_reason(exc: ProviderCallError) -> str:
    """Why a call failed, for a degraded answer and ``stats()``: the failure class and
    status, never the provider's body (a configuration error adds its masked reason)."""
    what = exc.message.removeprefix("provider call failed: ")
    if exc.is_config_error:
        label = {
            "auth": "API key rejected or missing",
            "not_found": "unknown model",
            "unreachable": "base URL unreachable",
        }[exc.category]
        return f"provider misconfigured: {label} ({what}" + (
            f": {exc.reason})" if exc.reason else ")"
        )
    if exc.category == "malformed":
        return f"provider answer invalid: {what}"
    if exc.category == "echoed":
        return f"provider answer rejected: {what}"
    if exc.category in ("timeout", "connection", "server_error", "rate_limited"):
        return f"provider unavailable: {what}"
    return f"provider call failed: {what}"


class ProviderHealth:
    """The last provider failure and the configuration errors standing, per operation.

    ``now()`` is the clock (seconds). Thread-safe. An operation (``"completion"`` or
    ``"embedding"``) is misconfigured from its configuration error until its next success.
    """

    def __init__(self, now: Any) -> None:
        self._now = now
        self._lock = threading.Lock()
        self._last: tuple[str, float] | None = None
        self._config: dict[str, str] = {}

    def failure(self, exc: ProviderCallError, operation: str) -> None:
        """Note a failed call of ``operation``."""
        reason = degraded_reason(exc)
        with self._lock:
            self._last = (reason, self._now())
            if exc.is_config_error:
                self._config[operation] = reason

    def success(self, operation: str) -> None:
        """Note a call of ``operation`` the provider answered."""
        if self._config:
            with self._lock:
                self._config.pop(operation, None)

    def breaker_reason(self) -> str:
        """The reason of an answer the open breaker kept from the provider."""
        with self._lock:
            last = self._last[0] if self._last else None
        return "provider unavailable: circuit breaker open" + (
            f" (last failure: {last})" if last else ""
        )

    def snapshot(self, *, offline: bool, backend: str, breakers: dict[str, str]) -> dict[str, Any]:
        """The provider's state (see ``GatewayService.provider_health``)."""
        with self._lock:
            last, misconfigured = self._last, bool(self._config)
        if offline:
            state = "offline"
        elif misconfigured:
            state = "misconfigured"
        elif any(s != "closed" for s in breakers.values()):
            state = "degraded"
        else:
            state = "ok"
        return {
            "state": state,
            "backend": backend,
            "breaker": dict(breakers),
            "last_error": last[0] if last else None,
            "last_error_age_seconds": (round(max(0.0, self._now() - last[1]), 3) if last else None),
        }
