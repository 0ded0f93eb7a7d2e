"""The user directory: which users are live, and the state machine of each one.

Every operation that touches a user's files goes through the directory, so that no file of
a user is ever touched by two incarnations (or by a lifecycle operation and an incarnation)
at once. A user is in one :class:`UserPhase` at a time::

    PASSIVE ──enter──► ACTIVATING ──ok──► ACTIVE ──passivate/idle/LRU──► DRAINING ──► PASSIVE
       │                   └──failed──► PASSIVE      │  ▲
       │                                              │  └── EXPORTING (one consistent cut)
       ├──import_user──► IMPORTING ──► PASSIVE        └──forget_user──► FORGETTING ──► PASSIVE
       ├──forget_user──► FORGETTING ──► PASSIVE (no files left)
       └──repair_user──► REPAIRING ──► PASSIVE  (also from ACTIVE: the group is stopped)

    DRAINING, FORGETTING, REPAIRING ──calls in flight outlived the deadline──► ACTIVE

:data:`TRANSITIONS` is that picture as a table, and it is the machine: every change of a
user's phase, the creation and removal of entries included, goes through one method that
refuses a change the table does not hold and counts it in :attr:`UserDirectory.counts`.

``PASSIVE`` is not stored: a user without an entry is passive (its files, if any, are
closed). Calls (``add_turn``, ``retrieve``...) run only in ``ACTIVE``; a call that arrives
during a transition waits for it, at most until its deadline, and then raises
:class:`~memoryos_actors.errors.Overloaded`. A transition out of ``ACTIVE`` first blocks new
calls, then waits (bounded) for the calls in flight; if they do not finish in time the user
goes back to ``ACTIVE`` and the operation raises ``Overloaded``. Whatever happens while a
transition runs, it ends in a state from which the next call recovers: the entry is
removed (``PASSIVE``) or put back to ``ACTIVE``.

Each activation gets an *incarnation epoch*, unique in the process: replies addressed to an
older incarnation of the same user (late LLM answers after a passivation or a
``forget_user``) carry an old epoch and are dropped by the actors.

The directory holds no actor and does no I/O: the memory system does the work of each
transition (see :mod:`memoryos_actors.system`) while the directory keeps the bookkeeping
consistent. That keeps this module testable without threads of its own.
"""

from __future__ import annotations

import enum
import itertools
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from supervisor import SafeCondition

from .errors import MemoryOSError, Overloaded, SystemClosed

if TYPE_CHECKING:
    from .actors.base import UserEnv
    from .store.userstore import UserStore

__all__ = [
    "TRANSITIONS",
    "TransitionError",
    "UserDirectory",
    "UserEntry",
    "UserPhase",
    "check_transition",
]


class UserPhase(enum.Enum):
    """Where a user is in its lifecycle (see the module docstring)."""

    PASSIVE = "passive"
    ACTIVATING = "activating"
    ACTIVE = "active"
    DRAINING = "draining"
    EXPORTING = "exporting"
    FORGETTING = "forgetting"
    IMPORTING = "importing"
    REPAIRING = "repairing"


#: Every allowed transition. ``PASSIVE`` as a target means "the entry is removed".
TRANSITIONS: dict[UserPhase, frozenset[UserPhase]] = {
    UserPhase.PASSIVE: frozenset(
        {UserPhase.ACTIVATING, UserPhase.FORGETTING, UserPhase.IMPORTING, UserPhase.REPAIRING}
    ),
    UserPhase.ACTIVATING: frozenset({UserPhase.ACTIVE, UserPhase.PASSIVE}),
    UserPhase.ACTIVE: frozenset(
        {UserPhase.DRAINING, UserPhase.EXPORTING, UserPhase.FORGETTING, UserPhase.REPAIRING}
    ),
    # A passivation that could not stop the calls in flight in time gives the user back.
    UserPhase.DRAINING: frozenset({UserPhase.PASSIVE, UserPhase.ACTIVE}),
    UserPhase.EXPORTING: frozenset({UserPhase.ACTIVE}),
    # A forget that could not stop the calls in flight in time gives the user back.
    UserPhase.FORGETTING: frozenset({UserPhase.PASSIVE, UserPhase.ACTIVE}),
    UserPhase.IMPORTING: frozenset({UserPhase.PASSIVE}),
    # A repair that could not stop the calls in flight in time gives the user back.
    UserPhase.REPAIRING: frozenset({UserPhase.PASSIVE, UserPhase.ACTIVE}),
}

#: Phases that end by waiting for the calls in flight to finish.
_EXCLUSIVE = frozenset(
    {UserPhase.DRAINING, UserPhase.EXPORTING, UserPhase.FORGETTING, UserPhase.REPAIRING}
)


