"""The gateway actor: a thin pykka shell around a shared :class:`GatewayService`.

Several ``GatewayActor`` s (a pool) share one service, so caching, limits, the breaker and
embedding coalescing are global while calls run in parallel. Messages are frozen
dataclasses; the reply to an ``ask`` is the service's return value (a
:class:`~memoryos_actors.gateway.base.Completion` or an embedding array). Expected errors
(:class:`~memoryos_actors.errors.MemoryOSError`) are replies, not crashes.
"""

from __future__ import annotations

import copy
import itertools
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pykka

from memoryos_actors.errors import InvalidInput, MemoryOSError
from memoryos_actors.gateway.prompts import KINDS
from memoryos_actors.gateway.service import GatewayService

from supervisor import SupervisedActor

__all__ = ["Complete", "Embed", "GatewayActor", "GatewayPool"]


@dataclass(frozen=True, slots=True)
class Complete:
    """Ask for a structured completion of prompt ``kind`` (see ``gateway.prompts``).

    ``payload`` is deep-copied on construction so no mutable object is shared between
    actors; ``user_id`` is used for accounting only.
    """

    kind: str
    payload: dict[str, Any] = field(hash=False)
    user_id: str | None = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise InvalidInput(f"unknown prompt kind {self.kind!r}; expected one of {KINDS}")
        if not isinstance(self.payload, dict):
            raise InvalidInput("Complete.payload must be a dict")
        if self.user_id is not None and not isinstance(self.user_id, str):
            raise InvalidInput("Complete.user_id must be a str or None")
        object.__setattr__(self, "payload", copy.deepcopy(self.payload))


@dataclass(frozen=True, slots=True)
class Embed:
    """Ask for embeddings of ``texts`` (a tuple of str; a list is converted)."""

    texts: tuple[str, ...]

    def __post_init__(self) -> None:
        if isinstance(self.texts, str):
            raise InvalidInput("Embed.texts must be a sequence of str, not a str")
        texts = tuple(self.texts)
        if not all(isinstance(t, str) for t in texts):
            raise InvalidInput("Embed.texts must contain only str")
        object.__setattr__(self, "texts", texts)


class GatewayActor(SupervisedActor):
    """Handles :class:`Complete` and :class:`Embed` by calling the shared service."""

    expected_errors = (MemoryOSError,)

    def __init__(self, service: GatewayService) -> None:
        super().__init__()
        self._service = service

    def on_receive(self, message: Any) -> Any:
        """Dispatch one message; anything but Complete/Embed is an :class:`InvalidInput`."""
        if isinstance(message, Complete):
            return self._service.complete(message.kind, message.payload, user_id=message.user_id)
        if isinstance(message, Embed):
            return self._service.embed(message.texts)
        raise InvalidInput(f"GatewayActor cannot handle {type(message).__name__}")


class GatewayPool:
    """``size`` gateway actors over one service, used round-robin.

    The pool does not own the service: :meth:`stop` stops the actors only. Calls return
    pykka futures; ``future.get(timeout)`` gives the reply or raises its error.
    """

    def __init__(self, service: GatewayService, size: int = 2) -> None:
        if size < 1:
            raise InvalidInput("gateway pool size must be >= 1")
        self.service = service
        self.refs: list[pykka.ActorRef[Any]] = [GatewayActor.start(service) for _ in range(size)]
        self._next = itertools.count()
        self._lock = threading.Lock()

    def _ref(self) -> pykka.ActorRef[Any]:
        with self._lock:
            return self.refs[next(self._next) % len(self.refs)]

    def complete(
        self, kind: str, payload: dict[str, Any], *, user_id: str | None = None
    ) -> pykka.Future[Any]:
        """Send :class:`Complete` to the next actor; the future yields a Completion."""
        return self._ref().ask(Complete(kind, payload, user_id), block=False)

    def embed(self, texts: Sequence[str]) -> pykka.Future[Any]:
        """Send :class:`Embed` to the next actor; the future yields an ``(n, dim)`` array."""
        return self._ref().ask(Embed(tuple(texts)), block=False)

    def stop(self, timeout: float | None = 5.0) -> None:
        """Stop every actor of the pool (waiting up to ``timeout`` seconds each)."""
        for ref in self.refs:
            ref.stop(block=True, timeout=timeout)
