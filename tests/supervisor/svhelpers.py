"""Test actors and helpers for the supervisor tests."""

from __future__ import annotations

import contextlib
import threading
import time
from typing import Any

import pykka
from pykka import ActorRef

import supervisor as sv


class Journal:
    """A thread-safe list of ``(event, child_id)`` pairs, in the order they happened."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.events: list[tuple[str, str]] = []
        self.refs: dict[str, list[ActorRef[Any]]] = {}

    def add(self, event: str, child_id: str) -> None:
        with self._lock:
            self.events.append((event, child_id))

    def started(self, child_id: str, ref: ActorRef[Any]) -> None:
        with self._lock:
            self.refs.setdefault(child_id, []).append(ref)

    def take(self) -> list[tuple[str, str]]:
        with self._lock:
            out, self.events = self.events, []
            return out


class Crash(RuntimeError):
    """The unexpected error test workers raise on request."""


class Worker(sv.SupervisedActor):
    """Answers ``"ping"``; crashes, stops or spins on request; journals start and stop."""

    expected_errors = (ValueError,)

    def __init__(self, child_id: str = "w", journal: Journal | None = None) -> None:
        super().__init__()
        self.child_id = child_id
        self.journal = journal
        self.failures: list[BaseException] = []

    def on_start(self) -> None:
        if self.journal is not None:
            self.journal.add("start", self.child_id)

    def on_stop(self) -> None:
        if self.journal is not None:
            self.journal.add("stop", self.child_id)

    def on_failure(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if self.journal is not None:
            self.journal.add("failure", self.child_id)

    def on_receive(self, message: Any) -> Any:
        match message:
            case "ping":
                return "pong"
            case "crash":
                raise Crash(f"{self.child_id} crashed on purpose")
            case "invalid":
                raise ValueError("bad input")
            case "stop_self":
                self.actor_ref.stop(block=False)
                return None
            case ("spin", threading.Event() as release, threading.Event() as entered):
                # A long message made of Python bytecode (interruptible by kill).
                entered.set()
                while not release.is_set():
                    time.sleep(0.001)  # not a wait for the release: bytecode to kill in
                return "spun"
            case ("count", int() as n):
                return n + 1
        return super().on_receive(message)


class FailingStart(sv.SupervisedActor):
    """Raises in on_start."""

    def on_start(self) -> None:
        raise Crash("cannot start")


def worker_spec(
    child_id: str,
    journal: Journal | None = None,
    *,
    restart: sv.Restart = sv.Restart.PERMANENT,
    shutdown: float = 5.0,
    name: str | None = None,
) -> sv.ChildSpec:
    """A ChildSpec starting a :class:`Worker` that journals into ``journal``."""

    def start() -> ActorRef[Any]:
        ref = Worker.start(child_id, journal)
        if journal is not None:
            journal.started(child_id, ref)
        return ref

    return sv.ChildSpec(child_id, start, restart=restart, shutdown=shutdown, name=name)


def child_refs(sup: ActorRef[Any]) -> dict[str, ActorRef[Any] | None]:
    """Child id -> current ref."""
    return {c.id: c.ref for c in sv.which_children(sup, timeout=10)}


def crash_and_settle(sup: ActorRef[Any], child_id: str) -> sv.ExitReason:
    """Crash a child with a tell and wait until its supervisor has handled the exit."""
    ref = child_refs(sup)[child_id]
    assert ref is not None
    ref.tell("crash")
    return settle(sup, ref)


def settle(sup: ActorRef[Any], ref: ActorRef[Any]) -> sv.ExitReason:
    """Wait until ``ref`` exited and ``sup`` has processed the exit (if it is alive)."""
    reason = sv.wait_exit(ref, timeout=10)
    assert reason is not None, f"{ref} did not exit"
    if sup.is_alive():
        # Queued after the exit notice; the supervisor may escalate on it meanwhile.
        with contextlib.suppress(pykka.ActorDeadError):
            sv.which_children(sup, timeout=10)
    return reason


class ManualClock:
    """A settable monotonic clock for intensity windows and backoff resets."""

    def __init__(self, t: float = 0.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t

    def advance(self, seconds: float) -> None:
        self.t += seconds
