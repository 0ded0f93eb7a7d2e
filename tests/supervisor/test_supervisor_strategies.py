"""Strategies, restart types, intensity, escalation, backoff and shutdown."""

from __future__ import annotations

import random
import threading
from typing import Any

import pytest
from pykka import ActorRef
from svhelpers import (
    FailingStart,
    Journal,
    ManualClock,
    Worker,
    child_refs,
    crash_and_settle,
    settle,
    worker_spec,
)
from waiting import wait_until

import supervisor as sv


def start_abc(strategy: sv.Strategy, journal: Journal, **kw: Any) -> ActorRef[Any]:
    specs = [worker_spec(i, journal) for i in ("a", "b", "c")]
    return sv.Supervisor.start(specs, strategy=strategy, **kw)


def test_children_start_in_order_and_stop_in_reverse_order() -> None:
    journal = Journal()
    sup = start_abc(sv.Strategy.ONE_FOR_ONE, journal)
    assert journal.take() == [("start", "a"), ("start", "b"), ("start", "c")]
    assert sv.stop(sup, timeout=10) == sv.ExitReason.shutdown()
    assert journal.take() == [("stop", "c"), ("stop", "b"), ("stop", "a")]


def test_one_for_one_restarts_only_the_failed_child() -> None:
    journal = Journal()
    sup = start_abc(sv.Strategy.ONE_FOR_ONE, journal)
    before = child_refs(sup)
    journal.take()
    crash_and_settle(sup, "b")
    after = child_refs(sup)
    assert after["a"] is before["a"] and after["c"] is before["c"]
    assert after["b"] is not before["b"] and after["b"] is not None
    assert after["b"].ask("ping", timeout=5) == "pong"
    assert journal.take() == [("failure", "b"), ("start", "b")]
    assert {c.id: c.restarts for c in sv.which_children(sup)} == {"a": 0, "b": 1, "c": 0}
    sv.stop(sup, timeout=10)


def test_one_for_all_stops_others_in_reverse_then_restarts_all_in_order() -> None:
    journal = Journal()
    sup = start_abc(sv.Strategy.ONE_FOR_ALL, journal)
    before = child_refs(sup)
    journal.take()
    crash_and_settle(sup, "a")
    assert journal.take() == [
        ("failure", "a"),
        ("stop", "c"),
        ("stop", "b"),
        ("start", "a"),
        ("start", "b"),
        ("start", "c"),
    ]
    after = child_refs(sup)
    assert all(after[i] is not before[i] for i in "abc")
    assert all(c.restarts == 1 and c.status == "running" for c in sv.which_children(sup))
    sv.stop(sup, timeout=10)


def test_rest_for_one_restarts_the_failed_child_and_those_started_after_it() -> None:
    journal = Journal()
    sup = start_abc(sv.Strategy.REST_FOR_ONE, journal)
    before = child_refs(sup)
    journal.take()
    crash_and_settle(sup, "b")
    assert journal.take() == [("failure", "b"), ("stop", "c"), ("start", "b"), ("start", "c")]
    after = child_refs(sup)
    assert after["a"] is before["a"]
    assert after["b"] is not before["b"] and after["c"] is not before["c"]
    sv.stop(sup, timeout=10)


def test_permanent_child_is_restarted_even_after_a_normal_exit() -> None:
    sup = sv.Supervisor.start([worker_spec("p", restart=sv.Restart.PERMANENT)])
    old = child_refs(sup)["p"]
    assert old is not None
    old.tell("stop_self")
    assert settle(sup, old) == sv.ExitReason.normal()
    new = child_refs(sup)["p"]
    assert new is not None and new is not old and new.is_alive()
    sv.stop(sup, timeout=10)


def test_transient_child_restarts_after_a_crash_but_not_after_a_normal_exit() -> None:
    sup = sv.Supervisor.start([worker_spec("t", restart=sv.Restart.TRANSIENT)])
    crash_and_settle(sup, "t")
    (info,) = sv.which_children(sup)
    assert info.status == "running" and info.restarts == 1
    assert info.ref is not None
    info.ref.tell("stop_self")
    settle(sup, info.ref)
    (info,) = sv.which_children(sup)
    assert info.status == "stopped" and info.ref is None and info.restarts == 1
    sv.stop(sup, timeout=10)


