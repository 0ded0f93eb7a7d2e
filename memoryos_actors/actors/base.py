"""What the actors of one memory system share: the per-user environment, bounded backlogs,
and the client through which tiers reach the LLM gateway.

Nothing here holds tier state. A :class:`UserEnv` is an immutable bundle of handles (the
user's store, the gateway client, the registry, the clock); the stores and the gateway are
thread-safe services, so actors may share them without sharing memory contents.
"""

from __future__ import annotations

import functools
import itertools
import json
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import structlog

from supervisor import SafeCondition

from ..errors import Overloaded
from ..store.paths import ASSISTANT_PREFIX
from .admission import DrainLimit
from .persist import recover

log = structlog.get_logger("memoryos.gateway")

if TYPE_CHECKING:
    from supervisor import Registry

    from ..clock import Clock
    from ..config import MemoryConfig
    from ..gateway.service import GatewayService
    from ..store.snapshot import Recovered
    from ..store.userstore import UserStore
    from .admission import FairGate, FairShare
    from .protocol import CompletionDone

__all__ = [
    "ASSISTANT_PREFIX",
    "Backlog",
    "GatewayClient",
    "JobWatch",
    "Metrics",
    "PlacementBacklog",
    "Preload",
    "UserEnv",
    "actor_names",
    "percentile",
    "persona_owner",
]

#: Degraded jobs whose askers are remembered for redo (the oldest are forgotten first).
_DEGRADED_MEMORY = 4096


class CatchUpGate:
    """At most ``slots`` MTM catch-ups run at once in the process; the rest wait their turn,
    first come first served.

    A catch-up (placing the pages a previous incarnation of the user left in the WAL) is
    CPU work in Python: under the GIL, several at once finish no sooner than one after the
    other, and each one running takes the interpreter from every other thread, such as
    the threads activating users. The gate runs them one at a time (by default), so an
    activation storm is not slowed by the catch-ups it starts; a catch-up whose actor is
    asked to stop while it waits gives up its place (the WAL still holds the pages).

    Each catch-up holds a *ticket* (a fresh ``threading.Event``) from before :meth:`enter`
    until :meth:`release`, which is idempotent and right in every state (waiting, granted,
    holding): call it in a ``finally`` that covers the ``enter`` too, so an actor killed
    anywhere in between (an asynchronous exception) never keeps a slot. Thread-safe.
    """

    def __init__(self, slots: int = 1) -> None:
        if slots < 1:
            raise ValueError(f"slots must be >= 1, got {slots!r}")
        self._lock = threading.Lock()
        self._free = slots
        self._queue: OrderedDict[threading.Event, None] = OrderedDict()
        #: Tickets holding a slot, or handed one while still waking up.
        self._holders: set[threading.Event] = set()

    def enter(self, ticket: threading.Event, cancelled: Callable[[], bool]) -> bool:
        """Wait for a slot with ``ticket``; True once it holds one, False if
        ``cancelled()`` became true first. Whoever makes ``cancelled()`` true then sets
        ``ticket`` to wake the wait."""
        with self._lock:
            if ticket in self._holders:
                return True
            if self._free > 0 and not self._queue:
                self._free -= 1
                self._holders.add(ticket)
                return True
            self._queue[ticket] = None
        while True:
            with self._lock:
                # Cleared before the checks: a wake-up (a grant, or a stop that made
                # cancelled() true before setting the ticket) after them is not lost.
                ticket.clear()
                if ticket in self._holders:
                    return True
                if cancelled():
                    self._queue.pop(ticket, None)
                    return False
            ticket.wait()

    def release(self, ticket: threading.Event) -> None:
        """Done with ``ticket``: its slot (if it holds or was handed one) goes to the
        longest waiting ticket, or back to the free ones; a waiting ticket leaves the queue.
        Idempotent."""
        with self._lock:
            self._queue.pop(ticket, None)
            if ticket not in self._holders:
                return
            self._holders.discard(ticket)
            if self._queue:
                nxt, _ = self._queue.popitem(last=False)
                self._holders.add(nxt)
                nxt.set()
            else:
                self._free += 1

    @property
    def waiting(self) -> int:
        """Catch-ups waiting for a slot."""
        with self._lock:
            return len(self._queue)


