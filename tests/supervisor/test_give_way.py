"""An actor busy with many messages lets other threads take the interpreter lock, while
an urgent call is in progress or lingers (``supervisor.urgent``)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from lock_watch import LockWatcher, lock_watcher

import supervisor as sv
from supervisor import _actor


class Busy(sv.SupervisedActor):
    """Notes, at "start" and "end", how often a thread beside it has run."""

    def __init__(self, gate: threading.Event, seen: list[int], runs: Callable[[], int]) -> None:
        super().__init__()
        self.gate = gate
        self.seen = seen
        self.runs = runs

    def on_receive(self, message: Any) -> Any:
        if message == "block":
            self.gate.wait(10)
        elif message in ("start", "end"):
            self.seen.append(self.runs())
        else:
            sum(range(50))  # a little pure-Python work, no lock released
        return message


class Sometimes(Busy):
    yield_every_s = 3600.0


class Always(Busy):
    yield_every_s = 0.0


class Never(Busy):
    yield_every_s = None


@pytest.fixture(autouse=True)
def _no_urgency_left(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test starts with no urgent call and none lingering, and leaves none behind."""
    monkeypatch.setattr(_actor, "_URGENT", _actor._Urgent())


def _gives_way(
    cls: type[Busy], monkeypatch: pytest.MonkeyPatch, messages: int, *, urgent: bool = True
) -> int:
    calls: list[None] = []
    monkeypatch.setattr(_actor, "_give_way", lambda: calls.append(None))
    ref = cls.start(threading.Event(), [], lambda: 0)
    try:
        if urgent:
            with sv.urgent():
                for _ in range(messages):
                    ref.tell("work")
                ref.ask("end", timeout=10)
        else:
            for _ in range(messages):
                ref.tell("work")
            ref.ask("end", timeout=10)
    finally:
        sv.stop(ref, timeout=10)
    return len(calls)


def test_an_actor_gives_way_at_most_every_yield_every_s(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _gives_way(Always, monkeypatch, 200) >= 201  # after every message
    assert _gives_way(Sometimes, monkeypatch, 200) == 0  # not within the hour
    assert _gives_way(Never, monkeypatch, 200) == 0
    assert sv.SupervisedActor.yield_every_s == _actor.YIELD_EVERY_S == 0.0005


def test_an_actor_gives_way_only_while_a_call_is_urgent(monkeypatch: pytest.MonkeyPatch) -> None:
    assert sv.urgent_calls() == 0
    assert _gives_way(Always, monkeypatch, 200, urgent=False) == 0  # bulk: back to back
    with sv.urgent(), sv.urgent():  # nests
        assert sv.urgent_calls() == 2
    assert sv.urgent_calls() == 0
    assert _gives_way(Always, monkeypatch, 200, urgent=False) == 0  # nothing lingers


def test_an_urgent_call_ended_by_an_error_is_no_longer_counted() -> None:
    with pytest.raises(RuntimeError), sv.urgent():
        raise RuntimeError("the call failed")
    assert sv.urgent_calls() == 0


def test_yields_go_on_while_an_urgent_call_lingers(monkeypatch: pytest.MonkeyPatch) -> None:
    with sv.urgent(linger=3600.0):
        pass
    assert sv.urgent_calls() == 0  # ended, but lingers for an hour
    assert _gives_way(Always, monkeypatch, 200, urgent=False) >= 201
    # A later call with a shorter linger does not cut the longer one short.
    with sv.urgent(linger=0.0):
        pass
    assert _gives_way(Always, monkeypatch, 50, urgent=False) >= 51


class Tenth(Busy):
    yield_every_s = 0.05


def test_time_spent_waiting_for_a_message_is_not_busy_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[None] = []
    monkeypatch.setattr(_actor, "_give_way", lambda: calls.append(None))
    ref = Tenth.start(threading.Event(), [], lambda: 0)
    try:
        with sv.urgent():
            for _ in range(5):
                time.sleep(0.1)  # the actor waits for its next message: it holds no lock
                ref.ask("ping", timeout=10)
    finally:
        sv.stop(ref, timeout=10)
    assert calls == []


@pytest.fixture
def waiting_thread() -> Iterator[LockWatcher]:
    """A thread that only runs when others let go of the interpreter lock
    (``tests/lock_watch.py``)."""
    with lock_watcher() as watcher:
        yield watcher


def _runs_beside(cls: type[Busy], watcher: LockWatcher) -> int:
    """How often the waiting thread ran while ``cls`` worked through a backlog queued
    before it began (so its inbox never ran dry, and it never blocked)."""
    gate, seen = threading.Event(), []
    ref = cls.start(gate, seen, lambda: watcher.runs)
    try:
        ref.tell("block")
        ref.tell("start")
        for _ in range(3000):
            ref.tell("work")
        end = ref.ask("end", block=False)
        gate.set()
        end.get(timeout=30)
    finally:
        sv.stop(ref, timeout=10)
    return seen[1] - seen[0]


def test_a_waiting_thread_runs_while_a_busy_actor_gives_way(
    waiting_thread: LockWatcher,
) -> None:
    with sv.urgent():
        assert _runs_beside(Never, waiting_thread) == 0
        # Whether the waiting thread wins the lock at a given moment is a race, so a few
        # backlogs are tried; one is plenty in practice.
        assert any(_runs_beside(Always, waiting_thread) > 0 for _ in range(5))


def test_a_busy_actor_keeps_the_lock_when_nothing_is_urgent(
    waiting_thread: LockWatcher,
) -> None:
    assert _runs_beside(Always, waiting_thread) == 0
