"""Supervisor: starts children in order, restarts them per strategy, escalates.

Restart intensity: every restart decision is counted; when more than ``max_restarts``
happened within the last ``max_seconds`` seconds, the supervisor stops all its children
(reverse start order) and crashes with :class:`RestartIntensityExceeded`, so its own
supervisor's strategy applies (escalation up the tree). A failed restart attempt counts
as another restart.

Shutdown: children stop in reverse start order; each is asked to stop after its queued
messages and given its ``ChildSpec.shutdown`` seconds, then *forced*: the child is killed
(see :func:`supervisor.kill`): reported ``killed`` at once, ``Killed`` raised in its thread
when that thread next runs Python bytecode, and otherwise abandoned; shutdown goes on to
the next child without waiting for the abandoned thread.
"""

from __future__ import annotations

import itertools
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import structlog
from pykka import ActorDeadError, ActorRef

from ._actor import ExitCallback, SupervisedActor, _life_of
from ._errors import MaxChildrenError, RestartIntensityExceeded, SupervisorError
from ._reason import ExitReason
from ._registry import Registry
from ._requests import (
    Describe,
    Description,
    DetachChild,
    RestartChild,
    StartChild,
    TerminateChild,
    force,
    request_stop,
)
from ._spec import Backoff, ChildInfo, ChildSpec, ChildStatus, Restart, Strategy
from ._timers import send_after

__all__ = ["Supervisor"]

_log = structlog.get_logger("supervisor")
_names = itertools.count(1)


# ---------------------------------------------------------------- private messages


@dataclass(frozen=True, slots=True)
class _ChildExit:
    ref: ActorRef[Any]
    reason: ExitReason


@dataclass(frozen=True, slots=True)
class _RestartDue:
    ids: tuple[str, ...]


class _StartFailed(Exception):
    def __init__(self, reason: ExitReason, cause: BaseException | None) -> None:
        super().__init__(str(reason))
        self.reason = reason
        self.cause = cause


class _Child:
    """Mutable bookkeeping for one child; touched only in the supervisor's thread."""

    __slots__ = ("attempt", "ref", "restarts", "spec", "started_at", "status")

    def __init__(self, spec: ChildSpec) -> None:
        self.spec = spec
        self.ref: ActorRef[Any] | None = None
        self.status: ChildStatus = "stopped"
        self.restarts = 0
        self.attempt = 0
        self.started_at = 0.0

    def info(self) -> ChildInfo:
        s = self.spec
        return ChildInfo(s.id, self.ref, self.status, self.restarts, s.kind, s.restart, s.name)


# ---------------------------------------------------------------------- the actor