class Backlog:
    """A counter of queued background work with an upper bound.

    ``acquire`` waits (up to ``timeout`` seconds) while ``limit`` items are pending, then
    raises :class:`~memoryos_actors.errors.Overloaded`: a flood gets a clear answer instead of
    an unbounded queue. ``release`` is called when an item has been handled.
    """

    __slots__ = ("_cond", "_count", "limit", "name")

    def __init__(self, limit: int, name: str) -> None:
        self.limit = limit
        self.name = name
        self._count = 0
        self._cond = SafeCondition(threading.Lock())

    def acquire(self, timeout: float) -> None:
        """Reserve one slot, waiting at most ``timeout`` seconds."""
        with self._cond:
            self._wait_for_room(timeout)
            self._count += 1

    def _wait_for_room(self, timeout: float, moving: Callable[[], bool] | None = None) -> None:
        """Wait (lock held) until fewer than ``limit`` items are pending, else raise
        :class:`~memoryos_actors.errors.Overloaded` after ``timeout`` seconds; with
        ``moving``, the timeout counts from the last time ``moving()`` said the queue moves
        (seconds without progress, not seconds in all)."""
        deadline = time.monotonic() + timeout
        while self._count >= self.limit:
            if moving is not None and moving():
                deadline = time.monotonic() + timeout
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                how = "none placed for" if moving is not None else "waited"
                raise Overloaded(
                    f"{self.name}: {self._count} items pending (limit {self.limit}); "
                    f"{how} {timeout:.3g} s"
                )
            self._cond.wait(remaining)

    def force_acquire(self) -> None:
        """Count one more pending item even above the limit (the caller waited already)."""
        with self._cond:
            self._count += 1

    def try_acquire(self) -> bool:
        """Reserve one slot if one is free now; never waits."""
        with self._cond:
            if self._count >= self.limit:
                return False
            self._count += 1
            return True

    def wait_below_limit(self, timeout: float) -> None:
        """Wait (up to ``timeout`` seconds) until a slot is free, without reserving it."""
        with self._cond:
            if self._count < self.limit:
                return
            if not self._cond.wait_for(lambda: self._count < self.limit, timeout):
                raise Overloaded(
                    f"{self.name}: {self._count} items pending (limit {self.limit}); "
                    f"waited {timeout:.3g} s"
                )

    def release(self, n: int = 1) -> None:
        """Free ``n`` slots (never below zero: a restarted consumer may reset)."""
        with self._cond:
            self._count = max(0, self._count - n)
            self._cond.notify_all()

    def reset(self) -> None:
        """Forget every pending item (the consumer restarted and lost its mailbox)."""
        with self._cond:
            self._count = 0
            self._cond.notify_all()

    @property
    def pending(self) -> int:
        """Items reserved and not yet released."""
        return self._count


