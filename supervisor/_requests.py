"""The requests a supervisor answers, and the calls that send them and wait.

:func:`start_child`, :func:`terminate_child`, :func:`detach_child`, :func:`restart_child`,
:func:`which_children` and :func:`format_tree` ask a running
:class:`~supervisor.Supervisor`; :func:`stop` stops any supervised actor and waits.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pykka import ActorDeadError, ActorRef, Timeout

from ._actor import _actor_of, _life_of
from ._reason import ExitReason
from ._spec import ChildInfo, ChildKind, ChildSpec, Strategy

__all__ = [
    "DetachChild",
    "Describe",
    "Description",
    "RestartChild",
    "StartChild",
    "TerminateChild",
    "detach_child",
    "force",
    "format_tree",
    "request_stop",
    "restart_child",
    "start_child",
    "stop",
    "terminate_child",
    "which_children",
]


@dataclass(frozen=True, slots=True)
class StartChild:
    """Start ``spec`` as a new child (see :func:`start_child`)."""

    spec: ChildSpec


@dataclass(frozen=True, slots=True)
class TerminateChild:
    """Stop a child for good (see :func:`terminate_child`)."""

    child_id: str


@dataclass(frozen=True, slots=True)
class RestartChild:
    """Start a stopped child again (see :func:`restart_child`)."""

    child_id: str


@dataclass(frozen=True, slots=True)
class DetachChild:
    """Let go of a child without stopping it (see :func:`detach_child`)."""

    child_id: str


@dataclass(frozen=True, slots=True)
class Describe:
    """Ask for a :class:`Description`."""


@dataclass(frozen=True, slots=True)
class Description:
    """A supervisor's name, strategy and children (the answer to :class:`Describe`)."""

    name: str
    strategy: Strategy
    dynamic: bool
    children: tuple[ChildInfo, ...]


def start_child(
    sup_ref: ActorRef[Any], spec: ChildSpec, *, timeout: float | None = None
) -> ActorRef[Any]:
    """Start ``spec`` as a new child (appended last) and return its ref.

    Raises:
        TypeError: ``spec`` is not a ChildSpec.
        MaxChildrenError: a dynamic supervisor is at ``max_children``.
        SupervisorError: duplicate id, or the child failed to start.
        pykka.Timeout: no answer within ``timeout`` seconds.
    """
    if not isinstance(spec, ChildSpec):  # checked here: a TypeError would crash the supervisor
        msg = f"start_child needs a ChildSpec, got {spec!r}"
        raise TypeError(msg)
    ref: ActorRef[Any] = sup_ref.ask(StartChild(spec), block=True, timeout=timeout)
    return ref


def terminate_child(sup_ref: ActorRef[Any], child_id: str, *, timeout: float | None = None) -> None:
    """Stop a child (given its ``shutdown`` seconds, then forced) without restarting it.

    A dynamic supervisor (and any ``TEMPORARY`` child) forgets the child; a static
    supervisor keeps its spec with status ``stopped`` (see :func:`restart_child`).

    Raises:
        SupervisorError: no such child.
    """
    sup_ref.ask(TerminateChild(child_id), block=True, timeout=timeout)


def detach_child(
    sup_ref: ActorRef[Any], child_id: str, *, timeout: float | None = None
) -> ActorRef[Any] | None:
    """Remove a child from the supervisor without stopping it; return its running ref.

    The supervisor forgets the child at once (its spec too, as :func:`terminate_child` does
    in a dynamic supervisor) and neither restarts nor stops it any more: the caller owns
    it and must stop it (e.g. with :func:`stop`), in its own thread, so that slow stops
    never hold up the supervisor. Returns None if the child was not running (restarting
    or stopped).

    Raises:
        SupervisorError: no such child.
    """
    ref: ActorRef[Any] | None = sup_ref.ask(DetachChild(child_id), block=True, timeout=timeout)
    return ref


def restart_child(
    sup_ref: ActorRef[Any], child_id: str, *, timeout: float | None = None
) -> ActorRef[Any]:
    """Start again a stopped child of a static supervisor; return its new ref.

    Raises:
        SupervisorError: no such child, it is not stopped, or it failed to start.
    """
    ref: ActorRef[Any] = sup_ref.ask(RestartChild(child_id), block=True, timeout=timeout)
    return ref


def which_children(sup_ref: ActorRef[Any], *, timeout: float | None = None) -> list[ChildInfo]:
    """The supervisor's children in start order, with ref, status and restart count."""
    desc: Description = sup_ref.ask(Describe(), block=True, timeout=timeout)
    return list(desc.children)


def stop(ref: ActorRef[Any], timeout: float | None = None) -> ExitReason:
    """Stop a supervisor (or any SupervisedActor) with reason ``shutdown`` and wait.

    A supervisor first stops its children in reverse start order, each given its
    ``shutdown`` seconds and then forced. Returns the exit reason (which is not
    ``shutdown`` if the actor had already exited otherwise).

    Raises:
        TimeoutError: not stopped within ``timeout`` seconds (None: wait for ever).
    """
    life = _life_of(ref)
    request_stop(ref, ExitReason.shutdown())
    if not life.done.wait(timeout):
        msg = f"{ref} did not stop within {timeout} s"
        raise TimeoutError(msg)
    return life.exit or ExitReason.noproc()


def request_stop(ref: ActorRef[Any], reason: ExitReason) -> None:
    """Ask the actor at ``ref`` to stop with ``reason`` (after its queued messages)."""
    actor = _actor_of(ref)
    if actor is not None:  # else it is long gone
        actor._sv_request_stop(reason)


def force(ref: ActorRef[Any], reason: str) -> None:
    """Kill the actor at ``ref`` (see :func:`supervisor.kill`), ``reason`` saying why."""
    actor = _actor_of(ref)
    if actor is not None:
        actor._sv_kill(reason)


def format_tree(sup_ref: ActorRef[Any], *, timeout: float | None = 5.0) -> str:
    """A printable tree of the supervisor and, recursively, its child supervisors.

    Each line shows a child's id, kind, status and restart count, e.g.::

        root (one_for_one)
        ├── gateway [worker] running restarts=0
        └── users [supervisor] running restarts=1
            └── user:ann [supervisor] running restarts=0
    """
    desc: Description = sup_ref.ask(Describe(), block=True, timeout=timeout)
    kind = "dynamic" if desc.dynamic else desc.strategy.value
    lines = [f"{desc.name} ({kind})"]
    _format_children(desc.children, "", lines, timeout)
    return "\n".join(lines)


def _format_children(
    children: Sequence[ChildInfo], prefix: str, lines: list[str], timeout: float | None
) -> None:
    for i, child in enumerate(children):
        last = i == len(children) - 1
        name = f" name={child.name}" if child.name else ""
        lines.append(
            f"{prefix}{'└── ' if last else '├── '}{child.id} [{child.kind.value}] "
            f"{child.status} restarts={child.restarts}{name}"
        )
        if child.kind is ChildKind.SUPERVISOR and child.ref is not None:
            try:
                sub: Description = child.ref.ask(Describe(), block=True, timeout=timeout)
            except (ActorDeadError, Timeout):
                continue  # it went away meanwhile; its own line already says enough
            _format_children(sub.children, prefix + ("    " if last else "│   "), lines, timeout)
