"""The directory's transition table is the machine: every phase change a user goes through
is one the table allows, and ``counts`` accounts for every one of them.

Single-threaded: every deadline is "now", so an operation that would wait raises
``Overloaded`` at once instead of blocking.
"""

from __future__ import annotations

import time
from collections import Counter

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from memoryos_actors.directory import (
    TRANSITIONS,
    TransitionError,
    UserDirectory,
    UserEntry,
    UserPhase,
)
from memoryos_actors.errors import Overloaded

P = UserPhase
USERS = ("a", "b", "c")
users = st.sampled_from(USERS)


def now() -> float:
    return time.monotonic()


def test_a_passivation_that_outlives_its_deadline_gives_the_user_back_through_the_table() -> None:
    d = UserDirectory(4)
    entry, _ = d.enter("u", now() + 1)
    d.activated(entry)  # its call is still in flight
    before = dict(d.counts)
    with pytest.raises(Overloaded, match="draining gave up"):
        d.claim_active("u", P.DRAINING, now())
    assert d.phase("u") is P.ACTIVE
    # Both changes happened (calls arriving meanwhile were held back) and both are counted.
    assert d.counts["draining"] == before["draining"] + 1
    assert d.counts["active"] == before["active"] + 1
    assert P.ACTIVE in TRANSITIONS[P.DRAINING]
    # The user is fully live again: it takes calls, and a later passivation succeeds.
    again, activate = d.enter("u", now())
    assert again is entry and not activate
    d.leave(again)
    d.leave(entry)
    assert d.claim_active("u", P.DRAINING, now()) is entry
    d.finish(entry, P.PASSIVE)
    assert d.phase("u") is P.PASSIVE and d.get("u") is None


def test_a_finished_entry_cannot_be_brought_back() -> None:
    d = UserDirectory(4)
    entry = d.claim_passive("u", P.IMPORTING, now())
    assert entry is not None
    d.finish(entry, P.PASSIVE)
    counts = dict(d.counts)
    with pytest.raises(TransitionError):
        d.finish(entry, P.FORGETTING)
    assert d.get("u") is None and d.counts == counts


