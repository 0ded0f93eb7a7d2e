"""Monitors: be told once, with the reason, when an actor stops."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import structlog
from pykka import ActorDeadError, ActorRef

from ._actor import _life_of
from ._reason import ExitReason

__all__ = ["Down", "MonitorRef", "demonitor", "monitor"]

_log = structlog.get_logger("supervisor")


class MonitorRef:
    """Handle returned by :func:`monitor`; pass it to :func:`demonitor` (or call
    :meth:`cancel`) to stop being told."""

    __slots__ = ("_life", "_token", "ref")

    def __init__(self, ref: ActorRef[Any]) -> None:
        self.ref = ref
        """The monitored actor."""
        self._life: Any = None
        self._token: int | None = None

    def cancel(self) -> bool:
        """Stop the notification; True if it had not been delivered yet."""
        life, token = self._life, self._token
        if life is None or token is None:
            return False
        self._token = None
        return bool(life.unwatch(token))

    def __repr__(self) -> str:
        return f"<MonitorRef of {self.ref}>"


@dataclass(frozen=True, slots=True)
class Down:
    """Message told to a monitoring actor when the monitored actor stops."""

    ref: ActorRef[Any]
    """The actor that stopped."""
    reason: ExitReason
    """Why it stopped."""
    monitor: MonitorRef
    """The handle :func:`monitor` returned."""


def monitor(
    ref: ActorRef[Any],
    target: Callable[[ActorRef[Any], ExitReason], None] | ActorRef[Any],
) -> MonitorRef:
    """Tell ``target`` once when the SupervisedActor behind ``ref`` stops.

    ``target`` is either a callback ``(ref, reason) -> None`` or an actor ref, which is
    told a :class:`Down` message. If the actor has already stopped, ``target`` is told at
    once. Callbacks run in the thread
    that ends the actor (its own thread, or the caller of :func:`supervisor.kill`): keep
    them short and never block on the stopped actor. An exception from a callback is
    logged and ignored.

    Raises:
        TypeError: ``ref`` is not a SupervisedActor.
    """
    handle = MonitorRef(ref)
    callback: Callable[[ActorRef[Any], ExitReason], None]
    if isinstance(target, ActorRef):
        watcher = target

        def callback(stopped: ActorRef[Any], reason: ExitReason) -> None:
            try:
                watcher.tell(Down(stopped, reason, handle))
            except ActorDeadError:
                _log.debug("monitor_target_dead", actor=str(stopped), target=str(watcher))

    else:
        callback = target
    life = _life_of(ref)
    handle._life = life
    handle._token = life.watch(ref, callback)
    return handle


def demonitor(handle: MonitorRef) -> bool:
    """Cancel a monitor; True if its notification had not been delivered yet."""
    return handle.cancel()