def test_temporary_child_is_never_restarted_and_is_removed() -> None:
    sup = sv.Supervisor.start(
        [worker_spec("keep"), worker_spec("temp", restart=sv.Restart.TEMPORARY)]
    )
    crash_and_settle(sup, "temp")
    assert [c.id for c in sv.which_children(sup)] == ["keep"]
    sv.stop(sup, timeout=10)


@pytest.mark.parametrize("strategy", [sv.Strategy.ONE_FOR_ALL, sv.Strategy.REST_FOR_ONE])
def test_temporary_child_stopped_by_a_siblings_restart_is_removed_not_restarted(
    strategy: sv.Strategy,
) -> None:
    journal = Journal()
    sup = sv.Supervisor.start(
        [
            worker_spec("a", journal),
            worker_spec("temp", journal, restart=sv.Restart.TEMPORARY),
            worker_spec("c", journal),
        ],
        strategy=strategy,
    )
    temp = child_refs(sup)["temp"]
    journal.take()
    crash_and_settle(sup, "a")
    assert [c.id for c in sv.which_children(sup)] == ["a", "c"]
    assert temp is not None and sv.exit_reason(temp) == sv.ExitReason.shutdown()
    assert ("start", "temp") not in journal.take()
    sv.stop(sup, timeout=10)


def test_more_than_max_restarts_in_the_window_stops_children_and_fails_supervisor() -> None:
    clock = ManualClock()
    journal = Journal()
    sup = sv.Supervisor.start(
        [worker_spec("a", journal), worker_spec("b", journal)],
        max_restarts=3,
        max_seconds=5.0,
        clock=clock,
    )
    b = child_refs(sup)["b"]
    for _ in range(3):
        crash_and_settle(sup, "a")
        clock.advance(1.0)
    assert sup.is_alive()
    last = child_refs(sup)["a"]
    assert last is not None
    last.tell("crash")
    reason = sv.wait_exit(sup, timeout=10)
    assert reason is not None and reason.kind == "crash"
    assert isinstance(reason.exception, sv.RestartIntensityExceeded)
    assert b is not None and sv.exit_reason(b) == sv.ExitReason.shutdown()


def test_restarts_spread_beyond_the_window_do_not_escalate() -> None:
    clock = ManualClock()
    sup = sv.Supervisor.start([worker_spec("a")], max_restarts=1, max_seconds=5.0, clock=clock)
    for _ in range(5):
        crash_and_settle(sup, "a")
        clock.advance(5.5)
    assert sup.is_alive()
    assert sv.which_children(sup)[0].restarts == 5
    sv.stop(sup, timeout=10)


