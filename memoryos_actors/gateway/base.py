"""Protocols and value types shared by the gateway's backends, embedders and service."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np

from memoryos_actors.errors import GatewayError

__all__ = [
    "CONFIG_CATEGORIES",
    "BackendResult",
    "Completion",
    "Embedder",
    "LLMBackend",
    "ProviderCallError",
    "cfg",
]


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into vectors.

    ``embed`` returns an array of shape ``(len(texts), dim)``, dtype float32, each row
    L2-normalised. ``name`` identifies the vector space (stored data records it, so data
    written with one embedder is never searched with another).
    """

    @property
    def name(self) -> str:
        """Identifies the vector space (model and dimension)."""
        ...

    @property
    def dim(self) -> int:
        """Vector length."""
        ...

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts``; see the class docstring for the result's shape."""
        ...


@runtime_checkable
class LLMBackend(Protocol):
    """Answers a structured prompt of one kind with a JSON object of that kind's shape."""

    name: str

    def complete(self, kind: str, payload: dict[str, Any]) -> dict[str, Any]:
        """Return the validated JSON answer for prompt ``kind`` given ``payload``."""
        ...


@dataclass(frozen=True, slots=True)
class BackendResult:
    """One backend call's answer plus what it cost.

    ``prompt_tokens`` and ``completion_tokens`` are provider-reported token counts (0 when
    no LLM ran); ``cost_usd`` is the provider price when known, else 0.0.
    """

    data: dict[str, Any]
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0


@dataclass(frozen=True, slots=True)
class Completion:
    """What :meth:`GatewayService.complete` returns.

    ``data`` is validated against the prompt kind's shape. ``degraded`` is True when the
    answer came from the offline fallback because the configured provider failed or its
    circuit breaker was open; such a request is queued to be redone. ``backend`` names the
    backend that produced ``data``. ``reason`` says why a degraded answer is degraded (e.g.
    ``"provider unavailable: InternalServerError (HTTP 500)"``); None when not degraded.
    """

    data: dict[str, Any]
    degraded: bool
    backend: str
    reason: str | None = None


CONFIG_CATEGORIES = frozenset({"auth", "not_found", "unreachable"})
""":class:`ProviderCallError` categories that are configuration errors, not outages: a
rejected or missing key, an unknown model, a base URL that cannot be reached."""


@dataclass(eq=False)
class ProviderCallError(GatewayError):
    """One provider call failed.

    ``retryable`` says whether trying again may help (timeouts, 429, 5xx, connection errors,
    malformed output); ``retry_after`` is the provider's requested wait in seconds, if any;
    ``status`` is the HTTP status when there was one. The message never contains the
    provider's response body, so it is safe to log. ``category`` is one of ``"timeout"``,
    ``"connection"``, ``"server_error"``, ``"rate_limited"``, ``"malformed"``, ``"echoed"``
    (an answer that echoes the prompt back), ``"error"`` (outages and faults) or ``"auth"``, ``"not_found"``, ``"unreachable"`` (configuration
    errors, see :data:`CONFIG_CATEGORIES`); for those, ``reason`` is the provider's own
    explanation with any API key masked.
    """

    message: str
    retryable: bool = True
    retry_after: float | None = None
    status: int | None = None
    category: str = field(default="error")
    reason: str | None = None

    def __post_init__(self) -> None:
        super().__init__(self.message)

    def __str__(self) -> str:
        return self.message

    @property
    def is_config_error(self) -> bool:
        """True for a configuration error (rejected key, unknown model, unreachable URL)."""
        return self.category in CONFIG_CATEGORIES


def cfg(config: Any, name: str, default: Any) -> Any:
    """Read field ``name`` of a config object, falling back to ``default`` when absent.

    The gateway accepts any object with :class:`MemoryConfig`'s attribute names (or
    ``None``), so it can be built and tested on its own.
    """
    if config is None:
        return default
    return getattr(config, name, default)