class DirectoryMachine(RuleBasedStateMachine):
    """Random sequences of the directory's public operations, observed from outside."""

    def __init__(self) -> None:
        super().__init__()
        self.d = UserDirectory(2, is_pinned=lambda u: u == "c")
        self.seen: dict[str, UserPhase] = dict.fromkeys(USERS, P.PASSIVE)
        self.changes: Counter[tuple[UserPhase, UserPhase]] = Counter()
        self.held: dict[str, list[UserEntry]] = {u: [] for u in USERS}  # calls in flight
        self.activating: dict[str, UserEntry] = {}  # activations not yet ended
        self.claimed: dict[str, UserEntry] = {}  # transitions not yet finished
        self.stale: list[UserEntry] = []  # entries already removed

    # -- bookkeeping --------------------------------------------------------------------

    def record(self, old: UserPhase, new: UserPhase) -> None:
        assert new in TRANSITIONS[old], f"{old.value} -> {new.value} is not in the table"
        self.changes[(old, new)] += 1

    def observe(self) -> None:
        """Record every phase change since the last look."""
        for u in USERS:
            phase = self.d.phase(u)
            if phase is not self.seen[u]:
                self.record(self.seen[u], phase)
                self.seen[u] = phase

    def claimed_victim(self, victim: UserEntry) -> None:
        self.observe()
        assert victim.phase is P.DRAINING and not victim.inflight
        self.claimed[victim.user_id] = victim

    def removed(self, entry: UserEntry) -> None:
        if entry.phase is P.PASSIVE:
            self.stale.append(entry)

    # -- calls --------------------------------------------------------------------------

    @rule(user=users, then=st.sampled_from(["activate", "fail", "wait"]))
    def enter(self, user: str, then: str) -> None:
        try:
            entry, must_activate = self.d.enter(user, now())
        except Overloaded:
            return
        self.observe()
        if not must_activate:
            self.held[user].append(entry)
        elif then == "activate":
            self.d.activated(entry)
            self.held[user].append(entry)
        elif then == "fail":
            self.d.activation_failed(entry)
            self.removed(entry)
        else:
            self.activating[user] = entry

    @rule(user=users, ok=st.booleans())
    def end_activation(self, user: str, ok: bool) -> None:
        entry = self.activating.pop(user, None)
        if entry is None:
            return
        if ok:
            self.d.activated(entry)
            self.held[user].append(entry)
        else:
            self.d.activation_failed(entry)
            self.removed(entry)

    @rule(user=users, drain_now=st.booleans())
    def wait_for_room(self, user: str, drain_now: bool) -> None:
        entry = self.activating.get(user)
        if entry is None:
            return

        def drain(victim: UserEntry) -> None:
            self.claimed_victim(victim)
            if drain_now:  # the passivation elsewhere finishes at once
                self.d.finish(self.claimed.pop(victim.user_id), P.PASSIVE)
                self.removed(victim)
                self.observe()

        try:
            self.d.wait_for_room(entry, 2, now(), drain)
        except Overloaded:
            assert not entry.slot
        else:
            assert entry.slot

    @rule(user=users)
    def leave(self, user: str) -> None:
        if self.held[user]:
            self.d.leave(self.held[user].pop())

    # -- lifecycle operations -----------------------------------------------------------

    @rule(
        user=users,
        phase=st.sampled_from([P.DRAINING, P.EXPORTING, P.FORGETTING, P.REPAIRING]),
        only_idle=st.booleans(),
    )
    def claim_active(self, user: str, phase: UserPhase, only_idle: bool) -> None:
        was = self.d.phase(user)
        try:
            entry = self.d.claim_active(user, phase, now(), only_idle=only_idle)
        except Overloaded as exc:
            if "gave up" in str(exc):  # held back new calls, then gave the user back
                self.record(P.ACTIVE, phase)
                self.record(phase, P.ACTIVE)
            assert self.d.phase(user) is was
            return
        if entry is not None:
            assert not self.held[user]
            self.claimed[user] = entry

    @rule(user=users, phase=st.sampled_from([P.FORGETTING, P.IMPORTING, P.REPAIRING]))
    def claim_passive(self, user: str, phase: UserPhase) -> None:
        try:
            entry = self.d.claim_passive(user, phase, now())
        except Overloaded:
            return
        if entry is not None:
            self.claimed[user] = entry

    @rule()
    def pick_idle(self) -> None:
        entry = self.d.pick_idle()
        if entry is not None:
            assert entry.user_id != "c"  # pinned
            self.claimed_victim(entry)

    @rule(limit=st.integers(0, 2))
    def pick_above(self, limit: int) -> None:
        entry = self.d.pick_above(limit)
        if entry is not None:
            self.claimed_victim(entry)

    @rule(user=users, to=st.sampled_from(list(UserPhase)))
    def finish(self, user: str, to: UserPhase) -> None:
        entry = self.claimed.get(user)
        if entry is None:
            return
        if to not in TRANSITIONS[entry.phase]:
            with pytest.raises(TransitionError):
                self.d.finish(entry, to)
            return
        self.d.finish(entry, to)
        self.claimed.pop(user)
        self.removed(entry)

    @rule(data=st.data())
    def finish_stale(self, data: st.DataObject) -> None:
        if not self.stale:
            return
        entry = data.draw(st.sampled_from(self.stale))
        with pytest.raises(TransitionError):
            self.d.finish(entry, data.draw(st.sampled_from(list(UserPhase))))

    # -- what must hold after every step ------------------------------------------------

    @invariant()
    def every_change_is_in_the_table_and_counted(self) -> None:
        self.observe()
        into = Counter()
        out = Counter()
        for (old, new), n in self.changes.items():
            into[new] += n
            out[old] += n
        assert self.d.counts == {p.value: into[p] for p in UserPhase}
        entries = self.d.entries()
        for p in UserPhase:
            if p is not P.PASSIVE:  # a recount of the entries balances the counts
                assert sum(e.phase is p for e in entries) == into[p] - out[p], p

    @invariant()
    def entries_agree_with_the_calls_and_claims(self) -> None:
        for u in USERS:
            entry = self.d.get(u)
            assert (entry is None) == (self.d.phase(u) is P.PASSIVE)
            if entry is None:
                continue
            assert entry.inflight == len(self.held[u]) + (u in self.activating)
            if u in self.claimed:
                assert entry is self.claimed[u]
                assert entry.phase not in (P.ACTIVE, P.ACTIVATING)


DirectoryMachine.TestCase.settings = settings(
    max_examples=50, stateful_step_count=30, deadline=None
)
test_directory_machine = DirectoryMachine.TestCase