def test_escalation_climbs_three_levels_of_supervisors(sv_logs: list[dict[str, Any]]) -> None:
    registry = sv.Registry()

    def leaf() -> ActorRef[Any]:
        return sv.Supervisor.start(
            [worker_spec("worker", name="worker")],
            max_restarts=0,
            registry=registry,
            name="leaf",
        )

    def mid() -> ActorRef[Any]:
        return sv.Supervisor.start(
            [sv.ChildSpec("leaf", leaf, kind=sv.ChildKind.SUPERVISOR)],
            max_restarts=0,
            registry=registry,
            name="mid",
        )

    root = sv.Supervisor.start(
        [sv.ChildSpec("mid", mid, kind=sv.ChildKind.SUPERVISOR)],
        max_restarts=1,
        max_seconds=3600,
        registry=registry,
        name="root",
    )
    first_mid = registry.require("mid")
    first_leaf = registry.require("leaf")
    worker = registry.require("worker")
    worker.tell("crash")
    # worker crash -> leaf gives up -> mid gives up -> root restarts mid (1 of 1 allowed)
    assert sv.wait_exit(first_mid, timeout=10) is not None
    assert isinstance(sv.exit_reason(first_leaf).exception, sv.RestartIntensityExceeded)  # type: ignore[union-attr]
    assert isinstance(sv.exit_reason(first_mid).exception, sv.RestartIntensityExceeded)  # type: ignore[union-attr]
    sv.which_children(root, timeout=10)
    assert root.is_alive()
    wait_until(lambda: registry.lookup("worker") is not None, "the worker to be registered")
    new_mid = registry.require("mid")
    assert new_mid is not first_mid and new_mid.is_alive()
    tree = sv.format_tree(root)
    assert "mid [supervisor] running restarts=1" in tree
    assert "worker [worker] running restarts=0" in tree
    # A second failure exceeds root's own intensity: the whole tree stops.
    registry.require("worker").tell("crash")
    reason = sv.wait_exit(root, timeout=10)
    assert reason is not None and isinstance(reason.exception, sv.RestartIntensityExceeded)
    assert registry.names() == []
    escalations = [e["supervisor"] for e in sv_logs if e["event"] == "escalating"]
    assert escalations == ["leaf", "mid", "leaf", "mid", "root"]


def test_failed_restarts_count_toward_intensity() -> None:
    attempts = []

    def flaky() -> ActorRef[Any]:
        attempts.append(1)
        return Worker.start() if len(attempts) == 1 else FailingStart.start()

    sup = sv.Supervisor.start([sv.ChildSpec("f", flaky)], max_restarts=3, max_seconds=3600)
    crash_and_settle(sup, "f")
    reason = sv.wait_exit(sup, timeout=10)
    assert reason is not None and isinstance(reason.exception, sv.RestartIntensityExceeded)
    assert len(attempts) == 1 + 3  # the first start, then three failing restarts


def test_a_child_failing_to_start_fails_supervisor_start_and_stops_earlier_children() -> None:
    journal = Journal()
    with pytest.raises(sv.SupervisorError, match="'bad'.*failed to start"):
        sv.Supervisor.start(
            [
                worker_spec("a", journal),
                sv.ChildSpec("bad", FailingStart.start),
                worker_spec("c", journal),
            ]
        )
    assert journal.take() == [("start", "a"), ("stop", "a")]


def test_duplicate_child_ids_are_refused() -> None:
    with pytest.raises(sv.SupervisorError, match="duplicate child ids: a"):
        sv.Supervisor.start([worker_spec("a"), worker_spec("a")])


def test_backoff_delays_grow_exponentially_with_seeded_jitter() -> None:
    backoff = sv.Backoff(initial=0.1, factor=2.0, max_delay=1.0, jitter=0.2)
    delays = [backoff.delay(n, random.Random(7)) for n in range(6)]
    again = [backoff.delay(n, random.Random(7)) for n in range(6)]
    assert delays == again
    for n, d in enumerate(delays):
        base = min(1.0, 0.1 * 2**n)
        assert base * 0.8 <= d <= base * 1.2
    assert sv.Backoff(initial=0.1, jitter=0.0).delay(3, random.Random()) == pytest.approx(0.8)


def test_backoff_keeps_child_restarting_until_the_delay_passes() -> None:
    sup = sv.Supervisor.start(
        [worker_spec("a")],
        backoff=sv.Backoff(initial=0.3, jitter=0.0),
    )
    crash_and_settle(sup, "a")
    (info,) = sv.which_children(sup)
    assert info.status == "restarting" and info.ref is None
    wait_until(lambda: sv.which_children(sup)[0].status == "running", "the child to run")
    assert sv.which_children(sup)[0].restarts == 1
    sv.stop(sup, timeout=10)


