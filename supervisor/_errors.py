"""Errors raised by the supervisor package."""

from __future__ import annotations

__all__ = [
    "Killed",
    "MaxChildrenError",
    "RestartIntensityExceeded",
    "SupervisorError",
]


class _Fatal:
    """Marker mixin: an exception of this kind always crashes the actor.

    It is never treated as an expected error, even when it also subclasses one of the
    actor's ``expected_errors`` (``RestartIntensityExceeded`` is a ``SupervisorError``,
    which a supervisor otherwise replies with).
    """


class SupervisorError(Exception):
    """A supervisor request could not be carried out (duplicate id, unknown child,
    a child that failed to start, a supervisor that failed to start)."""


class MaxChildrenError(SupervisorError):
    """``start_child`` on a dynamic supervisor that already has ``max_children`` children."""


class RestartIntensityExceeded(_Fatal, SupervisorError):
    """A supervisor saw more than ``max_restarts`` restarts within ``max_seconds``.

    The supervisor stops all its children and then crashes with this exception, so its
    own supervisor's strategy applies (escalation up the tree).
    """


class Killed(_Fatal, Exception):
    """Raised inside an actor's thread by :func:`supervisor.kill`; also what an asker of
    the interrupted message receives. ``args[0]`` is the reason string."""

    @property
    def reason(self) -> str:
        """The reason given to :func:`supervisor.kill`."""
        return str(self.args[0]) if self.args else "killed"
