"""``flush``: a barrier on the background work submitted before it, per user.

A turn is acknowledged once it is in the user's WAL; what it starts happens afterwards, in
the user's actors: its chain meta (STM asks the gateway), the placement of the page it
pushes out of STM (MTM), and the summaries and persona updates that placement makes due
(MTM asks the gateway; LPM applies a persona update). A barrier on one user waits for
exactly that, for the turns stored before it looked, and never for the process to be
quiet: other users' work, and turns stored after it looked, do not hold it back.

One barrier walks the user's tiers in order, each step a short request to one actor:

1. STM answers its last turn seq (the *mark*) and how far its pages are settled (meta
   known, handed to MTM: :class:`~.actors.protocol.Progress`); the barrier waits until
   that reaches the mark. STM settles pages oldest first, so this ends under any write
   rate: later turns queue behind the mark, not before it.
2. MTM then handles every page STM handed over before answering (mailbox order). It is
   asked to ask at once for every summary and persona update it owes, and answers the ids
   of its unanswered gateway jobs (:class:`~.actors.protocol.OwedJobs`): a fixed set,
   waited for until each is answered and applied (summary stored, persona update told to
   LPM). The wait is on the user's :class:`~.actors.base.JobWatch`, not on more requests
   to MTM: under a flood MTM's mailbox holds a placement backlog (about
   ``placement_backlog_seconds`` of work, see :class:`~.actors.base.PlacementBacklog`),
   and each request would wait all of it again. A restarted MTM
   (another incarnation token) recovered from the files; it is asked again.
3. A mailbox barrier on LPM (and on the shared personas, with ``shared_agent_persona``)
   covers the persona updates MTM told it.

A flush of many users runs their barriers side by side, one step of each in turn.

:class:`Barriers` works on the facade's :class:`~memoryos_actors.core.SystemCore`.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import pykka
import structlog

from .actors.base import ASSISTANT_PREFIX, JobWatch, actor_names
from .actors.protocol import FlushSummaries, OwedJobs, Pending, Ping, Progress
from .directory import UserPhase
from .errors import Overloaded
from .validation import check_timeout as _check_timeout
from .validation import check_user_id as _check_user_id

if TYPE_CHECKING:
    from .core import SystemCore

__all__ = ["Barriers"]

log = structlog.get_logger("memoryos.system")

#: Phases in which a user's actors run and its work counts for a flush.
_LIVE = (UserPhase.ACTIVE, UserPhase.EXPORTING)

#: Longest pause between two rounds of a flush that made no progress (seconds).
_MAX_PAUSE_S = 0.02

#: Longest wait for a shared persona's mailbox barrier (seconds).
_STEP_TIMEOUT_S = 120.0


class _Gone(Exception):
    """The user was passivated, forgotten or activated again while a barrier waited."""


#: What :meth:`Barriers._poll` answers while the request's answer has not come.
_NOT_YET = object()


class _UserBarrier:
    """Where one user's barrier is (see the module docstring). ``pages_only`` stops after
    step 1: the pages are handed to MTM."""

    __slots__ = (
        "epoch",
        "mark",
        "owed",
        "pages_only",
        "phase",
        "progress",
        "request",
        "token",
        "user_id",
        "watch",
    )

    def __init__(self, user_id: str, epoch: int, watch: JobWatch, pages_only: bool) -> None:
        self.user_id = user_id
        self.epoch = epoch
        self.watch = watch
        self.pages_only = pages_only
        self.phase = "stm"
        self.mark: int | None = None
        self.token: str | None = None
        self.owed: frozenset[str] = frozenset()
        #: The request in flight: the actor asked and the future of its answer.
        self.request: tuple[pykka.ActorRef[Any], pykka.Future[Any]] | None = None
        #: Changes whenever the barrier moves on (for the flush loop's back-off).
        self.progress: tuple[Any, ...] = ()


class Barriers:
    """``flush`` and the other waits on a user's background work (thread-safe; each call
    keeps its own state)."""

    def __init__(self, core: SystemCore) -> None:
        self._core = core

    def flush(self, timeout: float = 300.0, *, user_id: str | None = None) -> None:
        """See :meth:`~memoryos_actors.api.MemoryAPI.flush`."""
        seconds = _check_timeout(timeout)
        deadline = time.monotonic() + seconds
        if user_id is not None:
            users = [_check_user_id(user_id)]
        else:
            users = [e.user_id for e in self._core.directory.entries() if e.phase in _LIVE]
        self._run_barriers(users, deadline, seconds, pages_only=False)

    def settle_pages(self, user_id: str, timeout: float) -> None:
        """Wait until every turn ``user_id`` stored so far has its meta and, if it left
        STM, was handed to MTM (no wait for summaries or persona updates). The caller's
        next request to MTM is handled after those pages are placed (mailbox order)."""
        seconds = _check_timeout(timeout)
        self._run_barriers([user_id], time.monotonic() + seconds, seconds, pages_only=True)

    def drain_user(self, user_id: str, summaries: bool = True) -> int:
        """One mailbox barrier round over the user's tiers; returns the user's pending
        pages (STM's, and the gateway jobs MTM holds back).

        With ``summaries``, MTM is first told to ask for every summary it still owes.
        """
        stm_n, mtm_n, lpm_n = actor_names(user_id)
        ask = self._core.ask
        pending = int(ask(stm_n, Pending()))
        if summaries:
            ask(mtm_n, FlushSummaries())
        pending += int(ask(mtm_n, Pending()))  # gateway jobs MTM holds back
        ask(lpm_n, Ping())
        return pending

    def _run_barriers(
        self, users: list[str], deadline: float, seconds: float, *, pages_only: bool
    ) -> None:
        barriers = []
        for uid in users:
            entry = self._core.directory.get(uid)
            if entry is not None and entry.phase in _LIVE and entry.env is not None:
                barriers.append(_UserBarrier(uid, entry.epoch, entry.env.job_watch, pages_only))
        pause = 0.001
        while barriers:
            # Each step sends a request or reads an answer, never waits: the users' tiers
            # work on their requests side by side (an MTM under a flood answers only after
            # its placement backlog).
            moved = False
            waiting = []
            for barrier in barriers:
                before = barrier.progress
                try:
                    done = self._barrier_step(barrier, deadline)
                except _Gone:
                    done = True  # what it owed is in its files (see flush)
                moved = moved or done or barrier.progress != before
                if not done:
                    waiting.append(barrier)
            barriers = waiting
            if not barriers:
                return
            if time.monotonic() > deadline:
                raise Overloaded(self._late(barriers, seconds))
            if moved:
                pause = 0.001
                continue
            if len(barriers) == 1:
                self._wait_one(barriers[0], pause)  # returns as soon as it can move on
            else:
                time.sleep(pause)
            pause = min(_MAX_PAUSE_S, pause * 2)

    @staticmethod
    def _wait_one(b: _UserBarrier, seconds: float) -> None:
        """Wait at most ``seconds`` for what ``b`` waits for: an answer, or its jobs."""
        if b.request is not None:
            try:
                b.request[1].get(timeout=seconds)
            except Exception:  # noqa: BLE001, S110 - read (and handled) by the next step
                pass
        elif b.phase == "jobs" and b.token is not None:
            b.watch.wait(b.token, b.owed, seconds)
        else:
            time.sleep(seconds)

    @staticmethod
    def _late(barriers: list[_UserBarrier], seconds: float) -> str:
        names = ", ".join(f"{b.user_id!r} ({b.phase})" for b in barriers[:5])
        more = f" and {len(barriers) - 5} more" if len(barriers) > 5 else ""
        return (
            f"the background work submitted before flush did not finish within "
            f"{seconds:g} s; still waiting for {names}{more}"
        )

    def _barrier_step(self, b: _UserBarrier, deadline: float) -> bool:
        """Move ``b`` on as far as it can go now, without waiting; True once it is done."""
        stm_n, mtm_n, lpm_n = actor_names(b.user_id)
        while True:
            if b.phase == "stm":
                answer = self._poll(b, stm_n, Progress())
                if answer is _NOT_YET:
                    return False
                seq, through = answer
                if b.mark is None:
                    b.mark = int(seq)
                b.progress = ("stm", int(through))
                if int(through) < b.mark:
                    return False  # asked again at the next round
                b.phase = "mtm"
            elif b.phase == "mtm":
                if b.pages_only:
                    return True
                answer = self._poll(b, mtm_n, OwedJobs(ask_now=True))
                if answer is _NOT_YET:
                    return False
                b.token, b.owed = answer
                b.progress = ("mtm", b.token, len(b.owed))
                b.phase = "jobs"
            elif b.phase == "jobs":
                if b.owed:
                    self._check_live(b)
                    left = b.watch.left(str(b.token), b.owed)
                    if left is None:
                        b.phase = "mtm"  # restarted: ask the new incarnation what it owes
                        continue
                    b.owed = left
                    b.progress = ("jobs", b.token, len(b.owed))
                    if b.owed:
                        return False
                b.phase = "lpm"
            else:
                if self._poll(b, lpm_n, Ping()) is _NOT_YET:
                    return False
                again = b.watch.owed_again(str(b.token))
                if again:
                    # LPM dropped persona updates that read a page deleted on their way:
                    # wait for the ones MTM asks in their place, then ping LPM again.
                    b.owed = again
                    b.phase = "jobs"
                    continue
                if self._core.config.shared_agent_persona:
                    self._ping_shared_personas(b.user_id, deadline)
                return True

    def _check_live(self, b: _UserBarrier) -> None:
        entry = self._core.directory.get(b.user_id)
        if entry is None or entry.epoch != b.epoch or entry.phase not in _LIVE:
            raise _Gone(b.user_id)

    def _poll(self, b: _UserBarrier, name: str, message: object) -> Any:
        """The answer of the user's actor ``name`` to ``message``, or ``_NOT_YET``.

        The first call sends the request; later calls read its answer. An actor that died
        before answering (stopping for a restart) is asked again once its successor is
        registered; ``_Gone`` once the user's incarnation is no longer live.
        """
        self._check_live(b)
        if b.request is None:
            ref = self._core.registry.lookup(name)
            if ref is None:
                return _NOT_YET  # restarting
            b.request = (ref, ref.ask(message, block=False))
        ref, future = b.request
        try:
            answer = future.get(timeout=0)
        except pykka.Timeout:
            if ref.is_alive():
                return _NOT_YET
            b.request = None  # died with the request in its mailbox: ask its successor
            return _NOT_YET
        except Exception as exc:  # noqa: BLE001 - dead, or crashed on it: ask again
            if not isinstance(exc, pykka.ActorDeadError):
                log.warning("flush.step_crashed", user=b.user_id, actor=name, error=repr(exc))
            b.request = None
            return _NOT_YET
        b.request = None
        return answer

    def _ping_shared_personas(self, user_id: str, deadline: float) -> None:
        """A mailbox barrier on every live shared persona: the persona updates the user's
        LPM told them are applied."""
        for name in self._core.registry.names():
            if not (name.startswith("user:" + ASSISTANT_PREFIX) and name.endswith("/lpm")):
                continue
            if name == actor_names(user_id)[2]:
                continue
            ref = self._core.registry.lookup(name)
            remaining = deadline - time.monotonic()
            if ref is None or remaining <= 0:
                continue
            try:
                ref.ask(Ping(), timeout=min(remaining, _STEP_TIMEOUT_S))
            except pykka.ActorDeadError:
                pass  # a shared persona is pinned: it is stopping only at close
            except pykka.Timeout:
                raise Overloaded(
                    f"the shared persona {name!r} did not answer in time; flush gave up"
                ) from None