class PlacementBacklog(Backlog):
    """A user's placement queue (pages between ``add_turn`` and their placement in MTM),
    bounded by how long it takes to drain rather than by a fixed count.

    Any barrier on the user (``flush``, ``export_user``) waits for the pages queued before
    it, so a queue admitted by count alone holds, under a flood, its whole count of work:
    256 pages at ~10 ms each under load is 2.5 s that every flush of the user waits. Here
    the consumer's pace is measured (the time between two consecutive :meth:`release`
    calls while more pages were queued, averaged) and the limit set to the pages it drains
    in ``drain_seconds``, between ``floor`` and ``cap``. The pipeline's throughput does not
    change (the consumer always has work queued while writers wait); only the queue's
    length in time does. Until the pace is known (a fresh incarnation, or one still
    placing the pages a previous one left: that catch-up releases nothing) the limit is
    ``cap``, so writes are not held up while MTM recovers. Thread-safe.
    """

    __slots__ = (
        "_drain",
        "_gate",
        "_on_lag",
        "_progress",
        "_handoffs",
        "_since",
        "_told",
        "_waiting_turn",
        "lags",
        "user",
    )

    def __init__(
        self,
        name: str,
        drain_seconds: float,
        floor: int,
        cap: int,
        *,
        user: str = "",
        gate: FairGate | None = None,
        on_lag: Callable[[float], None] | None = None,
    ) -> None:
        #: The limit: drain_seconds of the consumer's pace (``cap`` until it is known).
        self._drain = DrainLimit(drain_seconds, floor, cap, alpha=1.0 / 16.0, initial=cap)
        super().__init__(cap, name)
        self.user = user
        #: The process's bound on all users' queues together (None: this queue alone).
        self._gate = gate
        #: Called with each placed page's settle lag, milliseconds.
        self._on_lag = on_lag
        #: When each queued item was queued (monotonic s), oldest first.
        self._since: deque[float] = deque()
        #: Releases so far: a waiting writer that sees this move knows the queue drains.
        self._progress = 0
        #: Whether the consumer is waiting for its fair turn to place (behind other users:
        #: busy, not stuck), see :meth:`turn_waiting`.
        self._waiting_turn = False
        #: Queued pages handed to the consumer (told to MTM) and not yet taken; the others
        #: wait upstream for their page meta at the shared gateway (see :meth:`told`).
        self._told = 0
        #: Hand-offs to the consumer so far (a waiting writer that sees this move knows
        #: its pages got through the gateway).
        self._handoffs = 0
        #: The last settle lags (ms): queued to taken by the consumer.
        self.lags: deque[float] = deque(maxlen=512)

    def force_acquire(self) -> None:
        """Count one more queued page (the writer waited for room already)."""
        with self._cond:
            self._count += 1
            self._since.append(time.monotonic())
            count = self._count
        if self._gate is not None:
            self._gate.update(self.user, count)

    def admit(self, timeout: float) -> None:
        """Wait for room for one more page: in this user's queue, then in the process's
        (:class:`~.admission.FairGate`, fair order between users). Raises
        :class:`~memoryos_actors.errors.Overloaded` only when the queue waited on placed
        nothing for ``timeout`` seconds while its consumer was not waiting for its fair
        turn (it is stuck): a busy system slows writers, it does not refuse them."""
        seen = (self._progress, self._handoffs)

        def moving() -> bool:
            # The queue moved (pages placed, or handed to the consumer since), or its
            # consumer waits for its fair turn behind other users, or it holds none of the
            # queued pages (they wait for their page meta at the gateway, in fair order
            # with every other user's, whose own timeouts bound that wait): busy, not
            # stuck; wait on. Only a consumer that holds pages and takes none is stuck.
            nonlocal seen
            now = (self._progress, self._handoffs)
            if now != seen or self._waiting_turn or self._told == 0:
                seen = now
                return True
            return False

        with self._cond:
            self._wait_for_room(timeout, moving)
        if self._gate is not None:
            self._gate.enter(self.user, timeout)

    def release(self, n: int = 1) -> None:
        """Free ``n`` slots (the consumer takes an item), and update the pace and limit."""
        now = time.monotonic()
        lags: list[float] = []
        with self._cond:
            # Only an interval in which the consumer had work all along measures its pace.
            self._drain.taken(now, n, self._count - n)
            self.limit = self._drain.limit
            self._count = max(0, self._count - n)
            self._told = max(0, self._told - n)
            for _ in range(min(n, len(self._since))):
                lags.append((now - self._since.popleft()) * 1000.0)
            self.lags.extend(lags)
            self._progress += 1
            count = self._count
            if count < self.limit:
                # Writers wait only while the queue is at its limit; one that waits sees
                # the progress counter when its deadline comes (no wake-up per page).
                self._cond.notify_all()
        if self._gate is not None:
            self._gate.update(self.user, count)
        if self._on_lag is not None:
            for lag in lags:
                self._on_lag(lag)

    def told(self, n: int) -> None:
        """``n`` queued pages were handed to the consumer (STM told them to MTM): from now
        on a wait that sees none of the consumer's pages taken may be a stuck consumer.
        A negative ``n`` takes back pages whose hand-off failed."""
        with self._cond:
            self._told = max(0, self._told + n)
            if n > 0:
                self._handoffs += 1

    def turn_waiting(self, waiting: bool) -> None:
        """The consumer starts (True) or stops (False) waiting for its turn to place."""
        self._waiting_turn = waiting

    def reset(self) -> None:
        """Forget every pending item (the consumer restarted and lost its mailbox)."""
        with self._cond:
            self._drain.busy_since = None
            self._since.clear()
            self._told = 0
            self._progress += 1
        super().reset()
        if self._gate is not None:
            self._gate.update(self.user, 0)

    @property
    def pace(self) -> float | None:
        """Measured seconds per item while the consumer is busy (None: not measured yet)."""
        return self._drain.pace

    def oldest_age(self) -> float:
        """Seconds the oldest page still queued has waited (0.0: none queued)."""
        with self._cond:
            return time.monotonic() - self._since[0] if self._since else 0.0


