"""Child specifications, strategies, restart types, backoff and child introspection."""

from __future__ import annotations

import enum
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from pykka import ActorRef

from ._reason import ExitReason

__all__ = ["Backoff", "ChildInfo", "ChildKind", "ChildSpec", "ChildStatus", "Restart", "Strategy"]


class Restart(enum.Enum):
    """When a supervisor restarts a child that exited.

    - ``PERMANENT``: always, whatever the reason.
    - ``TRANSIENT``: only after an abnormal exit (``crash`` or ``killed``); after a
      ``normal`` or ``shutdown`` exit it stays stopped.
    - ``TEMPORARY``: never, not even when a sibling's restart (``ONE_FOR_ALL``,
      ``REST_FOR_ONE``) stops it: it is then removed from the supervisor.
    """

    PERMANENT = "permanent"
    TRANSIENT = "transient"
    TEMPORARY = "temporary"

    def restarts_after(self, reason: ExitReason) -> bool:
        """Whether a child of this type is restarted after exiting with ``reason``."""
        if self is Restart.PERMANENT:
            return True
        if self is Restart.TRANSIENT:
            return reason.abnormal
        return False


class Strategy(enum.Enum):
    """What a supervisor restarts when a child is to be restarted.

    - ``ONE_FOR_ONE``: only that child.
    - ``ONE_FOR_ALL``: every child: the others are stopped in reverse start order, then
      all are started again in start order (``TEMPORARY`` ones are removed instead).
    - ``REST_FOR_ONE``: that child and the children started after it: those are stopped
      in reverse start order, then restarted with it in start order.
    """

    ONE_FOR_ONE = "one_for_one"
    ONE_FOR_ALL = "one_for_all"
    REST_FOR_ONE = "rest_for_one"


class ChildKind(enum.Enum):
    """Whether a child is a worker or itself a supervisor (shown in trees, recursed into)."""

    WORKER = "worker"
    SUPERVISOR = "supervisor"


ChildStatus = Literal["running", "restarting", "stopped"]


@dataclass(frozen=True, slots=True)
class ChildSpec:
    """How to start, restart and stop one child.

    Attributes:
        id: unique among the supervisor's children.
        start: called in the supervisor's thread for the first start and every restart;
            returns a started ref to a ``SupervisedActor`` (``Supervisor.start`` returns
            one). The supervisor waits until the child's ``on_start`` has returned; an
            exception from ``start`` or ``on_start`` is a failed start.
        restart: the restart type.
        shutdown: seconds the child is given to stop (after its queued messages) before
            it is forced (see :func:`supervisor.kill`); 0 forces at once.
        kind: worker or supervisor.
        name: if set, registered in the supervisor's registry on every start so it always
            resolves to the current ref, and removed when the child exits.
    """

    id: str
    start: Callable[[], ActorRef[Any]]
    restart: Restart = Restart.PERMANENT
    shutdown: float = 5.0
    kind: ChildKind = ChildKind.WORKER
    name: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.id, str) or not self.id:
            msg = f"ChildSpec.id must be a non-empty str, got {self.id!r}"
            raise ValueError(msg)
        if not callable(self.start):
            msg = f"ChildSpec.start must be callable, got {self.start!r}"
            raise TypeError(msg)
        if not self.shutdown >= 0:
            msg = f"ChildSpec.shutdown must be >= 0 seconds, got {self.shutdown!r}"
            raise ValueError(msg)


@dataclass(frozen=True)
class Backoff:
    """Exponential restart delay with jitter.

    The n-th consecutive restart of a child (n from 0) waits
    ``min(max_delay, initial * factor**n)`` seconds, multiplied by a uniform factor in
    ``[1 - jitter, 1 + jitter]``. A child that ran at least ``reset_after`` seconds before
    exiting starts again from n = 0. Randomness comes from ``rng`` if given, else from a
    ``random.Random(seed)`` made per supervisor, so runs are reproducible.
    """

    initial: float = 0.01
    factor: float = 2.0
    max_delay: float = 5.0
    jitter: float = 0.1
    reset_after: float = 10.0
    seed: int | None = 0
    rng: random.Random | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.initial < 0 or self.max_delay < 0 or self.reset_after < 0:
            msg = "Backoff initial, max_delay and reset_after must be >= 0 seconds"
            raise ValueError(msg)
        if self.factor < 1:
            msg = f"Backoff.factor must be >= 1, got {self.factor}"
            raise ValueError(msg)
        if not 0 <= self.jitter <= 1:
            msg = f"Backoff.jitter must be within [0, 1], got {self.jitter}"
            raise ValueError(msg)

    def make_rng(self) -> random.Random:
        """The random source a supervisor uses for this backoff."""
        return self.rng if self.rng is not None else random.Random(self.seed)

    def delay(self, attempt: int, rng: random.Random) -> float:
        """Seconds to wait before consecutive restart number ``attempt`` (from 0)."""
        base = min(self.max_delay, self.initial * self.factor ** min(attempt, 64))
        if self.jitter == 0:
            return base
        return base * (1.0 + self.jitter * (2.0 * rng.random() - 1.0))


@dataclass(frozen=True, slots=True)
class ChildInfo:
    """One child as seen by ``which_children``.

    Attributes:
        id: the child's id.
        ref: its current ref; None while restarting or stopped.
        status: ``running``, ``restarting`` (waiting for a backoff delay or a retry) or
            ``stopped`` (a static child that exited and is not restarted).
        restarts: how many times the supervisor has restarted it (for any reason).
        kind: worker or supervisor.
        restart: its restart type.
        name: its registry name, if any.
    """

    id: str
    ref: ActorRef[Any] | None
    status: ChildStatus
    restarts: int
    kind: ChildKind
    restart: Restart = Restart.PERMANENT
    name: str | None = None
