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
        check_transition(P.DRAINING, P.ACTIVE)
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
    got: list[tuple[object, bool]] = []
    t = threading.Thread(target=lambda: got.append(d.enter("u", now() + 10)))
    t.start()
    time.sleep(0.05)
    assert not got  # still waiting: the old incarnation owns the files
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
    assert d.wait_for_room(a, 2, now() + 1) is None
    assert d.wait_for_room(b, 2, now() + 1) is None
    d.activated(a)
    d.leave(a)
    # "c" finds two slots held; "a" is idle, so it is the one to drain.
    victim = d.wait_for_room(c, 2, now() + 1)
    assert victim is a and a.phase is P.DRAINING
    d.finish(a, P.PASSIVE)
    assert d.wait_for_room(c, 2, now() + 1) is None


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
        st.sampled_from(["enter", "leave", "drain", "export", "forget", "import", "finish",
                         "pick"]),
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