#: The prefix of the placeholder of a persona update LPM dropped (:meth:`JobWatch.owe_again`).
_AGAIN = "again."


class JobWatch:
    """The gateway jobs a user's MTM owes, mirrored where other threads can wait on them.

    MTM, the only writer, notes each job it owes and each it settles (answered and
    applied: a summary stored, a persona update handed to LPM) under the token of its
    incarnation; a new incarnation starts a new token and an empty set. ``flush`` learns
    which jobs to wait for from MTM itself, then waits here rather than asking MTM again
    through a mailbox that a placement backlog may make seconds long.

    A job whose answer was dropped (it read a page deleted since) is settled with the
    jobs that ask again in its place, its *successors*: whoever waits for it waits for
    them, so a flush asked before the deletion still covers the redone summary or
    persona update. Thread-safe.
    """

    def __init__(self) -> None:
        self._cond = SafeCondition(threading.Lock())
        self._token = ""
        self._owed: set[str] = set()
        #: Settled jobs replaced by successors, while a successor (or one of theirs) is
        #: still owed.
        self._replaced: dict[str, tuple[str, ...]] = {}

    def start(self, token: str) -> None:
        """A new MTM incarnation ``token`` owes nothing yet (its recovery notes what it
        takes over)."""
        with self._cond:
            self._token = token
            self._owed.clear()
            self._replaced.clear()
            self._cond.notify_all()

    def owe(self, token: str, job_id: str) -> None:
        """Incarnation ``token`` asked for job ``job_id`` (ignored from an older one)."""
        with self._cond:
            if token == self._token:
                self._owed.add(job_id)

    def owe_again(self, job_id: str) -> tuple[str, str]:
        """A persona update LPM dropped (it read a page deleted on its way) is owed again,
        until MTM asks for it anew and settles ``"again.<job_id>"`` with the jobs it
        asked (:meth:`settle`). Returns ``(token, id)`` of that placeholder."""
        with self._cond:
            placeholder = f"{_AGAIN}{job_id}"
            self._owed.add(placeholder)
            return self._token, placeholder

    def owed_again(self, token: str) -> frozenset[str]:
        """The placeholders of :meth:`owe_again` incarnation ``token`` still owes, itself
        or through the jobs MTM asked in their place (:meth:`left` follows those)."""
        with self._cond:
            if token != self._token:
                return frozenset()
            return frozenset(
                j
                for j in itertools.chain(self._owed, self._replaced)
                if j.startswith(_AGAIN) and self._open((j,))
            )

    def settle(self, token: str, job_id: str, successors: Iterable[str] = ()) -> None:
        """Job ``job_id`` of incarnation ``token`` is answered and applied, or replaced by
        the jobs ``successors`` (asked for already)."""
        with self._cond:
            if token != self._token:
                return
            self._owed.discard(job_id)
            follow = tuple(j for j in successors if j != job_id)
            if follow:
                self._replaced[job_id] = follow
            if self._replaced:
                self._forget_done()
            self._cond.notify_all()

    def _forget_done(self) -> None:
        """Forget the replaced jobs that stand for nothing owed any more.

        A job's successors are asked before it is settled, so they are settled (and
        replaced) after it: one pass from the newest replacement back decides them all.
        The passes after it only confirm that (no recursion, and linear time, however long
        a chain of replacements the deletions made)."""
        alive = set(self._owed)
        changed = True
        while changed:
            changed = False
            for old in reversed(self._replaced):
                if old not in alive and not alive.isdisjoint(self._replaced[old]):
                    alive.add(old)
                    changed = True
        for old in [o for o in self._replaced if o not in alive]:
            del self._replaced[old]

    def _open(self, job_ids: Iterable[str]) -> set[str]:
        """The jobs still owed among ``job_ids`` and the successors of those replaced."""
        out: set[str] = set()
        seen: set[str] = set()
        stack = list(job_ids)
        while stack:
            job = stack.pop()
            if job in seen:
                continue
            seen.add(job)
            if job in self._owed:
                out.add(job)
            stack.extend(self._replaced.get(job, ()))
        return out

    def left(self, token: str, job_ids: frozenset[str]) -> frozenset[str] | None:
        """Which of ``job_ids`` (or of the jobs that replaced them) incarnation ``token``
        still owes; None when MTM is another incarnation now (restarted: the jobs are owed
        by the new one, under new terms)."""
        with self._cond:
            if token != self._token:
                return None
            return frozenset(self._open(job_ids))

    def wait(self, token: str, job_ids: frozenset[str], timeout: float) -> None:
        """Wait at most ``timeout`` seconds until none of ``job_ids`` (nor of the jobs that
        replaced them) is owed by ``token`` any more (or another incarnation started)."""
        with self._cond:
            self._cond.wait_for(lambda: token != self._token or not self._open(job_ids), timeout)