class Supervisor(SupervisedActor):
    """An OTP-style supervisor with static children, a strategy and restart intensity.

    Start it with :meth:`start`, never by constructing it. It is itself a SupervisedActor,
    so its ref can be a child of another supervisor (``ChildKind.SUPERVISOR``); children
    of a nested supervisor share the registry passed to it. Talk to it through the module
    functions ``start_child``, ``terminate_child``, ``restart_child``, ``which_children``,
    ``stop`` and ``format_tree``.

    See the module docstring for restart intensity and shutdown, :class:`Strategy` and
    :class:`Restart` for what is restarted when.
    """

    expected_errors: ClassVar[tuple[type[BaseException], ...]] = (SupervisorError,)
    _dynamic: ClassVar[bool] = False

    def __init__(
        self,
        children: Sequence[ChildSpec] = (),
        *,
        strategy: Strategy = Strategy.ONE_FOR_ONE,
        max_restarts: int = 3,
        max_seconds: float = 5.0,
        backoff: Backoff | None = None,
        registry: Registry | None = None,
        name: str | None = None,
        clock: Callable[[], float] | None = None,
        max_children: int | None = None,
    ) -> None:
        super().__init__()
        specs = tuple(children)
        for spec in specs:
            if not isinstance(spec, ChildSpec):
                msg = f"children must be ChildSpec objects, got {spec!r}"
                raise TypeError(msg)
        ids = [spec.id for spec in specs]
        dupes = sorted({i for i in ids if ids.count(i) > 1})
        if dupes:
            msg = f"duplicate child ids: {', '.join(dupes)}"
            raise SupervisorError(msg)
        if not isinstance(strategy, Strategy):
            msg = f"strategy must be a Strategy, got {strategy!r}"
            raise TypeError(msg)
        if max_restarts < 0 or max_seconds <= 0:
            msg = f"need max_restarts >= 0 and max_seconds > 0, got {max_restarts}, {max_seconds}"
            raise ValueError(msg)
        if max_children is not None and max_children < 0:
            msg = f"max_children must be >= 0, got {max_children}"
            raise ValueError(msg)
        self.name = name if name is not None else f"{type(self).__name__}-{next(_names)}"
        self._specs = specs
        self._strategy = strategy
        self._max_restarts = max_restarts
        self._max_seconds = max_seconds
        self._backoff = backoff
        self._rng = backoff.make_rng() if backoff is not None else None
        self._registry = registry
        self._register_self = name is not None and registry is not None
        self._clock = clock if clock is not None else time.monotonic
        self._max_children = max_children
        self._children: list[_Child] = []  # start order
        self._by_id: dict[str, _Child] = {}
        self._by_urn: dict[str, _Child] = {}  # current incarnations only
        self._restart_times: deque[float] = deque()

    @classmethod
    def start(
        cls,
        children: Sequence[ChildSpec] = (),
        *,
        strategy: Strategy = Strategy.ONE_FOR_ONE,
        max_restarts: int = 3,
        max_seconds: float = 5.0,
        backoff: Backoff | None = None,
        registry: Registry | None = None,
        name: str | None = None,
        clock: Callable[[], float] | None = None,
    ) -> ActorRef[Any]:
        """Start a supervisor and its children (in order); return once all have started.

        Args:
            children: the child specs, in start order.
            strategy: what is restarted with a failed child.
            max_restarts: restarts allowed within ``max_seconds`` before escalating.
            max_seconds: the intensity window, seconds.
            backoff: optional delay before restarts; None restarts at once.
            registry: where children's ``ChildSpec.name``\\ s (and this supervisor's
                ``name``) are registered; shared with nested supervisors by passing it on.
            name: label in logs and trees; registered in ``registry`` if both are given.
            clock: monotonic seconds for the intensity window and backoff reset
                (default ``time.monotonic``).

        Raises:
            SupervisorError: a child failed to start (those already started were stopped
                in reverse order), or duplicate ids.
        """
        return cls._launch(
            children,
            strategy=strategy,
            max_restarts=max_restarts,
            max_seconds=max_seconds,
            backoff=backoff,
            registry=registry,
            name=name,
            clock=clock,
        )

    @classmethod
    def _launch(cls, *args: Any, **kwargs: Any) -> ActorRef[Any]:
        ref: ActorRef[Any] = super().start(*args, **kwargs)
        life = _life_of(ref)
        life.ready.wait()
        if not life.started_ok:
            life.done.wait()
            reason = life.exit or ExitReason.noproc()
            if isinstance(reason.exception, SupervisorError):
                raise reason.exception
            msg = f"supervisor {ref} failed to start: {reason}"
            raise SupervisorError(msg) from reason.exception
        return ref

    # ------------------------------------------------------------- lifecycle

    def on_start(self) -> None:
        if self._register_self:
            assert self._registry is not None and self.name is not None
            self._registry.register(self.name, self.actor_ref)
        for spec in self._specs:
            child = _Child(spec)
            self._children.append(child)
            self._by_id[spec.id] = child
            try:
                self._start(child)
            except _StartFailed as failed:
                msg = f"child {spec.id!r} of {self.name} failed to start: {failed.reason}"
                raise SupervisorError(msg) from failed.cause
        _log.info(
            "supervisor_started",
            supervisor=self.name,
            strategy=self._strategy.value,
            children=[c.spec.id for c in self._children],
        )

    def _sv_cleanup(self) -> None:
        # Runs on every exit path (stop, crash, escalation, kill) and cannot be killed.
        for child in reversed(self._children):
            if child.ref is not None:
                self._shutdown(child, ExitReason.shutdown())
            child.status = "stopped"
        if self._register_self:
            assert self._registry is not None and self.name is not None
            self._registry.unregister(self.name, self.actor_ref)
        _log.info("supervisor_stopped", supervisor=self.name)
        self.on_exit()

    def on_receive(self, message: Any) -> Any:
        if isinstance(message, _ChildExit):
            self._handle_exit(message.ref, message.reason)
            return None
        if isinstance(message, _RestartDue):
            self._restart(message.ids)
            return None
        if isinstance(message, Describe):
            return Description(
                self.name,
                self._strategy,
                self._dynamic,
                tuple(c.info() for c in self._children),
            )
        if isinstance(message, StartChild):
            return self._start_child(message.spec)
        if isinstance(message, TerminateChild):
            self._terminate_child(message.child_id)
            return None
        if isinstance(message, RestartChild):
            return self._restart_child(message.child_id)
        if isinstance(message, DetachChild):
            return self._detach_child(message.child_id)
        return super().on_receive(message)

    # ---------------------------------------------------------- starting

    def _start(self, child: _Child) -> None:
        spec = child.spec
        try:
            ref = spec.start()
        except Exception as exc:
            raise _StartFailed(ExitReason.crash(exc), exc) from exc
        try:
            if not isinstance(ref, ActorRef):
                msg = f"ChildSpec.start of {spec.id!r} returned {ref!r}, not an ActorRef"
                raise TypeError(msg)
            life = _life_of(ref)
        except TypeError as exc:
            if isinstance(ref, ActorRef):
                ref.stop(block=False)
            raise _StartFailed(ExitReason.crash(exc), exc) from exc
        life.ready.wait()  # children start in order: wait for on_start, like OTP's init
        if not life.started_ok:
            life.done.wait()
            reason = life.exit or ExitReason.noproc()
            raise _StartFailed(reason, reason.exception)
        if spec.name is not None and self._registry is not None:
            try:
                self._registry.register(spec.name, ref)
            except SupervisorError as exc:
                force(ref, "name already taken")
                raise _StartFailed(ExitReason.crash(exc), exc) from exc
        child.ref = ref
        child.status = "running"
        child.started_at = self._clock()
        self._by_urn[ref.actor_urn] = child
        life.watch(ref, self._exit_hook(spec.name))
        _log.debug("child_started", supervisor=self.name, child=spec.id, ref=str(ref))

    def _exit_hook(self, name: str | None) -> ExitCallback:
        # Runs in the dying child's thread (or a killer's): unregister at once so lookups
        # never see a dead incarnation, then let the supervisor decide in its own thread.
        sup_ref = self.actor_ref
        registry = self._registry if name is not None else None

        def hook(ref: ActorRef[Any], reason: ExitReason) -> None:
            if registry is not None:
                assert name is not None
                registry.unregister(name, ref)
            try:
                sup_ref.tell(_ChildExit(ref, reason))
            except ActorDeadError:
                pass  # the supervisor is gone; its clean-up handles the children

        return hook

    # ------------------------------------------------------- exits and restarts

    def _handle_exit(self, ref: ActorRef[Any], reason: ExitReason) -> None:
        child = self._by_urn.pop(ref.actor_urn, None)
        if child is None or child.ref is not ref:
            return  # an incarnation we already stopped or replaced
        child.ref = None
        child.status = "stopped"
        spec = child.spec
        if reason.abnormal:
            _log.error("child_crashed", supervisor=self.name, child=spec.id, reason=str(reason))
        else:
            _log.info("child_exited", supervisor=self.name, child=spec.id, reason=str(reason))
        if not spec.restart.restarts_after(reason):
            if spec.restart is Restart.TEMPORARY or self._dynamic:
                self._remove(child)
            return
        self._count_restart(child, reason)
        group = self._group(child)
        # Children already stopped before this restart (terminated, or a TRANSIENT that
        # exited normally) stay stopped; running or restarting ones restart with it.
        again = [m for m in group if m is child or m.status != "stopped"]
        for other in reversed(group):
            if other is not child and other.ref is not None:
                self._shutdown(other, ExitReason.shutdown())
        for member in list(again):
            if member is not child and member.spec.restart is Restart.TEMPORARY:
                self._remove(member)  # never restarted, not even by a sibling's restart
                again.remove(member)
        for member in again:
            member.status = "restarting"
        self._schedule(child, tuple(m.spec.id for m in again), retry=False)

    def _group(self, child: _Child) -> list[_Child]:
        if self._strategy is Strategy.ONE_FOR_ONE:
            return [child]
        if self._strategy is Strategy.ONE_FOR_ALL:
            return list(self._children)
        return self._children[self._children.index(child) :]

    def _count_restart(self, child: _Child, reason: ExitReason) -> None:
        now = self._clock()
        times = self._restart_times
        times.append(now)
        while times and now - times[0] > self._max_seconds:
            times.popleft()
        if len(times) > self._max_restarts:
            msg = (
                f"{self.name}: more than {self._max_restarts} restarts within "
                f"{self._max_seconds} s (last: child {child.spec.id!r}, {reason})"
            )
            _log.error(
                "escalating",
                supervisor=self.name,
                child=child.spec.id,
                reason=str(reason),
                max_restarts=self._max_restarts,
                max_seconds=self._max_seconds,
            )
            raise RestartIntensityExceeded(msg)

    def _schedule(self, child: _Child, ids: tuple[str, ...], *, retry: bool) -> None:
        delay = 0.0
        if self._backoff is not None:
            assert self._rng is not None
            if not retry and self._clock() - child.started_at >= self._backoff.reset_after:
                child.attempt = 0
            delay = self._backoff.delay(child.attempt, self._rng)
            child.attempt += 1
        if delay > 0:
            _log.info(
                "restart_scheduled",
                supervisor=self.name,
                children=list(ids),
                delay_s=round(delay, 6),
            )
            send_after(self.actor_ref, delay, _RestartDue(ids))
        elif retry:
            # Through the inbox, so a stop or a query can get in between attempts.
            self.actor_ref.tell(_RestartDue(ids))
        else:
            self._restart(ids)

    def _restart(self, ids: tuple[str, ...]) -> None:
        for i, child_id in enumerate(ids):
            child = self._by_id.get(child_id)
            if child is None or child.status != "restarting":
                continue  # terminated or removed meanwhile, or already restarted
            try:
                self._start(child)
            except _StartFailed as failed:
                _log.error(
                    "restart_failed",
                    supervisor=self.name,
                    child=child_id,
                    reason=str(failed.reason),
                )
                self._count_restart(child, failed.reason)
                self._schedule(child, ids[i:], retry=True)
                return
            child.restarts += 1
            _log.info(
                "child_restarted",
                supervisor=self.name,
                child=child_id,
                restarts=child.restarts,
                ref=str(child.ref),
            )

    def _shutdown(self, child: _Child, reason: ExitReason) -> None:
        ref = child.ref
        assert ref is not None
        life = _life_of(ref)
        self._by_urn.pop(ref.actor_urn, None)
        child.ref = None
        child.status = "stopped"
        request_stop(ref, reason)
        if not life.done.wait(child.spec.shutdown):
            _log.warning(
                "child_forced",
                supervisor=self.name,
                child=child.spec.id,
                shutdown_s=child.spec.shutdown,
            )
            force(ref, f"shutdown timeout after {child.spec.shutdown} s")
        _log.info(
            "child_stopped",
            supervisor=self.name,
            child=child.spec.id,
            reason=str(life.exit),
        )

    def _remove(self, child: _Child) -> None:
        self._children.remove(child)
        del self._by_id[child.spec.id]
        _log.debug("child_removed", supervisor=self.name, child=child.spec.id)

    # --------------------------------------------------------- requests

    def _start_child(self, spec: ChildSpec) -> ActorRef[Any]:
        if spec.id in self._by_id:
            msg = f"{self.name} already has a child with id {spec.id!r}"
            raise SupervisorError(msg)
        if self._max_children is not None and len(self._children) >= self._max_children:
            msg = (
                f"{self.name} already has {len(self._children)} children "
                f"(max_children={self._max_children}); cannot start {spec.id!r}: "
                "terminate a child first or raise max_children"
            )
            raise MaxChildrenError(msg)
        child = _Child(spec)
        try:
            self._start(child)
        except _StartFailed as failed:
            msg = f"child {spec.id!r} of {self.name} failed to start: {failed.reason}"
            raise SupervisorError(msg) from failed.cause
        self._children.append(child)
        self._by_id[spec.id] = child
        assert child.ref is not None
        return child.ref

    def _terminate_child(self, child_id: str) -> None:
        child = self._by_id.get(child_id)
        if child is None:
            msg = f"{self.name} has no child {child_id!r}"
            raise SupervisorError(msg)
        if child.ref is not None:
            self._shutdown(child, ExitReason.shutdown())
        child.status = "stopped"
        if self._dynamic or child.spec.restart is Restart.TEMPORARY:
            self._remove(child)

    def _detach_child(self, child_id: str) -> ActorRef[Any] | None:
        child = self._by_id.get(child_id)
        if child is None:
            msg = f"{self.name} has no child {child_id!r}"
            raise SupervisorError(msg)
        ref = child.ref
        if ref is not None:
            self._by_urn.pop(ref.actor_urn, None)  # its exit is no longer ours to handle
        child.ref = None
        child.status = "stopped"
        self._remove(child)
        _log.info("child_detached", supervisor=self.name, child=child_id)
        return ref

    def _restart_child(self, child_id: str) -> ActorRef[Any]:
        child = self._by_id.get(child_id)
        if child is None:
            msg = f"{self.name} has no child {child_id!r}"
            raise SupervisorError(msg)
        if child.status != "stopped":
            msg = f"child {child_id!r} of {self.name} is {child.status}, not stopped"
            raise SupervisorError(msg)
        try:
            self._start(child)
        except _StartFailed as failed:
            msg = f"child {child_id!r} of {self.name} failed to start: {failed.reason}"
            raise SupervisorError(msg) from failed.cause
        child.restarts += 1
        assert child.ref is not None
        return child.ref
