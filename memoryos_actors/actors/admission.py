"""Fairness between users: who may queue background work, and whose work runs next.

Two process-wide services, shared by every user's actors:

- :class:`FairGate` admits writers. Each user's placement queue (pages between
  ``add_turn`` and their placement in MTM) is bounded by its own drain time
  (:class:`~.base.PlacementBacklog`); the gate bounds the *sum* of all users' queues by the
  whole process's drain time, so 100 users x 16 pages never queue seconds of work in front
  of everyone. A writer that finds the process behind waits, and the waiting writers are let
  through in fair order: the writer whose user has the fewest pages queued goes first, so a
  quiet user passes a flood at once. A wait ends in
  :class:`~memoryos_actors.errors.Overloaded` only when nothing at all was placed for
  ``timeout`` seconds (the background work is stuck, not merely busy).
- :class:`FairShare` schedules background work. An MTM actor holds one of a few *run
  permits* while it places pages; permits go to the waiting users in start-time fair
  queueing order (each user's next turn starts where its last one finished in virtual time,
  never earlier than the system's virtual time), so a user that was idle is served next,
  and a user with a long queue gets its share, not everyone's. Under CPython's GIL this also
  keeps the number of threads contending for the interpreter small: a hundred runnable MTM
  threads would each wait a hundred switch intervals for their turn.

Both are thread-safe and hold no reference to actors.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable

from ..errors import Overloaded
from ..fairness import FairQueue

__all__ = ["FairGate", "FairShare"]


class FairShare:
    """``permits`` run permits shared by threads, granted in :class:`FairQueue` order.

    A holder reports how long it held its permit (:meth:`release`'s ``used``). Each request
    holds a *ticket* (a fresh ``threading.Event``) from before :meth:`acquire` until
    :meth:`release`, which is idempotent and right in every state (waiting, granted,
    holding): call it in a ``finally`` that covers the ``acquire`` too.
    """

    def __init__(self, permits: int) -> None:
        self._lock = threading.Lock()
        self._queue = FairQueue(permits)
        self.permits = permits

    def acquire(self, user: str, ticket: threading.Event, cancelled: Callable[[], bool]) -> bool:
        """Wait for a permit for ``user``; True once held, False if ``cancelled()`` became
        true first (whoever makes it true then sets ``ticket`` to wake the wait)."""
        with self._lock:
            q = self._queue
            if ticket in q.holders or q.request(ticket, user):
                return True
        while True:
            with self._lock:
                ticket.clear()  # before the checks: a wake-up after them is not lost
                if ticket in self._queue.holders:
                    return True
                if cancelled():
                    self._queue.withdraw(ticket)
                    return False
            ticket.wait()

    def release(self, ticket: threading.Event, used: float = 0.0) -> None:
        """Done with ``ticket`` after holding its permit ``used`` seconds (the permit goes
        to the next request in fair order); a waiting ticket just leaves. Idempotent."""
        with self._lock:
            if self._queue.withdraw(ticket):
                return
            nxt = self._queue.done(ticket, used)
        if isinstance(nxt, threading.Event):
            nxt.set()

    @property
    def waiting(self) -> int:
        """Requests waiting for a permit."""
        with self._lock:
            return len(self._queue.waiting)

    @property
    def grants(self) -> int:
        """Permits granted so far."""
        return self._queue.grants


class FairGate:
    """The bound on all users' placement queues together, and the fair order of writers.

    Each user's queue length is reported with :meth:`update` (by its
    :class:`~.base.PlacementBacklog`, on every change). The consumers' pace is measured as
    the mean time between two consecutive decreases while pages were queued; the limit on
    the total is the pages the process places in ``drain_seconds`` at that pace, between
    ``floor`` and ``cap`` (``floor`` until the pace is known: a process that has placed
    nothing yet, behind a slow provider say, does not admit ``cap`` pages in one go).

    :meth:`enter` lets a writer through at once while the total is under the limit, or
    while its own user holds less than a fair share of it (the limit divided among the
    users with pages queued): a quiet user never waits for a flood. Otherwise the writer
    waits, and each page placed lets one waiting writer through, the one whose user has
    the fewest pages queued (the earliest arrival among equals); only that writer's thread
    is woken. The total therefore stays within twice the limit plus the writers let
    through whose page is not counted yet (at most one per call in flight).
    """

    _ALPHA = 1.0 / 32.0

    def __init__(self, drain_seconds: float, floor: int, cap: int) -> None:
        if not 1 <= floor <= cap:
            raise ValueError(f"need 1 <= floor <= cap, got floor={floor!r}, cap={cap!r}")
        self.drain_seconds = drain_seconds
        self.floor = floor
        self.cap = cap
        self.limit = floor
        self._lock = threading.Lock()
        self._queued: dict[str, int] = {}
        self._total = 0
        self._pace: float | None = None
        self._busy_since: float | None = None
        #: Decreases seen so far: a waiter that sees this move knows work is progressing.
        self._progress = 0
        self._arrivals = itertools.count()
        #: Waiting writers: arrival number -> (user, the event that lets it through).
        self._waiters: dict[int, tuple[str, threading.Event]] = {}
        self.waits = 0
        self.refused = 0

    def update(self, user: str, queued: int) -> None:
        """``user`` has ``queued`` pages waiting for placement now."""
        now = time.monotonic()
        with self._lock:
            old = self._queued.get(user, 0)
            if queued == old:
                return
            if queued:
                self._queued[user] = queued
            else:
                self._queued.pop(user, None)
            self._total += queued - old
            if queued > old:
                if self._busy_since is None:
                    self._busy_since = now
                return
            placed = old - queued
            self._progress += 1
            if self._busy_since is not None:
                gap = (now - self._busy_since) / placed
                pace = gap if self._pace is None else self._pace + self._ALPHA * (gap - self._pace)
                self._pace = pace
                fits = int(self.drain_seconds / pace) if pace > 0 else self.cap
                self.limit = max(self.floor, min(self.cap, fits))
            self._busy_since = now if self._total > 0 else None
            if self._waiters:
                self._let_through(max(placed, self.limit - self._total))

    def _let_through(self, n: int) -> None:
        """Wake the ``n`` waiting writers first in fair order (lock held)."""
        if n >= len(self._waiters):
            chosen = list(self._waiters)
        else:
            q = self._queued
            chosen = sorted(self._waiters, key=lambda a: (q.get(self._waiters[a][0], 0), a))[:n]
        for arrival in chosen:
            _user, event = self._waiters.pop(arrival)
            event.set()

    def _free_pass(self, user: str) -> bool:
        """Under the limit, or ``user`` below its fair share of it (lock held)."""
        if self._total < self.limit:
            return True
        share = self.limit // max(1, len(self._queued))
        return self._queued.get(user, 0) < share

    def enter(self, user: str, timeout: float) -> None:
        """Wait until the process has room for ``user``'s next page, in fair order.

        Raises :class:`Overloaded` only when no page at all was placed for ``timeout``
        seconds while this writer waited.
        """
        with self._lock:
            if self._free_pass(user):
                return
            me = next(self._arrivals)
            event = threading.Event()
            self._waiters[me] = (user, event)
            self.waits += 1
            seen = self._progress
        deadline = time.monotonic() + timeout
        while not event.wait(max(0.0, deadline - time.monotonic())):
            with self._lock:
                if event.is_set():
                    return
                if self._progress != seen or self._free_pass(user):
                    if self._free_pass(user):
                        self._waiters.pop(me, None)
                        return
                    seen = self._progress
                    deadline = time.monotonic() + timeout
                    continue
                self._waiters.pop(me, None)
                self.refused += 1
                raise Overloaded(
                    f"{self._total} pages queued for placement in all "
                    f"(limit {self.limit}) and none placed for {timeout:.3g} s"
                )

    @property
    def total(self) -> int:
        """Pages queued for placement, all users together."""
        return self._total

    @property
    def waiting(self) -> int:
        """Writers waiting for room."""
        with self._lock:
            return len(self._waiters)

    @property
    def pace(self) -> float | None:
        """Measured seconds per placed page, the whole process (None: not yet known)."""
        return self._pace

    def queued(self, user: str) -> int:
        """Pages of ``user`` queued for placement, as last reported."""
        with self._lock:
            return self._queued.get(user, 0)
