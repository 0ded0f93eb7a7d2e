"""Monitors, timers owned by actors, and the public API surface."""

from __future__ import annotations

import queue
import threading
import weakref
from typing import Any

import pykka
import pytest
from pykka import ActorRef
from svhelpers import Crash, Worker
from waiting import wait_until

import supervisor as sv


class Inbox(sv.SupervisedActor):
    """Collects every message it receives into a queue."""

    def __init__(self, sink: queue.Queue[Any]) -> None:
        super().__init__()
        self.sink = sink

    def on_receive(self, message: Any) -> Any:
        self.sink.put(message)
        return None


def test_monitor_callback_is_told_once_with_the_crash_reason() -> None:
    calls: queue.Queue[tuple[ActorRef[Any], sv.ExitReason]] = queue.Queue()
    ref = Worker.start()
    sv.monitor(ref, lambda r, reason: calls.put((r, reason)))
    ref.tell("crash")
    stopped, reason = calls.get(timeout=5)
    assert stopped is ref and reason.kind == "crash" and isinstance(reason.exception, Crash)
    sv.wait_exit(ref, timeout=5)
    assert calls.empty()


def test_monitoring_actor_receives_a_down_message() -> None:
    sink: queue.Queue[Any] = queue.Queue()
    watcher = Inbox.start(sink)
    ref = Worker.start()
    handle = sv.monitor(ref, watcher)
    sv.kill(ref, "bye")
    down = sink.get(timeout=5)
    assert down == sv.Down(ref, sv.ExitReason.killed("bye"), handle)
    sv.stop(watcher, timeout=5)


def test_demonitor_stops_the_notification() -> None:
    calls: list[sv.ExitReason] = []
    ref = Worker.start()
    handle = sv.monitor(ref, lambda r, reason: calls.append(reason))
    assert sv.demonitor(handle) is True
    assert sv.demonitor(handle) is False
    sv.stop(ref, timeout=5)
    assert calls == []


def test_monitoring_an_already_stopped_actor_reports_at_once() -> None:
    ref = Worker.start()
    ref.stop()
    sv.wait_exit(ref, timeout=5)
    calls: list[sv.ExitReason] = []
    sv.monitor(ref, lambda r, reason: calls.append(reason))
    assert calls == [sv.ExitReason.normal()]


def test_monitor_refuses_plain_pykka_actors() -> None:
    ref = pykka.ThreadingActor.start()
    try:
        with pytest.raises(TypeError):
            sv.monitor(ref, lambda r, reason: None)
    finally:
        ref.stop()


def test_send_after_delivers_once_and_send_interval_repeats() -> None:
    sink: queue.Queue[Any] = queue.Queue()
    ref = Inbox.start(sink)
    sv.send_after(ref, 0.01, "once")
    ticker = sv.send_interval(ref, 0.01, "tick")
    assert sink.get(timeout=5) in ("once", "tick")
    got = [sink.get(timeout=5) for _ in range(4)]
    assert got.count("tick") >= 3
    assert ticker.active and ticker.cancel() is True and not ticker.active
    sv.stop(ref, timeout=5)
    wait_until(lambda: sv.active_timer_count() == 0, "every timer to be cancelled")


def test_cancelled_timer_never_fires() -> None:
    sink: queue.Queue[Any] = queue.Queue()
    ref = Inbox.start(sink)
    timer = sv.send_after(ref, 0.2, "late")
    assert timer.cancel() is True
    sv.send_after(ref, 0.3, "marker")
    assert sink.get(timeout=5) == "marker"
    sv.stop(ref, timeout=5)


class _Note:
    """A timer message that a weak reference can watch."""


def test_cancelled_timers_do_not_keep_their_messages_until_due() -> None:
    sink: queue.Queue[Any] = queue.Queue()
    ref = Inbox.start(sink)
    notes = [_Note() for _ in range(2000)]
    timers = [sv.send_after(ref, 60.0, note) for note in notes]
    watch = [weakref.ref(note) for note in notes]
    keep = sv.send_after(ref, 60.0, "kept")
    del notes
    for timer in timers:
        assert timer.cancel() is True
    del timers
    # Cancelled an hour early: their heap entries (and so their messages) are gone, not
    # waiting for their due time; the timers still active work as before.
    assert sum(w() is not None for w in watch) < 300
    sv.send_after(ref, 0.05, "marker")
    assert sink.get(timeout=5) == "marker"
    assert keep.active and keep.cancel() is True
    sv.stop(ref, timeout=5)


def test_timers_are_cancelled_when_their_owner_stops_and_the_thread_exits() -> None:
    sink: queue.Queue[Any] = queue.Queue()
    ref = Inbox.start(sink)
    timers = [sv.send_interval(ref, 30.0, "never"), sv.send_after(ref, 30.0, "never")]
    assert sv.active_timer_count() == 2
    assert any(t.name == "supervisor-timers" for t in threading.enumerate())
    sv.kill(ref, "owner gone")
    assert not any(t.active for t in timers)
    assert sv.active_timer_count() == 0
    wait_until(
        lambda: not any(t.name == "supervisor-timers" for t in threading.enumerate()),
        "the timer thread to exit",
    )


def test_public_api_exports_exactly_the_documented_names() -> None:
    assert sorted(sv.__all__) == sorted(
        [
            "Backoff", "ChildInfo", "ChildKind", "ChildSpec", "ChildStatus", "Down",
            "DynamicSupervisor", "ExitCallback", "ExitKind", "ExitReason", "Killed",
            "MaxChildrenError", "MonitorRef", "Registry", "Restart",
            "RestartIntensityExceeded", "SafeCondition", "SafeEvent", "SafeFuture",
            "Strategy",
            "SupervisedActor", "Supervisor",
            "SupervisorError", "TimerRef", "active_timer_count", "demonitor", "detach_child", "exit_reason",
            "format_tree", "kill", "monitor", "restart_child", "send_after", "send_interval",
            "start_child", "stop", "terminate_child", "urgent", "urgent_calls", "wait_exit",
            "wait_while_urgent", "which_children",
        ]
    )  # fmt: skip
    aliases = {"ChildStatus", "ExitKind", "ExitCallback"}  # typing aliases carry no __doc__
    for name in set(sv.__all__) - aliases:
        assert getattr(sv, name).__doc__, f"{name} has no docstring"
