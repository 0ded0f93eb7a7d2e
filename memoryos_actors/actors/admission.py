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

from supervisor import SafeEvent

from ..errors import Overloaded
from ..fairness import FairQueue

__all__ = ["DrainLimit", "FairGate", "FairShare"]


class DrainLimit:
    """How many items a queue may hold: the items its consumer takes in ``drain_seconds``
    at its measured pace, between ``floor`` and ``cap`` (``initial`` until a pace is known).

    The pace is a running mean (weight ``alpha`` for the newest) of the time per item
    between two consecutive takes during which the consumer had work all along; a take of
    ``n`` items at once counts ``n`` items. Not thread-safe: its owner's lock guards it.
    """

    __slots__ = ("alpha", "busy_since", "cap", "drain_seconds", "floor", "limit", "pace")

    def __init__(
        self, drain_seconds: float, floor: int, cap: int, *, alpha: float, initial: int
    ) -> None:
        if not 1 <= floor <= cap:
            raise ValueError(f"need 1 <= floor <= cap, got floor={floor!r}, cap={cap!r}")
        self.drain_seconds = drain_seconds
        self.floor = floor
        self.cap = cap
        self.alpha = alpha
        self.limit = initial
        #: Seconds per item while the consumer is busy (None: not measured yet).
        self.pace: float | None = None
        #: Since when the consumer has had work all along (monotonic s; None: idle).
        self.busy_since: float | None = None

    def taken(self, now: float, n: int, left: int) -> None:
        """The consumer took ``n`` items at ``now``; ``left`` are still queued."""
        if self.busy_since is not None and n >= 1:
            gap = (now - self.busy_since) / n
            pace = gap if self.pace is None else self.pace + self.alpha * (gap - self.pace)
            self.pace = pace
            fits = int(self.drain_seconds / pace) if pace > 0 else self.cap
            self.limit = max(self.floor, min(self.cap, fits))
        self.busy_since = now if left > 0 else None


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

    :meth:`enter` lets a writer through at once while the total is under the limit; when
    its user has no page queued; while its user holds less than a fair share of the limit
    (divided among the users with pages queued) and the total is under twice it; or while
    its user has few pages queued (one, or under half the mean) and the total is under
    three times it: a quiet user never waits for a flood. Otherwise the writer waits, and
    each page placed lets one waiting writer through, the one whose user has the fewest
    pages queued (the earliest arrival among equals); only that writer's thread is woken.
    The total therefore stays within three times the limit plus one page per user (let in
    with nothing queued) plus the writers let through whose page is not counted yet (at
    most one per call in flight).
    """

    def __init__(self, drain_seconds: float, floor: int, cap: int) -> None:
        self._drain = DrainLimit(drain_seconds, floor, cap, alpha=1.0 / 32.0, initial=floor)
        self._lock = threading.Lock()
        self._queued: dict[str, int] = {}
        self._total = 0
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
            drain = self._drain
            if queued > old:
                if drain.busy_since is None:
                    drain.busy_since = now
                return
            placed = old - queued
            self._progress += 1
            drain.taken(now, placed, self._total)
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
        """Whether ``user`` may add a page now (lock held): under the limit; or with no
        page queued; or below its fair share of the limit while the total is under twice
        it; or with few pages queued (one, or under half the mean of the users with pages
        queued) while the total is under three times it.

        A user's queue is its write rate times the time a page waits, so under one wait a
        quiet user (a turn now and then, its last one maybe still on its way to MTM)
        holds far fewer pages than the flooding users: a flood that holds the total at
        its bound does not hold up a quiet user's turn (it did, for up to 150 ms behind a
        200 ms provider). Without the bounds every newcomer's share (at least one page)
        came on top: many users arriving one after another took the total past any
        multiple of the limit. Past three times the limit only a user with nothing queued
        passes, one page, which it then has queued: at most one page per user. Whoever
        waits is let in fewest-queued first, so a newcomer still goes ahead of the users
        that have pages queued."""
        total, limit = self._total, self.limit
        if total < limit:
            return True
        queued = self._queued
        mine = queued.get(user, 0)
        if mine == 0:
            return True  # one page, and it has one queued: at most one per user past the bound
        users = len(queued) + (0 if user in queued else 1)
        if total >= 2 * limit:
            # Few queued (one, or under half the mean of the users with pages queued): a
            # user writing well below the others' pace (a queue is its rate times the wait).
            return total < 3 * limit and (mine <= 1 or 2 * mine * users < total)
        return mine < limit // users

    def enter(self, user: str, timeout: float) -> None:
        """Wait until the process has room for ``user``'s next page, in fair order.

        Raises :class:`Overloaded` only when no page at all was placed for ``timeout``
        seconds while this writer waited.
        """
        with self._lock:
            if self._free_pass(user):
                return
            me = next(self._arrivals)
            event = SafeEvent()
            self._waiters[me] = (user, event)
            self.waits += 1
            seen = self._progress
        deadline = time.monotonic() + timeout
        while not event.wait(max(0.0, deadline - time.monotonic())):
            with self._lock:
                if event.is_set():
                    return
                if self._free_pass(user):
                    self._waiters.pop(me, None)
                    return
                if self._progress != seen:
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
    def limit(self) -> int:
        """The bound on the pages queued in all, now."""
        return self._drain.limit

    @property
    def pace(self) -> float | None:
        """Measured seconds per placed page, the whole process (None: not yet known)."""
        return self._drain.pace