class TransitionError(MemoryOSError):
    """An illegal lifecycle transition was attempted (a bug in the caller, not bad input)."""


def check_transition(old: UserPhase, new: UserPhase) -> None:
    """Raise :class:`TransitionError` unless ``old -> new`` is in :data:`TRANSITIONS`."""
    if new not in TRANSITIONS[old]:
        raise TransitionError(f"illegal user lifecycle transition {old.value} -> {new.value}")


_epochs = itertools.count(1)


class UserEntry:
    """One user's live record in the directory. Fields change only under the directory's
    lock; ``store`` and ``env`` are set by the activation and read by calls once ``ACTIVE``.
    """

    __slots__ = ("env", "epoch", "inflight", "last_used", "phase", "slot", "store", "user_id")

    def __init__(self, user_id: str, phase: UserPhase) -> None:
        self.user_id = user_id
        self.phase = phase
        self.epoch = 0
        self.inflight = 0
        self.last_used = time.monotonic()
        #: Whether the entry holds one of the ``max_active_users`` group slots.
        self.slot = False
        self.store: UserStore | None = None
        self.env: UserEnv | None = None

    def __repr__(self) -> str:
        return (
            f"UserEntry({self.user_id!r}, {self.phase.value}, epoch={self.epoch}, "
            f"inflight={self.inflight})"
        )


