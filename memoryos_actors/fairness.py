"""Start-time fair queueing of a few permits between users: a pure core, no threads.

Used where many users share a small number of slots: the run permits of MTM placement
(:class:`~memoryos_actors.actors.admission.FairShare`) and the provider's concurrency slots
(:class:`~memoryos_actors.gateway.resilience.AsyncConcurrencyLimiter`). A user with a long
queue of work gets its share of the slots; a user that was idle is served next. Within one
user's share, an *urgent* request (one that something waits on, such as a page's chain
meta that its placement needs) takes the place of that user's earliest other request.
"""

from __future__ import annotations

import heapq
import itertools

__all__ = ["FairQueue"]


class FairQueue:
    """Start-time fair queueing of ``permits`` permits between users: the pure core of
    the callers (no threads, no clock: the caller says how long a grant was used).

    Each request of ``user`` gets a start tag: the later of the system's virtual time and
    the user's virtual finish, which then moves on by the user's estimated cost (the
    running mean of the time its grants were held), so a user's queued requests line up
    one behind the other; when a grant ends, the estimate is corrected by what it really
    used. While a permit is free and nobody waits, a request is granted at once;
    otherwise it waits, and each :meth:`done` hands the permit to the waiting request with
    the smallest start (the earliest among equal starts). The system's virtual time is the
    start of the last grant; a user whose finish is behind it earns no credit for the time
    it was idle, and a user that was idle starts right there, ahead of users with queued
    requests.

    A request made ``urgent`` goes ahead of the same user's waiting requests that are not
    urgent and start earlier: it takes the earliest of their start tags and each of them
    moves back one place (the last takes the urgent request's own). The user's places in
    the queue (its start tags) are unchanged, so other users see no difference; only the
    order of the user's own requests is. Urgent requests keep their arrival order among
    themselves, and so do the others.
    """

    def __init__(self, permits: int) -> None:
        if permits < 1:
            raise ValueError(f"permits must be >= 1, got {permits!r}")
        self.permits = permits
        self.free = permits
        self._seq = itertools.count()
        #: (start, place, entry, key) of waiting requests: ``place`` orders equal starts
        #: (the arrival of the request the start tag was made for); an entry that is not its
        #: key's current one (withdrawn, granted, or moved by an urgent request) is skipped
        #: when popped.
        self._heap: list[tuple[float, int, int, object]] = []
        self._entries = itertools.count()
        #: Each waiting request's current (place, heap entry number).
        self._entry: dict[object, tuple[int, int]] = {}
        #: Each user's waiting requests that are not urgent (what an urgent one may pass;
        #: a waiting request not among them is urgent).
        self._plain: dict[str, set[object]] = {}
        #: key -> (user, start, estimated cost) of waiting requests and of holders.
        self.waiting: dict[object, tuple[str, float, float]] = {}
        self.holders: dict[object, tuple[str, float, float]] = {}
        #: Each user's virtual finish time (entries at or behind ``vtime`` are dropped).
        self._finish: dict[str, float] = {}
        #: Each user's estimated cost of one grant, seconds (running mean).
        self._cost: dict[str, float] = {}
        self.vtime = 0.0
        self.grants = 0

    #: The cost assumed for a user's first grant, and the weight of a new measurement.
    FIRST_COST = 0.001
    ALPHA = 0.25

    def start_of(self, user: str) -> float:
        """Where a request of ``user`` made now would start."""
        return max(self.vtime, self._finish.get(user, 0.0))

    def _tag(self, user: str) -> tuple[str, float, float]:
        start = self.start_of(user)
        est = self._cost.get(user, self.FIRST_COST)
        self._finish[user] = start + est
        return user, start, est

    def request(self, key: object, user: str, *, urgent: bool = False) -> bool:
        """Ask for a permit under ``key`` (any hashable, unique while in use); True if
        granted at once, False if it waits. An ``urgent`` request goes ahead of the same
        user's waiting requests that are not (see the class docstring)."""
        tag = self._tag(user)
        if self.free > 0 and not self.waiting:
            self.free -= 1
            self._grant(key, tag)
            return True
        place = next(self._seq)
        if urgent:
            plain = self._plain.get(user)
            if plain:
                # The urgent request takes the earliest of the user's places (its waiting
                # requests' and its own), the others the rest in their order.
                others = sorted(plain, key=lambda k: (self.waiting[k][1], self._entry[k][0]))
                places = sorted(
                    [(self.waiting[k], self._entry[k][0]) for k in others] + [(tag, place)],
                    key=lambda tp: (tp[0][1], tp[1]),
                )
                for k, later in zip(others, places[1:], strict=True):
                    self._queue(k, *later)
                tag, place = places[0]
        else:
            self._plain.setdefault(user, set()).add(key)
        self._queue(key, tag, place)
        return False

    def _unwait(self, key: object) -> tuple[str, float, float]:
        """Take ``key`` off the waiting list; returns its tag."""
        tag = self.waiting.pop(key)
        del self._entry[key]
        plain = self._plain.get(tag[0])
        if plain is not None and key in plain:
            plain.discard(key)
            if not plain:
                del self._plain[tag[0]]
        return tag

    def _queue(self, key: object, tag: tuple[str, float, float], place: int) -> None:
        entry = next(self._entries)
        self.waiting[key] = tag
        self._entry[key] = (place, entry)
        heapq.heappush(self._heap, (tag[1], place, entry, key))

    def withdraw(self, key: object) -> bool:
        """Take a waiting request back; True if it was waiting."""
        if key not in self.waiting:
            return False
        user, _start, est = self._unwait(key)
        self._finish[user] = self._finish.get(user, 0.0) - est  # its place is given back
        return True

    def done(self, key: object, used: float) -> object | None:
        """The holder of ``key`` is done after ``used`` seconds: returns the key granted the
        permit next (None: nobody waits, the permit is free again, or ``key`` held none)."""
        held = self.holders.pop(key, None)
        if held is None:
            return None
        user, _start, est = held
        used = max(0.0, used)
        self._finish[user] = self._finish.get(user, 0.0) + used - est
        self._cost[user] = est + self.ALPHA * (used - est)
        if len(self._finish) > 4096:
            v = self.vtime
            self._finish = {u: f for u, f in self._finish.items() if f > v}
            self._cost = {u: c for u, c in self._cost.items() if u in self._finish}
        while self._heap:
            _start, place, entry, nxt = heapq.heappop(self._heap)
            if self._entry.get(nxt) != (place, entry):
                continue  # withdrawn, or moved to another start by an urgent request
            self._grant(nxt, self._unwait(nxt))
            return nxt
        self.free += 1
        return None

    def _grant(self, key: object, tag: tuple[str, float, float]) -> None:
        self.holders[key] = tag
        self.vtime = max(self.vtime, tag[1])
        self.grants += 1