def test_backoff_attempts_reset_after_a_stable_period(sv_logs: list[dict[str, Any]]) -> None:
    clock = ManualClock()
    sup = sv.Supervisor.start(
        [worker_spec("a")],
        backoff=sv.Backoff(initial=0.001, factor=10.0, jitter=0.0, reset_after=60.0),
        max_restarts=10,
        clock=clock,
    )

    def crash_and_wait_running() -> None:
        crash_and_settle(sup, "a")
        wait_until(lambda: sv.which_children(sup)[0].status == "running", "the child to run")

    crash_and_wait_running()
    crash_and_wait_running()
    clock.advance(61.0)  # the child now ran long enough to count as stable
    crash_and_wait_running()
    delays = [e["delay_s"] for e in sv_logs if e["event"] == "restart_scheduled"]
    assert delays == [0.001, 0.01, 0.001]
    sv.stop(sup, timeout=10)


def test_child_that_ignores_stop_is_forced_and_shutdown_completes() -> None:
    journal = Journal()
    release, entered = threading.Event(), threading.Event()
    sup = sv.Supervisor.start(
        [worker_spec("first", journal), worker_spec("stuck", journal, shutdown=0.2)]
    )
    stuck = child_refs(sup)["stuck"]
    assert stuck is not None
    stuck.tell(("spin", release, entered))
    assert entered.wait(5)
    assert sv.stop(sup, timeout=10) == sv.ExitReason.shutdown()
    assert sv.exit_reason(stuck) == sv.ExitReason.killed("shutdown timeout after 0.2 s")
    assert not release.is_set()
    # The stuck child never ran on_stop; the next one in reverse order still stopped.
    assert ("stop", "first") in journal.events and ("stop", "stuck") not in journal.events


def test_nested_supervisor_children_share_the_registry_and_tree_prints() -> None:
    registry = sv.Registry()

    def users() -> ActorRef[Any]:
        return sv.Supervisor.start(
            [worker_spec("ann", name="user:ann")],
            strategy=sv.Strategy.REST_FOR_ONE,
            registry=registry,
            name="users",
        )

    root = sv.Supervisor.start(
        [
            worker_spec("gateway", name="gateway"),
            sv.ChildSpec("users", users, kind=sv.ChildKind.SUPERVISOR, name="users"),
        ],
        registry=registry,
        name="root",
    )
    assert registry.names() == ["gateway", "root", "user:ann", "users"]
    assert registry.require("user:ann").ask("ping", timeout=5) == "pong"
    assert sv.format_tree(root) == (
        "root (one_for_one)\n"
        "├── gateway [worker] running restarts=0 name=gateway\n"
        "└── users [supervisor] running restarts=0 name=users\n"
        "    └── ann [worker] running restarts=0 name=user:ann"
    )
    sv.stop(root, timeout=10)
    assert registry.names() == []


def test_static_child_can_be_terminated_and_restarted() -> None:
    sup = sv.Supervisor.start([worker_spec("a"), worker_spec("b")])
    old = child_refs(sup)["a"]
    sv.terminate_child(sup, "a")
    assert old is not None and sv.exit_reason(old) == sv.ExitReason.shutdown()
    assert [(c.id, c.status) for c in sv.which_children(sup)] == [
        ("a", "stopped"),
        ("b", "running"),
    ]
    new = sv.restart_child(sup, "a")
    assert new.ask("ping", timeout=5) == "pong"
    with pytest.raises(sv.SupervisorError, match="no child 'zz'"):
        sv.terminate_child(sup, "zz")
    sv.stop(sup, timeout=10)


def test_lifecycle_events_are_logged_with_reasons(sv_logs: list[dict[str, Any]]) -> None:
    sup = sv.Supervisor.start([worker_spec("a")], name="logged")
    crash_and_settle(sup, "a")
    sv.stop(sup, timeout=10)
    events = [(e["event"], e.get("child")) for e in sv_logs if e.get("supervisor") == "logged"]
    assert events == [
        ("child_started", "a"),
        ("supervisor_started", None),
        ("child_crashed", "a"),
        ("child_started", "a"),
        ("child_restarted", "a"),
        ("child_stopped", "a"),
        ("supervisor_stopped", None),
    ]
    crashed = next(e for e in sv_logs if e["event"] == "child_crashed")
    assert "Crash: a crashed on purpose" in crashed["reason"]
