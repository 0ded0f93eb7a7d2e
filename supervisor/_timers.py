"""Timers owned by an actor, all served by one scheduler thread.

The scheduler thread is started on the first timer and exits as soon as no timer is
active, so a process with no timers has no scheduler thread (tests can count threads).
It is a daemon thread: pending timers never keep the interpreter alive.
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from collections.abc import Callable
from typing import Any

import structlog
from pykka import ActorDeadError, ActorRef

from ._actor import SupervisedActor, _life_of
from ._reason import ExitReason
from ._sync import SafeCondition

__all__ = ["TimerRef", "active_timer_count", "send_after", "send_interval"]

_log = structlog.get_logger("supervisor")


class TimerRef:
    """A scheduled message; :meth:`cancel` stops it. Cancelled automatically when the
    owner (a SupervisedActor) stops, or when a tell finds the owner dead."""

    __slots__ = ("_active", "_due", "_interval", "_scheduler", "message", "owner")

    def __init__(
        self,
        scheduler: _Scheduler,
        owner: ActorRef[Any],
        message: Any,
        due: float,
        interval: float | None,
    ) -> None:
        self._scheduler = scheduler
        self.owner = owner
        """The actor the message is told to."""
        self.message = message
        """The message told when the timer fires."""
        self._due = due
        self._interval = interval
        self._active = True

    @property
    def active(self) -> bool:
        """True until the timer was cancelled or (one-shot) has fired."""
        return self._active

    def cancel(self) -> bool:
        """Cancel the timer; True if it was still active."""
        return self._scheduler.cancel(self)

    def __repr__(self) -> str:
        kind = f"every {self._interval}s" if self._interval is not None else "once"
        state = "active" if self._active else "done"
        return f"<TimerRef {kind} to {self.owner} ({state})>"


#: Heap entries below which cancelled timers are never swept out early (a small heap's
#: dead entries cost nothing worth a rebuild).
_COMPACT_MIN = 256


class _Scheduler:
    """A heap of due times served by one thread that lives only while timers are active."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._cond = SafeCondition(threading.Lock())
        self._heap: list[tuple[float, int, TimerRef]] = []
        self._seq = itertools.count()
        self._active = 0
        self._thread: threading.Thread | None = None
        # owner urn -> its active timers; the entry lives while the owner does, so an
        # owner that keeps re-arming one-shot timers installs one exit hook, not many.
        self._by_owner: dict[str, set[TimerRef]] = {}

    def schedule(
        self, owner: ActorRef[Any], delay: float, message: Any, interval: float | None
    ) -> TimerRef:
        if delay < 0 or (interval is not None and interval <= 0):
            msg = f"timer delay must be >= 0 and interval > 0 seconds, got {delay}, {interval}"
            raise ValueError(msg)
        timer = TimerRef(self, owner, message, self._clock() + delay, interval)
        install_hook = False
        with self._cond:
            heapq.heappush(self._heap, (timer._due, next(self._seq), timer))
            self._active += 1
            owned = self._by_owner.get(owner.actor_urn)
            if owned is None:
                owned = self._by_owner[owner.actor_urn] = set()
                install_hook = True
            owned.add(timer)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="supervisor-timers", daemon=True
                )
                self._thread.start()
            elif self._heap[0][2] is timer:
                # The thread sleeps until the earliest deadline: wake it only when this
                # timer is the new earliest (a wake-up per timer costs a thread switch).
                self._cond.notify()
        if install_hook and issubclass(owner.actor_class, SupervisedActor):
            _life_of(owner).watch(owner, self._owner_stopped)
        return timer

    def cancel(self, timer: TimerRef) -> bool:
        with self._cond:
            if not timer._active:
                return False
            self._deactivate(timer)
            if self._active == 0 or (self._heap and self._heap[0][2] is timer):
                self._cond.notify()  # the thread's wait changes only then
            return True

    def _deactivate(self, timer: TimerRef) -> None:
        # Caller holds the lock. The heap entry stays and is skipped when it surfaces,
        # unless dead entries have come to outnumber the live ones (see _compact).
        timer._active = False
        self._active -= 1
        self._compact()
        owned = self._by_owner.get(timer.owner.actor_urn)
        if owned is not None:
            owned.discard(timer)
            # A plain pykka owner has no exit hook to drop its entry; do it here.
            if not owned and not issubclass(timer.owner.actor_class, SupervisedActor):
                del self._by_owner[timer.owner.actor_urn]

    def _compact(self) -> None:
        """Drop the heap's entries of cancelled timers once they are more than half of it
        (caller holds the lock). A cancelled timer's entry would otherwise stay until its
        due time, with its message and owner: a job timeout cancelled at once by the
        job's answer lingered for the whole timeout, thousands of them under load, each
        walked by every full garbage collection. Rebuilt in place (the thread's loop
        holds the list) and only when the dead are the majority, so the cost per
        cancellation stays constant on average."""
        heap = self._heap
        if len(heap) > _COMPACT_MIN and len(heap) > 2 * self._active:
            heap[:] = [entry for entry in heap if entry[2]._active]
            heapq.heapify(heap)

    def _owner_stopped(self, owner: ActorRef[Any], _reason: ExitReason) -> None:
        with self._cond:
            for timer in self._by_owner.pop(owner.actor_urn, ()):
                if timer._active:
                    timer._active = False
                    self._active -= 1
            self._compact()
            self._cond.notify()

    def active_count(self) -> int:
        with self._cond:
            return self._active

    def _run(self) -> None:
        heap = self._heap
        with self._cond:
            while True:
                while heap and not heap[0][2]._active:
                    heapq.heappop(heap)
                if self._active == 0:
                    heap.clear()
                    self._thread = None
                    return
                due, _, timer = heap[0]
                wait = due - self._clock()
                if wait > 0:
                    self._cond.wait(wait)
                    continue
                heapq.heappop(heap)
                if timer._interval is None:
                    self._deactivate(timer)
                else:
                    # Fixed rate; after a stall, skip missed beats rather than burst.
                    timer._due = max(due + timer._interval, self._clock())
                    heapq.heappush(heap, (timer._due, next(self._seq), timer))
                self._cond.release()
                try:
                    timer.owner.tell(timer.message)
                except ActorDeadError:
                    self.cancel(timer)
                except Exception as exc:  # noqa: BLE001 - the scheduler must survive
                    _log.error("timer_failed", owner=str(timer.owner), error=repr(exc))
                finally:
                    self._cond.acquire()


_SCHEDULER = _Scheduler()


def send_after(owner_ref: ActorRef[Any], delay_s: float, message: Any) -> TimerRef:
    """Tell ``message`` to ``owner_ref`` once, after ``delay_s`` seconds.

    The timer is cancelled when the owner stops (immediately for a SupervisedActor; for a
    plain pykka actor when the tell finds it dead).
    """
    return _SCHEDULER.schedule(owner_ref, delay_s, message, None)


def send_interval(owner_ref: ActorRef[Any], interval_s: float, message: Any) -> TimerRef:
    """Tell ``message`` to ``owner_ref`` every ``interval_s`` seconds (fixed rate; missed
    beats after a stall are skipped), until cancelled or the owner stops."""
    return _SCHEDULER.schedule(owner_ref, interval_s, message, interval_s)


def active_timer_count() -> int:
    """How many timers are active in the shared scheduler (all owners)."""
    return _SCHEDULER.active_count()
