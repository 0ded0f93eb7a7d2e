"""An actor busy with many messages lets other threads take the interpreter lock, while
an urgent call is in progress or lingers (``supervisor.urgent``)."""

from __future__ import annotations

import contextlib
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


def _pauses(
    cls: type[Busy], monkeypatch: pytest.MonkeyPatch, messages: int, urgency: str
) -> tuple[int, int]:
    """How often ``cls`` gave way (``time.sleep(0)``) and stepped aside (waited for the
    urgent calls) over ``messages`` messages and an ask, with ``urgency`` "none", "now"
    (an urgent call in progress all along) or "lingers" (one ended, lingering)."""
    yields: list[None] = []
    asides: list[None] = []
    monkeypatch.setattr(_actor, "_give_way", lambda: yields.append(None))
    monkeypatch.setattr(_actor, "_step_aside", lambda: asides.append(None))
    if urgency == "lingers":
        with sv.urgent(linger=3600.0):
            pass
    ref = cls.start(threading.Event(), [], lambda: 0)
    try:
        with sv.urgent() if urgency == "now" else contextlib.nullcontext():
            for _ in range(messages):
                ref.tell("work")
            ref.ask("end", timeout=10)
    finally:
        sv.stop(ref, timeout=10)
    return len(yields), len(asides)


def test_an_actor_pauses_at_most_every_yield_every_s(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _pauses(Always, monkeypatch, 200, "lingers") >= (201, 0)  # after every message
    assert _pauses(Sometimes, monkeypatch, 200, "lingers") == (0, 0)  # not within the hour
    assert _pauses(Never, monkeypatch, 200, "lingers") == (0, 0)
    assert sv.SupervisedActor.yield_every_s == _actor.YIELD_EVERY_S == 0.0005


def test_an_actor_steps_aside_while_a_call_is_urgent_and_gives_way_while_it_lingers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    yields, asides = _pauses(Always, monkeypatch, 200, "now")
    assert yields == 0 and asides >= 201
    yields, asides = _pauses(Always, monkeypatch, 200, "lingers")
    assert yields >= 201 and asides == 0


def test_a_busy_actor_runs_back_to_back_when_nothing_is_urgent(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert sv.urgent_calls() == 0
    assert _pauses(Always, monkeypatch, 200, "none") == (0, 0)  # bulk: back to back
    with sv.urgent(), sv.urgent():  # nests
        assert sv.urgent_calls() == 2
    assert sv.urgent_calls() == 0
    assert _pauses(Always, monkeypatch, 200, "none") == (0, 0)  # nothing lingers


def test_an_urgent_call_ended_by_an_error_is_no_longer_counted() -> None:
    with pytest.raises(RuntimeError), sv.urgent():
        raise RuntimeError("the call failed")
    assert sv.urgent_calls() == 0


def test_a_shorter_linger_does_not_cut_a_longer_one_short(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with sv.urgent(linger=3600.0):
        pass
    with sv.urgent(linger=0.0):
        pass
    assert _pauses(Always, monkeypatch, 50, "none")[0] >= 51


def test_wait_while_urgent_waits_for_the_urgent_calls_in_progress() -> None:
    assert sv.wait_while_urgent(0.0) is True  # none: at once
    started, release = threading.Event(), threading.Event()

    def call() -> None:
        with sv.urgent(linger=3600.0):  # a lingering call is not waited for
            started.set()
            release.wait(10)

    t = threading.Thread(target=call)
    t.start()
    try:
        assert started.wait(10)
        assert sv.wait_while_urgent(0.01) is False  # still in progress
        threading.Timer(0.05, release.set).start()
        assert sv.wait_while_urgent(10) is True  # woken when it ends
        assert sv.urgent_calls() == 0
    finally:
        release.set()
        t.join(10)


class Tenth(Busy):
    yield_every_s = 0.05


def test_time_spent_waiting_for_a_message_is_not_busy_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[None] = []
    monkeypatch.setattr(_actor, "_give_way", lambda: calls.append(None))
    monkeypatch.setattr(_actor, "_step_aside", lambda: calls.append(None))
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


def _runs_beside(cls: type[Busy], watcher: LockWatcher, messages: int = 3000) -> int:
    """How often the waiting thread ran while ``cls`` worked through a backlog queued
    before it began (so its inbox never ran dry, and it never blocked)."""
    gate, seen = threading.Event(), []
    ref = cls.start(gate, seen, lambda: watcher.runs)
    try:
        ref.tell("block")
        ref.tell("start")
        for _ in range(messages):
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
    with sv.urgent(linger=3600.0):
        pass
    assert _runs_beside(Never, waiting_thread) == 0
    # Whether the waiting thread wins the lock at a given moment is a race, so a few
    # backlogs are tried; one is plenty in practice.
    assert any(_runs_beside(Always, waiting_thread) > 0 for _ in range(5))


def test_a_waiting_thread_runs_while_a_busy_actor_steps_aside(
    waiting_thread: LockWatcher,
) -> None:
    with sv.urgent():  # in progress all along: the actor waits up to URGENT_HOLD_S a message
        assert _runs_beside(Never, waiting_thread, 50) == 0
        assert _runs_beside(Always, waiting_thread, 50) > 0


def test_a_busy_actor_keeps_the_lock_when_nothing_is_urgent(
    waiting_thread: LockWatcher,
) -> None:
    assert _runs_beside(Always, waiting_thread) == 0


def test_an_actor_killed_while_it_steps_aside_leaves_urgency_working(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_actor, "URGENT_HOLD_S", 30.0)  # it would wait long: kill it there
    aside = threading.Event()
    step_aside = _actor._step_aside

    def noted() -> None:
        aside.set()
        step_aside()

    monkeypatch.setattr(_actor, "_step_aside", noted)
    ref = Always.start(threading.Event(), [], lambda: 0)
    try:
        with sv.urgent():
            ref.tell("work")
            assert aside.wait(10)
            sv.kill(ref, "killed while stepping aside")
            assert sv.wait_exit(ref, timeout=10) is not None
    finally:
        sv.stop(ref, timeout=10)
    # The condition's lock was not left held: urgent calls and waits go on working.
    assert sv.urgent_calls() == 0
    with sv.urgent():
        assert sv.urgent_calls() == 1
    assert sv.wait_while_urgent(0.0) is True