class Metrics:
    """Counters and latency samples shared by the actors and the facade (thread-safe).

    Counters survive actor restarts (they live outside the actors). Each latency series
    keeps its last ``window`` samples, for percentiles in :meth:`snapshot`.
    """

    def __init__(self, window: int = 4096) -> None:
        self._lock = threading.Lock()
        self._counters: dict[str, int] = {}
        self._samples: dict[str, deque[float]] = {}
        self._window = window

    def inc(self, name: str, n: int = 1) -> None:
        """Add ``n`` to counter ``name``."""
        with self._lock:
            self._counters[name] = self._counters.get(name, 0) + n

    def observe(self, name: str, value: float) -> None:
        """Record one sample of series ``name`` (milliseconds by convention: ``*_ms``)."""
        with self._lock:
            series = self._samples.get(name)
            if series is None:
                series = self._samples[name] = deque(maxlen=self._window)
            series.append(value)

    def snapshot(self) -> dict[str, Any]:
        """Counters, plus ``<series>_p50`` / ``_p95`` / ``_p99`` of each latency series."""
        with self._lock:
            out: dict[str, Any] = dict(self._counters)
            samples = {k: sorted(v) for k, v in self._samples.items()}
        for name, values in samples.items():
            if values:
                for p in (50, 95, 99):
                    out[f"{name}_p{p}"] = percentile(values, p)
        return out


