"""The user directory's state machine, without actors or files."""

from __future__ import annotations

import threading
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memoryos_actors.directory import (
    TRANSITIONS,
    TransitionError,
    UserDirectory,
    UserPhase,
    check_transition,
)
from memoryos_actors.errors import Overloaded, SystemClosed

P = UserPhase


def now() -> float:
    return time.monotonic()


def test_every_phase_has_a_way_back_to_passive() -> None:
    for phase in UserPhase:
        seen, todo = {phase}, [phase]
        while todo:
            for nxt in TRANSITIONS[todo.pop()]:
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        assert P.PASSIVE in seen or phase is P.PASSIVE


def test_illegal_transitions_are_refused() -> None:
    with pytest.raises(TransitionError):
        check_transition(P.DRAINING, P.EXPORTING)
    with pytest.raises(TransitionError):
        check_transition(P.PASSIVE, P.ACTIVE)
    check_transition(P.ACTIVE, P.DRAINING)


def test_the_first_call_activates_and_later_calls_join() -> None:
    d = UserDirectory(2)
    entry, activate = d.enter("u", now() + 1)
    assert activate and entry.phase is P.ACTIVATING and entry.epoch > 0
    d.activated(entry)
    again, activate = d.enter("u", now() + 1)
    assert again is entry and not activate and entry.inflight == 2
    with pytest.raises(Overloaded, match="max_inflight_per_user"):
        d.enter("u", now())
    d.leave(entry)
    d.leave(entry)
    assert d.active() == ["u"]


def test_each_activation_gets_a_new_epoch() -> None:
    d = UserDirectory(4)
    first, _ = d.enter("u", now() + 1)
    d.activated(first)
    d.leave(first)
    drained = d.claim_active("u", P.DRAINING, now() + 1)
    assert drained is first
    d.finish(first, P.PASSIVE)
    second, activate = d.enter("u", now() + 1)
    assert activate and second.epoch > first.epoch


def test_a_call_arriving_during_a_drain_waits_and_then_activates_a_new_incarnation() -> None:
    d = UserDirectory(4)
    entry, _ = d.enter("u", now() + 1)
    d.activated(entry)
    d.leave(entry)
    draining = d.claim_active("u", P.DRAINING, now() + 1)
    assert draining is not None
    with pytest.raises(Overloaded, match="still draining"):
        d.enter("u", now())  # no call gets in: the old incarnation owns the files
    got: list[tuple[object, bool]] = []
    t = threading.Thread(target=lambda: got.append(d.enter("u", now() + 10)))
    t.start()  # it waits for the drain (or, if it comes late, finds the user passive)
    d.finish(draining, P.PASSIVE)
    t.join(10)
    assert got and got[0][1] is True and got[0][0] is not draining


def test_a_claim_that_outlives_its_deadline_gives_the_user_back() -> None:
    d = UserDirectory(4)
    entry, _ = d.enter("u", now() + 1)
    d.activated(entry)  # one call still in flight
    with pytest.raises(Overloaded, match="in flight"):
        d.claim_active("u", P.FORGETTING, now() + 0.05)
    assert d.phase("u") is P.ACTIVE
    d.leave(entry)


def test_activations_waiting_for_a_slot_do_not_wait_for_each_other() -> None:
    d = UserDirectory(4)
    a, _ = d.enter("a", now() + 1)
    b, _ = d.enter("b", now() + 1)
    c, _ = d.enter("c", now() + 1)
    drained: list[object] = []

    def drain(victim: object) -> None:  # passivates elsewhere: here, at once
        drained.append(victim)
        d.finish(victim, P.PASSIVE)  # type: ignore[arg-type]

    d.wait_for_room(a, 2, now() + 1, drain)
    d.wait_for_room(b, 2, now() + 1, drain)
    assert a.slot and b.slot and not drained
    d.activated(a)
    d.leave(a)
    # "c" finds two slots held; "a" is idle, so it is the one handed over to drain.
    d.wait_for_room(c, 2, now() + 1, drain)
    assert drained == [a] and c.slot and d.phase("a") is P.PASSIVE


def test_an_activation_waits_for_a_slot_and_never_passivates_in_its_own_thread() -> None:
    d = UserDirectory(4)
    a, _ = d.enter("a", now() + 1)
    d.wait_for_room(a, 1, now() + 1, lambda v: None)
    d.activated(a)
    d.leave(a)
    handed: list[object] = []
    b, _ = d.enter("b", now() + 1)
    waiter = threading.Thread(target=lambda: d.wait_for_room(b, 1, now() + 10, handed.append))
    waiter.start()
    deadline = now() + 10
    while not handed and now() < deadline:
        time.sleep(0.001)
    assert handed == [a] and a.phase is P.DRAINING and not b.slot
    d.finish(a, P.PASSIVE)  # the passivation done elsewhere frees the slot
    waiter.join(10)
    assert not waiter.is_alive() and b.slot