class UserDirectory:
    """The live users of one memory system and their phases (thread-safe).

    Args:
        max_inflight_per_user: calls admitted at once for one user.
        is_pinned: users never chosen for idle or LRU passivation (shared personas).
    """

    def __init__(
        self, max_inflight_per_user: int, is_pinned: Callable[[str], bool] = lambda _u: False
    ) -> None:
        self.max_inflight_per_user = max_inflight_per_user
        self._is_pinned = is_pinned
        self._cond = SafeCondition(threading.Lock())
        self._entries: OrderedDict[str, UserEntry] = OrderedDict()
        #: Activations waiting for a group slot, in arrival order (see wait_for_room).
        self._room_queue: list[UserEntry] = []
        self.closed = False
        #: How many times a user entered each phase, by ``UserPhase.value``: every phase
        #: change counts once under its target (a give-back to ``ACTIVE`` too; ``PASSIVE``
        #: counts removed entries). So for each live phase, the entries in it now equal
        #: the changes into it minus the changes out of it.
        self.counts = {p.value: 0 for p in UserPhase}

    # -- reading ------------------------------------------------------------------------

    def phase(self, user_id: str) -> UserPhase:
        """The user's phase now (``PASSIVE`` when it has no entry)."""
        with self._cond:
            entry = self._entries.get(user_id)
            return UserPhase.PASSIVE if entry is None else entry.phase

    def get(self, user_id: str) -> UserEntry | None:
        """The user's entry, or None if passive."""
        with self._cond:
            return self._entries.get(user_id)

    def entries(self) -> list[UserEntry]:
        """Every entry, least recently used first (a copy)."""
        with self._cond:
            return list(self._entries.values())

    def active(self) -> list[str]:
        """Users in ``ACTIVE``, least recently used first."""
        with self._cond:
            return [u for u, e in self._entries.items() if e.phase is UserPhase.ACTIVE]

    def __len__(self) -> int:
        with self._cond:
            return len(self._entries)

    def __iter__(self) -> Iterator[UserEntry]:
        return iter(self.entries())

    # -- calls --------------------------------------------------------------------------

    def enter(self, user_id: str, deadline: float) -> tuple[UserEntry, bool]:
        """Admit one call for ``user_id``; returns ``(entry, must_activate)``.

        When ``must_activate`` is true the caller created the entry in ``ACTIVATING`` and
        must call :meth:`activated` or :meth:`activation_failed`. Waits (until ``deadline``,
        a ``time.monotonic()`` value) while the user is in a transition or has
        ``max_inflight_per_user`` calls in flight; then raises ``Overloaded``.
        """
        with self._cond:
            while True:
                if self.closed:
                    raise SystemClosed("the memory system is closed")
                entry = self._entries.get(user_id)
                if entry is None:
                    entry = UserEntry(user_id, UserPhase.PASSIVE)
                    entry.epoch = next(_epochs)
                    entry.inflight = 1
                    self._change_phase(entry, UserPhase.ACTIVATING)
                    return entry, True
                if entry.phase is UserPhase.ACTIVE and entry.inflight < self.max_inflight_per_user:
                    entry.inflight += 1
                    entry.last_used = time.monotonic()
                    self._entries.move_to_end(user_id)
                    return entry, False
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    if entry.phase is UserPhase.ACTIVE:
                        raise Overloaded(
                            f"user {user_id!r} has {entry.inflight} calls in flight "
                            f"(max_inflight_per_user={self.max_inflight_per_user})"
                        )
                    raise Overloaded(f"user {user_id!r} is still {entry.phase.value}")
                self._cond.wait(remaining)

    def leave(self, entry: UserEntry) -> None:
        """A call admitted by :meth:`enter` is over."""
        with self._cond:
            entry.inflight -= 1
            entry.last_used = time.monotonic()
            self._cond.notify_all()

    def activated(self, entry: UserEntry) -> None:
        """The user's actors are up: ``ACTIVATING -> ACTIVE``."""
        self._move(entry, UserPhase.ACTIVE)

    def activation_failed(self, entry: UserEntry) -> None:
        """The activation failed and was cleaned up: ``ACTIVATING -> PASSIVE``."""
        self._move(entry, UserPhase.PASSIVE)

    # -- lifecycle operations -----------------------------------------------------------

    def claim_passive(self, user_id: str, phase: UserPhase, deadline: float) -> UserEntry | None:
        """Start ``phase`` (``FORGETTING``, ``IMPORTING`` or ``REPAIRING``) on a passive user.

        Waits for a transition in progress to end. Returns the new entry, or None when the
        user is live (``ACTIVE``) so the caller should use :meth:`claim_active` instead.
        """
        with self._cond:
            while True:
                if self.closed:
                    raise SystemClosed("the memory system is closed")
                entry = self._entries.get(user_id)
                if entry is None:
                    entry = UserEntry(user_id, UserPhase.PASSIVE)
                    self._change_phase(entry, phase)
                    return entry
                if entry.phase is UserPhase.ACTIVE:
                    return None
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise Overloaded(f"user {user_id!r} is still {entry.phase.value}")
                self._cond.wait(remaining)

    def claim_active(
        self, user_id: str, phase: UserPhase, deadline: float, *, only_idle: bool = False
    ) -> UserEntry | None:
        """Start ``phase`` (``DRAINING``, ``EXPORTING``, ``FORGETTING`` or ``REPAIRING``) on a
        live user.

        New calls are held back at once; the calls already in flight are waited for until
        ``deadline``. If they are still running then, the user goes back to ``ACTIVE`` and
        ``Overloaded`` is raised. Returns None when the user is passive (after waiting for a
        transition in progress), or, with ``only_idle``, when it has calls in flight.
        """
        with self._cond:
            while True:
                if self.closed and phase is not UserPhase.DRAINING:
                    raise SystemClosed("the memory system is closed")
                entry = self._entries.get(user_id)
                if entry is None:
                    return None
                if entry.phase is UserPhase.ACTIVE:
                    if only_idle and entry.inflight:
                        return None
                    break
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise Overloaded(f"user {user_id!r} is still {entry.phase.value}")
                self._cond.wait(remaining)
            self._change_phase(entry, phase)
            while entry.inflight > 0:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    self._change_phase(entry, UserPhase.ACTIVE)
                    raise Overloaded(
                        f"user {user_id!r} still has {entry.inflight} calls in flight; "
                        f"{phase.value} gave up"
                    )
                self._cond.wait(remaining)
            return entry

    def pick_idle(
        self, *, idle_before: float | None = None, exclude: UserEntry | None = None
    ) -> UserEntry | None:
        """Move one idle ``ACTIVE`` user to ``DRAINING`` and return it (or None).

        Idle means no call in flight and, with ``idle_before`` (a ``time.monotonic()``
        value), last used before it. The least recently used one is picked; pinned users
        and ``exclude`` never are.
        """
        with self._cond:
            for entry in self._entries.values():
                if (
                    entry.phase is UserPhase.ACTIVE
                    and entry.inflight == 0
                    and entry is not exclude
                    and (idle_before is None or entry.last_used < idle_before)
                    and not self._is_pinned(entry.user_id)
                ):
                    self._change_phase(entry, UserPhase.DRAINING)
                    return entry
            return None

    def finish(self, entry: UserEntry, phase: UserPhase) -> None:
        """End the transition ``entry`` is in, moving it to ``phase`` (``PASSIVE``: removed)."""
        self._move(entry, phase)

    def wait_for_room(
        self, me: UserEntry, cap: int, deadline: float, drain: Callable[[UserEntry], None]
    ) -> None:
        """Take one of the ``cap`` group slots for ``me`` (an ``ACTIVATING`` entry).

        Activations that find no free slot queue up and get the slots in arrival order.
        While ``me`` waits, idle users are moved to ``DRAINING`` (least recently used
        first) and handed to ``drain``, which must start their passivation elsewhere and
        return at once: so many that the slots being released cover every activation
        queued up to ``me``, and no more. ``drain`` is called without the directory's lock.
        Only entries that hold a slot (a live group, or an activation past this point)
        count, so activations waiting here never wait for each other's files. Waits
        until ``deadline`` (a ``time.monotonic()`` value), then raises ``Overloaded``;
        raises ``SystemClosed`` if the directory closes meanwhile.
        """
        with self._cond:
            if me.slot:
                return
            self._room_queue.append(me)
            try:
                while True:
                    if self.closed:
                        raise SystemClosed("the memory system is closed")
                    held, releasing = self._slot_counts()
                    ahead = self._room_queue.index(me)  # activations queued before me
                    if held < cap and ahead < cap - held:
                        me.slot = True
                        return
                    victim = None
                    if releasing < ahead + 1 - max(0, cap - held):
                        victim = self._pick_lru_idle(exclude=me)
                    if victim is not None:
                        self._cond.release()
                        try:
                            drain(victim)
                        finally:
                            self._cond.acquire()
                        continue
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        raise Overloaded(
                            f"{cap} users are active and busy (max_active_users={cap})"
                        )
                    self._cond.wait(remaining)
            finally:
                self._room_queue.remove(me)
                self._cond.notify_all()  # the next one in the queue may take a free slot

    def pick_above(self, limit: int) -> UserEntry | None:
        """With more than ``limit`` group slots held and not being released, move the
        least recently used idle user to ``DRAINING`` and return it (None otherwise, or
        when every such user is busy)."""
        with self._cond:
            if self.closed:
                return None
            held, releasing = self._slot_counts()
            if held - releasing <= limit:
                return None
            return self._pick_lru_idle()

    def close(self) -> list[UserEntry]:
        """Refuse new calls and operations; return the entries still live (a copy)."""
        with self._cond:
            self.closed = True
            self._cond.notify_all()
            return list(self._entries.values())

    def wait_settled(self, deadline: float) -> bool:
        """Wait until no entry is in a transition (or ``deadline``); True if settled."""
        with self._cond:
            while any(e.phase not in (UserPhase.ACTIVE,) for e in self._entries.values()):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._cond.wait(remaining)
            return True

    # -- internals ----------------------------------------------------------------------

    def _slot_counts(self) -> tuple[int, int]:
        """``(held, releasing)``: group slots held, and how many of them belong to users
        whose group is being stopped (``DRAINING``, ``FORGETTING``, ``REPAIRING``) and will
        be free soon.
        Caller holds the lock."""
        held = releasing = 0
        for e in self._entries.values():
            if e.slot:
                held += 1
                if e.phase in (UserPhase.DRAINING, UserPhase.FORGETTING, UserPhase.REPAIRING):
                    releasing += 1
        return held, releasing

    def _pick_lru_idle(self, exclude: UserEntry | None = None) -> UserEntry | None:
        """Move the least recently used idle, unpinned ``ACTIVE`` user to ``DRAINING``
        and return it (None if there is none). Caller holds the lock."""
        for entry in self._entries.values():
            if (
                entry.phase is UserPhase.ACTIVE
                and entry.inflight == 0
                and entry is not exclude
                and not self._is_pinned(entry.user_id)
            ):
                self._change_phase(entry, UserPhase.DRAINING)
                return entry
        return None

    def _move(self, entry: UserEntry, phase: UserPhase) -> None:
        """Move a live ``entry`` to ``phase`` (see :meth:`_change_phase`)."""
        with self._cond:
            if self._entries.get(entry.user_id) is not entry:
                # A stale entry (already removed) must not come back to life.
                raise TransitionError(
                    f"user {entry.user_id!r}: this entry is no longer live "
                    f"({entry.phase.value} -> {phase.value} refused)"
                )
            self._change_phase(entry, phase)

    def _change_phase(self, entry: UserEntry, phase: UserPhase) -> None:
        """The one place a user's phase changes: check ``entry.phase -> phase`` against
        :data:`TRANSITIONS`, add the entry to the table when it leaves ``PASSIVE`` and
        remove it when it goes back, count the change, wake the waiters. Caller holds the
        lock; an entry leaving ``PASSIVE`` is new and its user has no entry."""
        check_transition(entry.phase, phase)
        if entry.phase is UserPhase.PASSIVE:
            self._entries[entry.user_id] = entry
        elif phase is UserPhase.PASSIVE:
            del self._entries[entry.user_id]
        entry.phase = phase
        self.counts[phase.value] += 1
        self._cond.notify_all()