def percentile(ordered: list[float], p: int) -> float:
    """The ``p``-th percentile (0-100) of the non-empty, sorted ``ordered``, by rank."""
    return ordered[min(len(ordered) - 1, len(ordered) * p // 100)]


def persona_owner(user_id: str, assistant_id: str, shared: bool) -> str:
    """Whose LPM holds the persona of ``assistant_id`` as ``user_id`` sees it."""
    return ASSISTANT_PREFIX + assistant_id if shared else user_id


def reply_state(env: Any, message: Any, state: Any) -> Any:
    """Answer a ``GetState`` with ``state``, or tell it to ``message.reply_to`` as a
    ``StateReply`` (then answer None): see :class:`~.protocol.GetState`."""
    if message.reply_to is None:
        return state
    from .protocol import StateReply

    # Not delivered: the asker stopped meanwhile, and its snapshot is dropped with it.
    env.registry.tell(message.reply_to, StateReply(message.token, state))
    return None


def actor_names(user_id: str) -> tuple[str, str, str]:
    """Registry names of a user's STM, MTM and LPM actors."""
    return (f"user:{user_id}/stm", f"user:{user_id}/mtm", f"user:{user_id}/lpm")


class GatewayClient:
    """How tiers reach the LLM gateway.

    Completions are jobs started on the gateway service's event loop from the asker's own
    thread; the answer is told to the asker's registry name. The slots of the gateway
    worker pool (round robin over its registry names) bound the jobs in flight: a tier first
    reserves a slot (waiting, then raising ``Overloaded``), then submits; the slot is freed
    when the job is done. A worker that is not running (its pool restarting, the system
    closing) takes no job. Embeddings are synchronous calls into the
    gateway service, whose batcher coalesces concurrent requests from all users.
    """

    def __init__(
        self,
        service: GatewayService,
        registry: Registry,
        worker_names: tuple[str, ...],
        backlog_limit: int,
    ) -> None:
        self.service = service
        self.registry = registry
        self.worker_names = worker_names
        per_worker = max(1, backlog_limit // max(1, len(worker_names)))
        self.backlogs = {
            name: Backlog(per_worker, f"gateway {name} backlog") for name in worker_names
        }
        self._rr = itertools.count()
        self.submitted = 0
        # Degraded answers the gateway will redo when the provider is back: who asked
        # (registry name, tag, epoch, user id).
        self._degraded: OrderedDict[str, tuple[str, str, int, str]] = OrderedDict()
        self._degraded_lock = threading.Lock()
        #: Answer inboxes by registry name (see open_inbox).
        self._inboxes: dict[str, deque[Any]] = {}

    @staticmethod
    def _redo_key(kind: str, payload: Any, user_id: str | None) -> str:
        return json.dumps([kind, payload, user_id], sort_keys=True, default=str)

    def remember_degraded(self, job: Any) -> None:
        """Note who asked for a job answered in degraded mode, for :meth:`deliver_redo`."""
        key = self._redo_key(job.kind, job.payload, job.user_id)
        with self._degraded_lock:
            self._degraded[key] = (job.reply_to, job.tag, job.epoch, job.user_id)
            self._degraded.move_to_end(key)
            while len(self._degraded) > _DEGRADED_MEMORY:
                self._degraded.popitem(last=False)

    def open_inbox(self, name: str) -> deque[Any]:
        """An answer inbox for the actor registered as ``name`` (replacing an earlier
        incarnation's): answers to its jobs are put there, ahead of its mailbox, and it is
        told :class:`~.protocol.AnswersWaiting`; it takes the inbox before each message.

        For MTM, whose mailbox can hold a placement backlog of seconds under a flood: an
        answer (a summary, a persona update) is applied after the page in hand, not after
        every page queued behind it, so a ``flush`` waiting for it waits one trip through
        the backlog, not two. Thread-safe (``deque`` appends and pops)."""
        box: deque[Any] = deque()
        with self._degraded_lock:
            self._inboxes[name] = box
        return box

    def close_inbox(self, name: str, box: deque[Any]) -> None:
        """The incarnation that opened ``box`` stopped: answers go by its mailbox again."""
        with self._degraded_lock:
            if self._inboxes.get(name) is box:
                del self._inboxes[name]

    def deliver(self, name: str, done: Any) -> None:
        """Hand ``done`` (a ``CompletionDone``) to the actor registered as ``name``: into its
        inbox if it has one, else its mailbox; dropped if it is not registered (it stopped:
        whoever owes the job asks again)."""
        from .protocol import AnswersWaiting

        box = self._inboxes.get(name)
        if box is None:
            self.registry.tell(name, done)
        elif name in self.registry:
            # If it stops before the tell, the box goes with that incarnation (close_inbox).
            box.append(done)
            self.registry.tell(name, AnswersWaiting())

    def deliver_redo(self, kind: str, payload: Any, user_id: str | None, data: Any) -> None:
        """The gateway's ``on_redo`` hook: tell the fresh answer to whoever asked."""
        from .protocol import CompletionDone

        with self._degraded_lock:
            target = self._degraded.pop(self._redo_key(kind, payload, user_id), None)
        if target is None:
            return  # asked so long ago that we forgot, or not by an actor
        self.deliver(
            target[0], CompletionDone(kind, target[1], data, degraded=False, epoch=target[2])
        )

    def purge_user(self, user_id: str) -> int:
        """Forget every degraded job ``user_id`` asked for; return how many were held."""
        with self._degraded_lock:
            keys = [k for k, v in self._degraded.items() if v[3] == user_id]
            for k in keys:
                del self._degraded[k]
        return len(keys)

    def embed(self, texts: list[str], user_id: str | None = None) -> np.ndarray:
        """Embed a batch of texts for ``user_id``: ``(n, dim)`` float32, rows L2-normalised."""
        return self.service.embed(texts, user_id=user_id)

    def embed_one(self, text: str, user_id: str | None = None) -> np.ndarray:
        """Embed one text for ``user_id``: a ``(dim,)`` float32 unit vector."""
        row: np.ndarray = self.service.embed([text], user_id=user_id)[0]
        return row

    @property
    def pending(self) -> int:
        """Jobs reserved or queued at the workers and not yet done."""
        return sum(b.pending for b in self.backlogs.values())

    def reserve(self, timeout: float) -> str:
        """Reserve a backlog slot at the next worker; returns the slot (the worker's name)."""
        name = self.worker_names[next(self._rr) % len(self.worker_names)]
        self.backlogs[name].acquire(timeout)
        return name

    def try_reserve(self) -> str | None:
        """Reserve a slot at the first worker with room, or None if all are full."""
        for _ in range(len(self.worker_names)):
            name = self.worker_names[next(self._rr) % len(self.worker_names)]
            if self.backlogs[name].try_acquire():
                return name
        return None

    def wait_capacity(self, timeout: float) -> None:
        """Wait (up to ``timeout`` seconds) until some worker has room; else ``Overloaded``."""
        if any(b.pending < b.limit for b in self.backlogs.values()):
            return
        self.backlogs[self.worker_names[0]].wait_below_limit(timeout)

    def release(self, slot: str) -> None:
        """Give back a slot that will not be used (or whose job is done)."""
        self.backlogs[slot].release()

    def submit(
        self, job: Any, slot: str, reply: Callable[[CompletionDone], None] | None = None
    ) -> bool:
        """Start ``job`` (a ``CompletionJob``) on the gateway's event loop, in the caller's
        thread, holding the backlog slot ``slot`` until it ends; its answer is told to the
        asker's registry name.

        Starting a job never waits for the provider (the service's ``submit`` only hands it
        to the loop), so it needs no hop through a worker's mailbox: a job and its answer
        cost two thread hand-offs, not three. With no provider configured the offline
        backend answers here, in the caller's thread (``submit(..., here=True)``), and the
        answer is told before this returns: no hand-off at all. Returns False (and frees
        the slot) when the worker owning ``slot`` is not running (the pool is restarting or
        the system is closing) or the service is closed: the job's effect is then not
        produced. A job the service refuses (a bad payload) is logged and dropped, slot
        freed, as a crashed worker's mailbox was: the asker's timeout asks again.
        ``reply``, when given, receives the answer instead of the asker's registry name.
        """
        from ..errors import MemoryOSError, SystemClosed

        if slot not in self.registry:
            self.release(slot)
            return False
        try:
            future = self.service.submit(job.kind, job.payload, user_id=job.user_id, here=True)
        except SystemClosed:
            self.release(slot)
            return False
        except MemoryOSError as exc:
            self.release(slot)
            log.error("gateway.job_refused", kind=job.kind, user=job.user_id, error=repr(exc))
            return True
        self.submitted += 1
        future.add_done_callback(functools.partial(self._deliver, job, slot, reply))
        return True

    def answer_here(self, job: Any, slot: str) -> CompletionDone | None:
        """With no provider configured (the service :attr:`answers_locally`), ``job``'s
        answer computed in the caller's thread and returned to it as a ``CompletionDone``
        instead of told: the asker applies it in the message in hand, without a message to
        itself and a timeout armed for an answer that is already there. Frees ``slot``.

        It is :meth:`submit` with the answer handed back: None when the job has no answer
        (the worker owning ``slot`` is not running, the service closed or refused the job,
        or the offline backend failed; logged as :meth:`submit` logs them), and the asker's
        timeout asks again. Raises ``RuntimeError`` when a provider is configured (its
        answer comes later: use :meth:`submit`)."""
        if not self.service.answers_locally:
            raise RuntimeError("answer_here() needs the offline backend; use submit()")
        answers: list[CompletionDone] = []
        # The offline answer is computed inside submit, so its future is done and
        # _deliver has run (into ``answers``) by the time submit returns.
        self.submit(job, slot, reply=answers.append)
        return answers[0] if answers else None

    def _deliver(
        self,
        job: Any,
        slot: str,
        reply: Callable[[CompletionDone], None] | None,
        future: Any,
    ) -> None:
        """Runs when a job's future is done (on the gateway loop's thread, or at once):
        the answer goes to ``reply`` if given, else to the asker's registry name."""
        from .protocol import CompletionDone

        try:
            if future.cancelled() or future.exception() is not None:
                if not future.cancelled():
                    log.error(
                        "gateway.job_failed",
                        kind=job.kind,
                        user=job.user_id,
                        error=repr(future.exception()),
                    )
                return  # the asker's timeout asks again
            result = future.result()
            if result.degraded:
                self.remember_degraded(job)
            done = CompletionDone(job.kind, job.tag, result.data, result.degraded, job.epoch)
            if reply is not None:
                reply(done)
            else:
                self.deliver(job.reply_to, done)
        finally:
            self.release(slot)


class Preload:
    """A user's state as loaded once at activation, handed to each tier's first start.

    Each tier takes it at most once; the three share one read-only :class:`Recovered`
    (tiers build their own state from it and never change it).
    """

    def __init__(self, recovered: Recovered) -> None:
        self._recovered = recovered
        self._taken: set[str] = set()
        self._lock = threading.Lock()

    def take(self, tier: str) -> Recovered | None:
        """The loaded state the first time ``tier`` asks, then None."""
        with self._lock:
            if tier in self._taken:
                return None
            self._taken.add(tier)
            return self._recovered


@dataclass(frozen=True)
class UserEnv:
    """Handles one user's actors share. Immutable; every field is a thread-safe service."""

    user_id: str
    config: MemoryConfig
    store: UserStore
    gateway: GatewayClient
    registry: Registry
    clock: Clock
    insert_backlog: PlacementBacklog = field(compare=False)
    metrics: Metrics = field(default_factory=Metrics, compare=False)
    #: The incarnation of the user these actors belong to (see ``CompletionJob.epoch``).
    epoch: int = 0
    #: The state loaded once at activation, for the tiers' first start.
    preload: Preload | None = field(default=None, compare=False)
    #: Set once the MTM actor has finished recovering (cleared again when it restarts).
    mtm_recovered: threading.Event = field(default_factory=threading.Event, compare=False)
    #: The process's gate for MTM catch-ups (None: no limit).
    catch_up_gate: CatchUpGate | None = field(default=None, compare=False)
    #: The gateway jobs MTM owes, for ``flush`` to wait on.
    job_watch: JobWatch = field(default_factory=JobWatch, compare=False)
    #: The process's run permits for MTM placement (None: no limit).
    fair_share: FairShare | None = field(default=None, compare=False)

    def recovered(self, tier: str) -> Recovered:
        """The user's state on disk for ``tier``'s start: the one loaded at activation the
        first time, read again from the store on a restart (the files have moved on)."""
        found = self.preload.take(tier) if self.preload is not None else None
        return found if found is not None else recover(self.store)

    def stale(self, epoch: int) -> bool:
        """Whether a reply carrying ``epoch`` belongs to another incarnation (and counts it)."""
        if epoch == self.epoch:
            return False
        self.metrics.inc("stale_replies_dropped")
        return True

    @property
    def stm_name(self) -> str:
        """Registry name of this user's STM actor."""
        return actor_names(self.user_id)[0]

    @property
    def mtm_name(self) -> str:
        """Registry name of this user's MTM actor."""
        return actor_names(self.user_id)[1]

    @property
    def lpm_name(self) -> str:
        """Registry name of this user's LPM actor."""
        return actor_names(self.user_id)[2]
