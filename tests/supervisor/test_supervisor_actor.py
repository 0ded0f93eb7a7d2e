"""SupervisedActor failure semantics, exit reasons and kill."""

from __future__ import annotations

import threading

import pykka
import pytest
from svhelpers import Crash, FailingStart, Journal, Worker
from waiting import wait_until

import supervisor as sv


def test_crash_during_ask_reaches_asker_then_actor_stops_with_crash_reason() -> None:
    ref = Worker.start()
    with pytest.raises(Crash):
        ref.ask("crash", timeout=5)
    reason = sv.wait_exit(ref, timeout=5)
    assert reason is not None and reason.kind == "crash"
    assert isinstance(reason.exception, Crash)
    assert not ref.is_alive()


def test_crash_during_tell_stops_actor_and_runs_on_failure() -> None:
    journal = Journal()
    ref = Worker.start("w", journal)
    ref.tell("crash")
    reason = sv.wait_exit(ref, timeout=5)
    assert reason is not None and reason.kind == "crash" and reason.abnormal
    assert ("failure", "w") in journal.events
    assert ("stop", "w") not in journal.events


def test_messages_queued_behind_a_crash_get_actor_dead_error() -> None:
    release, entered = threading.Event(), threading.Event()
    ref = Worker.start()
    spinning = ref.ask(("spin", release, entered), block=False)
    entered.wait(5)
    crashing = ref.ask("crash", block=False)
    queued = ref.ask("ping", block=False)
    release.set()
    assert spinning.get(timeout=5) == "spun"
    with pytest.raises(Crash):
        crashing.get(timeout=5)
    with pytest.raises(pykka.ActorDeadError):
        queued.get(timeout=5)


def test_expected_error_goes_to_asker_and_actor_keeps_running() -> None:
    ref = Worker.start()
    with pytest.raises(ValueError, match="bad input"):
        ref.ask("invalid", timeout=5)
    assert ref.ask("ping", timeout=5) == "pong"
    sv.stop(ref, timeout=5)


def test_expected_error_during_tell_is_logged_not_a_crash(sv_logs: list[dict]) -> None:
    ref = Worker.start()
    ref.tell("invalid")
    assert ref.ask("ping", timeout=5) == "pong"
    assert any(e["event"] == "expected_error_dropped" for e in sv_logs)
    sv.stop(ref, timeout=5)


def test_exception_in_on_start_is_a_crash() -> None:
    ref = FailingStart.start()
    reason = sv.wait_exit(ref, timeout=5)
    assert reason is not None and reason.kind == "crash"
    assert isinstance(reason.exception, Crash)


def test_plain_stop_is_normal_and_supervisor_stop_is_shutdown() -> None:
    a, b = Worker.start(), Worker.start()
    a.stop()
    assert sv.wait_exit(a, timeout=5) == sv.ExitReason.normal()
    assert sv.stop(b, timeout=5) == sv.ExitReason.shutdown()


def test_kill_interrupts_a_long_message_and_the_asker_gets_killed() -> None:
    release, entered = threading.Event(), threading.Event()
    ref = Worker.start()
    future = ref.ask(("spin", release, entered), block=False)
    assert entered.wait(5)
    assert sv.kill(ref, "test kill") is True
    with pytest.raises(sv.Killed, match="test kill"):
        future.get(timeout=5)
    reason = sv.exit_reason(ref)
    assert reason == sv.ExitReason.killed("test kill")
    assert not release.is_set()  # the handler never finished on its own
    with pytest.raises(pykka.ActorDeadError):
        ref.tell("ping")


def test_kill_of_an_idle_actor_stops_it_without_handling_more() -> None:
    ref = Worker.start()
    assert ref.ask("ping", timeout=5) == "pong"
    sv.kill(ref)
    assert sv.wait_exit(ref, timeout=5) == sv.ExitReason.killed("killed")


def test_kill_after_exit_does_nothing() -> None:
    ref = Worker.start()
    sv.stop(ref, timeout=5)
    assert sv.kill(ref) is False
    assert sv.exit_reason(ref) == sv.ExitReason.shutdown()


def test_kill_refuses_plain_pykka_actors() -> None:
    class Plain(pykka.ThreadingActor):
        pass

    ref = Plain.start()
    try:
        with pytest.raises(TypeError, match="not a SupervisedActor"):
            sv.kill(ref)
    finally:
        ref.stop()


def test_proxy_calls_work_on_supervised_actors() -> None:
    class Counter(sv.SupervisedActor):
        def __init__(self) -> None:
            super().__init__()
            self.n = 0

        def bump(self) -> int:
            self.n += 1
            return self.n

    ref = Counter.start()
    proxy = ref.proxy()
    assert proxy.bump().get(timeout=5) == 1
    assert proxy.bump().get(timeout=5) == 2
    sv.stop(ref, timeout=5)


class _Waiter(sv.SupervisedActor):
    """Blocks inside a message on an Event of its own; the stop hook sets it."""

    def __init__(
        self, entered: threading.Event, wake: threading.Event, saw_stop: list[bool]
    ) -> None:
        super().__init__()
        self.entered = entered
        self.wake = wake
        self.saw_stop = saw_stop

    def on_stop_requested(self) -> None:
        self.wake.set()

    def on_receive(self, message: object) -> object:
        if message == "block":
            self.entered.set()
            self.wake.wait(30)
            self.saw_stop.append(self.stop_requested)
            return "woken"
        return None


@pytest.mark.parametrize("how", ["stop", "kill"])
def test_the_stop_hook_wakes_a_message_blocked_on_the_actors_own_wait(how: str) -> None:
    before = set(threading.enumerate())
    entered, wake, saw_stop = threading.Event(), threading.Event(), []
    ref = _Waiter.start(entered, wake, saw_stop)
    pending = ref.ask("block", block=False)
    assert entered.wait(5)
    if how == "stop":
        sv.stop(ref, timeout=5)  # returns only once the blocked message has ended
        assert pending.get(timeout=5) == "woken"
        assert saw_stop == [True]
    else:
        sv.kill(ref, "test")
        assert wake.wait(5)  # set by the hook: the abandoned thread is not left waiting
    assert sv.wait_exit(ref, timeout=5) is not None
    wait_until(lambda: not set(threading.enumerate()) - before, "the actor's thread to end")