def test_activations_get_freed_slots_in_arrival_order_and_drain_one_user_each() -> None:
    d = UserDirectory(4)
    idle = []
    for u in ("i1", "i2", "i3"):
        e, _ = d.enter(u, now() + 1)
        d.wait_for_room(e, 3, now() + 1, lambda v: None)
        d.activated(e)
        d.leave(e)
        idle.append(e)
    handed: list[object] = []
    got: list[str] = []
    lock = threading.Lock()

    def activate(user: str) -> None:
        e, _ = d.enter(user, now() + 10)
        d.wait_for_room(e, 3, now() + 10, lambda v: handed.append(v))
        with lock:
            got.append(user)

    def wait_handed(n: int) -> None:
        deadline = now() + 10
        while len(handed) < n and now() < deadline:
            time.sleep(0.001)

    first = threading.Thread(target=activate, args=("w1",))
    first.start()
    wait_handed(1)
    second = threading.Thread(target=activate, args=("w2",))
    second.start()
    wait_handed(2)
    # One user drained per waiting activation, the least recently used first.
    assert handed == idle[:2] and idle[2].phase is P.ACTIVE
    d.finish(idle[1], P.PASSIVE)  # w2's victim finishes first, but w1 came first
    first.join(10)
    assert got == ["w1"]
    d.finish(idle[0], P.PASSIVE)
    second.join(10)
    assert got == ["w1", "w2"]
    # Both activations are done: a wrong third pick would show now.
    assert handed == idle[:2] and idle[2].phase is P.ACTIVE


def test_a_waiting_activation_gives_up_at_its_deadline_when_every_user_is_busy() -> None:
    d = UserDirectory(4)
    a, _ = d.enter("a", now() + 1)
    d.wait_for_room(a, 1, now() + 1, lambda v: None)
    d.activated(a)  # its call is still in flight: not idle, cannot be drained
    b, _ = d.enter("b", now() + 1)
    with pytest.raises(Overloaded, match="max_active_users=1"):
        d.wait_for_room(b, 1, now() + 0.05, lambda v: None)
    assert not b.slot
    d.activation_failed(b)
    d.leave(a)


def test_headroom_picks_count_slots_being_released_only_once() -> None:
    d = UserDirectory(4)
    for u in ("a", "b", "c"):
        e, _ = d.enter(u, now() + 1)
        d.wait_for_room(e, 3, now() + 1, lambda v: None)
        d.activated(e)
        d.leave(e)
    first = d.pick_above(2)
    assert first is not None and first.user_id == "a"
    assert d.pick_above(2) is None  # "a" is already on its way out


def test_pinned_users_are_never_picked_for_passivation() -> None:
    d = UserDirectory(4, is_pinned=lambda u: u.startswith("@"))
    e, _ = d.enter("@shared", now() + 1)
    d.activated(e)
    d.leave(e)
    assert d.pick_idle() is None


def test_a_closed_directory_refuses_calls() -> None:
    d = UserDirectory(4)
    d.close()
    with pytest.raises(SystemClosed):
        d.enter("u", now() + 1)


_OPS = st.lists(
    st.tuples(
        st.sampled_from(
            ["enter", "leave", "drain", "export", "forget", "import", "finish", "pick"]
        ),
        st.sampled_from(["a", "b", "c"]),
        st.booleans(),
    ),
    max_size=60,
)


@settings(max_examples=200, deadline=None)
@given(_OPS)
def test_any_sequence_of_operations_keeps_phases_and_counts_consistent(ops) -> None:
    """Single-threaded: every wait has a deadline of now, so it raises instead of blocking."""
    d = UserDirectory(2)
    held: dict[str, list[object]] = {"a": [], "b": [], "c": []}  # calls in flight
    claimed: dict[str, object] = {}  # users in a lifecycle operation
    for op, user, flag in ops:
        before = d.phase(user)
        try:
            if op == "enter":
                entry, activate = d.enter(user, now())
                if activate:
                    if flag:
                        d.activated(entry)
                    else:
                        d.activation_failed(entry)
                        continue
                held[user].append(entry)
            elif op == "leave" and held[user]:
                d.leave(held[user].pop())
            elif op in ("drain", "export", "forget") and user not in claimed:
                phase = {"drain": P.DRAINING, "export": P.EXPORTING, "forget": P.FORGETTING}[op]
                entry = d.claim_active(user, phase, now())
                if entry is not None:
                    assert not held[user]
                    claimed[user] = entry
            elif op == "import" and user not in claimed:
                entry = d.claim_passive(user, P.IMPORTING, now())
                if entry is not None:
                    claimed[user] = entry
            elif op == "finish" and user in claimed:
                entry = claimed.pop(user)
                to = P.ACTIVE if entry.phase is P.EXPORTING else P.PASSIVE
                d.finish(entry, to)
            elif op == "pick":
                entry = d.pick_idle()
                if entry is not None:
                    assert entry.inflight == 0
                    d.finish(entry, P.PASSIVE)
        except Overloaded:
            assert d.phase(user) is before  # a refused operation changes nothing
        for u in ("a", "b", "c"):
            phase = d.phase(u)
            entry = d.get(u)
            assert (entry is None) == (phase is P.PASSIVE)
            if entry is not None:
                assert entry.inflight == len(held[u])
                assert entry.inflight == 0 or phase is P.ACTIVE
            if u in claimed:
                assert phase in (P.DRAINING, P.EXPORTING, P.FORGETTING, P.IMPORTING)
