"""DynamicSupervisor children and cap; Registry consistency under restarts."""

from __future__ import annotations

import threading
import time

import pytest
from svhelpers import Journal, child_refs, crash_and_settle, settle, worker_spec

import supervisor as sv


def test_dynamic_children_are_started_and_terminated_at_run_time() -> None:
    sup = sv.DynamicSupervisor.start(name="users")
    assert sv.which_children(sup) == []
    ann = sv.start_child(sup, worker_spec("ann"))
    bob = sv.start_child(sup, worker_spec("bob"))
    assert ann.ask("ping", timeout=5) == "pong"
    assert [c.id for c in sv.which_children(sup)] == ["ann", "bob"]
    sv.terminate_child(sup, "ann")
    assert sv.exit_reason(ann) == sv.ExitReason.shutdown()
    assert [c.id for c in sv.which_children(sup)] == ["bob"]
    assert bob.is_alive()
    assert sv.format_tree(sup).startswith("users (dynamic)\n└── bob [worker] running")
    sv.stop(sup, timeout=10)


def test_dynamic_supervisor_cap_raises_max_children_error_and_frees_slots() -> None:
    sup = sv.DynamicSupervisor.start(max_children=2, name="capped")
    sv.start_child(sup, worker_spec("a"))
    sv.start_child(sup, worker_spec("b"))
    with pytest.raises(
        sv.MaxChildrenError, match=r"capped already has 2 children \(max_children=2\)"
    ):
        sv.start_child(sup, worker_spec("c"))
    assert sup.is_alive()  # a refused request is a reply, not a crash
    sv.terminate_child(sup, "a")
    assert sv.start_child(sup, worker_spec("c")).is_alive()
    sv.stop(sup, timeout=10)


def test_dynamic_supervisor_refuses_duplicate_ids_and_restarts_crashed_children() -> None:
    sup = sv.DynamicSupervisor.start()
    sv.start_child(sup, worker_spec("a"))
    with pytest.raises(sv.SupervisorError, match="already has a child with id 'a'"):
        sv.start_child(sup, worker_spec("a"))
    sv.start_child(sup, worker_spec("t", restart=sv.Restart.TRANSIENT))
    crash_and_settle(sup, "a")
    assert {c.id: c.restarts for c in sv.which_children(sup)} == {"a": 1, "t": 0}
    t = child_refs(sup)["t"]
    assert t is not None
    t.tell("stop_self")
    settle(sup, t)
    assert [c.id for c in sv.which_children(sup)] == ["a"]  # not restarted: forgotten
    sv.stop(sup, timeout=10)


def test_failed_dynamic_start_is_reported_to_the_caller() -> None:
    from svhelpers import FailingStart

    sup = sv.DynamicSupervisor.start()
    with pytest.raises(sv.SupervisorError, match="'bad'.*failed to start"):
        sv.start_child(sup, sv.ChildSpec("bad", FailingStart.start))
    assert sv.which_children(sup) == []
    sv.stop(sup, timeout=10)


def test_registry_follows_restarts_and_forgets_stopped_children() -> None:
    registry = sv.Registry()
    sup = sv.Supervisor.start([worker_spec("a", name="svc")], registry=registry)
    first = registry.require("svc")
    crash_and_settle(sup, "a")
    second = registry.require("svc")
    assert second is not first and second.is_alive()
    assert second is child_refs(sup)["a"]
    sv.stop(sup, timeout=10)
    assert registry.lookup("svc") is None
    with pytest.raises(LookupError, match="'svc'"):
        registry.require("svc")


def test_registry_lookups_stay_consistent_while_children_restart() -> None:
    registry = sv.Registry()
    journal = Journal()
    names = [f"w{i}" for i in range(4)]
    sup = sv.Supervisor.start(
        [worker_spec(n, journal, name=n) for n in names],
        max_restarts=1000,
        registry=registry,
    )
    stop = threading.Event()
    bad: list[str] = []
    seen = {n: 0 for n in names}

    def reader(name: str) -> None:
        while not stop.is_set():
            ref = registry.lookup(name)
            time.sleep(0)  # let the GIL go: pure spinning would only slow restarts down
            if ref is None:
                continue
            seen[name] += 1
            # Whatever we see must be an incarnation of *this* child.
            if ref not in journal.refs.get(name, []):
                bad.append(f"{name} -> {ref}")

    readers = [threading.Thread(target=reader, args=(n,)) for n in names for _ in range(2)]
    for t in readers:
        t.start()
    try:
        for round_ in range(15):
            victims = [registry.require(n) for n in names]
            for ref in victims:
                if round_ % 2:
                    sv.kill(ref, "test")
                else:
                    ref.tell("crash")
            for ref in victims:
                settle(sup, ref)
    finally:
        stop.set()
        for t in readers:
            t.join()
    assert bad == []
    assert all(count > 0 for count in seen.values())
    current = child_refs(sup)
    for n in names:
        ref = registry.require(n)
        assert ref is current[n] and ref.is_alive()
    sv.stop(sup, timeout=10)


def test_separate_trees_keep_separate_registries() -> None:
    r1, r2 = sv.Registry(), sv.Registry()
    s1 = sv.Supervisor.start([worker_spec("a", name="svc")], registry=r1)
    s2 = sv.Supervisor.start([worker_spec("a", name="svc")], registry=r2)
    assert r1.require("svc") is not r2.require("svc")
    sv.stop(s1, timeout=10)
    assert r1.lookup("svc") is None and r2.require("svc").is_alive()
    sv.stop(s2, timeout=10)


def test_registering_a_name_held_by_a_live_actor_is_refused() -> None:
    from svhelpers import Worker

    registry = sv.Registry()
    a, b = Worker.start(), Worker.start()
    try:
        registry.register("x", a)
        with pytest.raises(sv.SupervisorError, match="already registered"):
            registry.register("x", b)
        assert registry.unregister("x", b) is False  # only the holder can be removed
        assert registry.require("x") is a
    finally:
        sv.stop(a, timeout=5)
        sv.stop(b, timeout=5)
    registry.register("x", b)  # a dead holder is replaced
    assert registry.lookup("x") is b and len(registry) == 1 and "x" in registry


def test_a_detached_child_keeps_running_is_not_restarted_and_is_the_callers_to_stop() -> None:
    sup = sv.DynamicSupervisor.start(max_children=1, name="detach")
    ann = sv.start_child(sup, worker_spec("ann"))
    ref = sv.detach_child(sup, "ann")
    assert ref is ann and ann.is_alive()
    assert sv.which_children(sup) == []
    sv.start_child(sup, worker_spec("bob"))  # the slot is free at once
    sv.stop(ann, timeout=10)  # an exit the supervisor no longer handles: no restart
    assert [c.id for c in sv.which_children(sup)] == ["bob"]
    assert [c.restarts for c in sv.which_children(sup)] == [0]
    with pytest.raises(sv.SupervisorError, match="no child 'ann'"):
        sv.detach_child(sup, "ann")
    sv.stop(sup, timeout=10)
