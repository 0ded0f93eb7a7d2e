"""The gateway jobs an MTM actor owes: asked for, held back, timed out, answered, and the
persona updates answered but not handed to LPM yet.

:class:`MTMJobs` lives inside one :class:`~memoryos_actors.actors.mtm.MTMActor` and runs in
its thread only. The actor never waits for the gateway: a job no worker can take now is
held back and offered again after ``RETRY_S``; a job unanswered after the LLM timeout with
all its retries is asked again; a persona update answered while LPM is not registered waits
here. A job stays owed (in the snapshot's ``"work"``, and in the job watch that
``MemoryOS.flush`` waits on) until its answer is applied, or handed on to LPM.
"""

from __future__ import annotations

import secrets
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable
from collections.abc import Set as AbstractSet
from typing import TYPE_CHECKING, Any

import pykka
import structlog

from supervisor import TimerRef, send_after

from .protocol import CompletionDone, CompletionJob

if TYPE_CHECKING:
    from .base import UserEnv

__all__ = ["RETRY_S", "JobTimeout", "MTMJobs", "RetryJobs"]

log = structlog.get_logger("memoryos.mtm")

#: How long to wait before offering held-back gateway jobs (and persona updates LPM was
#: not there to take) again (seconds).
RETRY_S = 0.05

#: Answered job ids remembered, so a second answer to one job (asked again after a
#: timeout) is not applied twice.
_ANSWERED_MEMORY = 512


class RetryJobs:
    """Timer message: offer the held-back gateway jobs again."""

    __slots__ = ()


class JobTimeout:
    """Timer message: job ``job_id`` has had no answer for the LLM timeout."""

    __slots__ = ("job_id",)

    def __init__(self, job_id: str) -> None:
        self.job_id = job_id


class MTMJobs:
    """The gateway jobs of one MTM actor (see the module docstring).

    Attributes:
        token: job ids of this incarnation are ``"<token>.<n>"``: unique across restarts.
        owed: jobs asked for (held back or at the gateway) and not answered, by job id.
        outgoing: jobs not yet accepted by a worker, oldest first.
        to_lpm: persona updates answered and not yet handed to LPM, oldest first, each
            with its job id (LPM starts after MTM, so an answer can come first).
        timeout_s: how long a job may go unanswered before it is asked again, seconds.
    """

    def __init__(self, env: UserEnv, actor_ref: Callable[[], pykka.ActorRef[Any] | None]) -> None:
        self.env = env
        self._actor_ref = actor_ref
        self.outgoing: deque[CompletionJob] = deque()
        self.retry_timer: TimerRef | None = None
        self.to_lpm: deque[tuple[str, CompletionDone]] = deque()
        self.owed: dict[str, CompletionJob] = {}
        self.timers: dict[str, TimerRef] = {}
        #: Job ids answered lately, with whether that answer was degraded.
        self.answered: OrderedDict[str, bool] = OrderedDict()
        #: The turn seqs of the pages each job of this incarnation read (the latest
        #: ones): an answer that read a page deleted since may quote it.
        self.reads: OrderedDict[str, frozenset[int]] = OrderedDict()
        self.token = secrets.token_hex(4)
        self.count = 0
        cfg = env.config
        self.timeout_s = cfg.llm_timeout_seconds * (cfg.llm_max_retries + 1) + 5.0

    def pending(self) -> int:
        """Jobs held back plus persona updates not handed to LPM yet."""
        return len(self.outgoing) + len(self.to_lpm)

    def ask(self, kind: str, payload: Any, body: str, reads: Iterable[int] = ()) -> str:
        """Ask the gateway for a job whose answer comes back to the actor, and owe it until
        then (tagged ``"<job id>:<body>"``); ``reads``: the turn seqs of the pages in
        ``payload``. Returns the job id."""
        self.count += 1
        job_id = f"{self.token}.{self.count}"
        self.reads[job_id] = frozenset(reads)
        while len(self.reads) > _ANSWERED_MEMORY:
            self.reads.popitem(last=False)
        env = self.env
        self.submit(
            CompletionJob(
                kind=kind,
                payload=payload,
                user_id=env.user_id,
                reply_to=env.mtm_name,
                tag=f"{job_id}:{body}",
                epoch=env.epoch,
            ),
            job_id,
        )
        return job_id

    def asked_since(self, count: int) -> list[str]:
        """The ids of the jobs asked for since ``count`` was :attr:`count`."""
        return [f"{self.token}.{n}" for n in range(count + 1, self.count + 1)]

    def settle(self, job_id: str, successors: Iterable[str] = ()) -> None:
        """Job ``job_id`` is answered and its answer applied (owed no more), or dropped
        and asked again as the jobs ``successors`` (a flush waiting for it waits for
        them)."""
        if job_id and self.owed.pop(job_id, None) is not None:
            self.env.job_watch.settle(self.token, job_id, successors)

    def submit(self, job: CompletionJob, job_id: str) -> None:
        """Owe ``job`` (as ``job_id``) and offer it to the gateway."""
        self.owed[job_id] = job
        self.env.job_watch.owe(self.token, job_id)
        self._arm_timer(job_id)
        self.outgoing.append(job)
        self.send_outgoing()

    def _arm_timer(self, job_id: str) -> None:
        old = self.timers.pop(job_id, None)
        if old is not None:
            old.cancel()
        ref = self._actor_ref()
        if ref is not None:
            self.timers[job_id] = send_after(ref, self.timeout_s, JobTimeout(job_id))

    def timed_out(self, job_id: str) -> None:
        """No answer within the LLM timeout and its retries (a failed job is never
        answered): ask again, unless the job is still held back here."""
        self.timers.pop(job_id, None)
        job = self.owed.get(job_id)
        if job is None:
            return
        self.env.metrics.inc("mtm_jobs_asked_again")
        log.warning("mtm.job_timeout", user=self.env.user_id, kind=job.kind, job=job_id)
        if job not in self.outgoing:
            self.outgoing.append(job)
        self._arm_timer(job_id)
        self.send_outgoing()

    def accept(self, job_id: str, degraded: bool) -> bool:
        """Whether to apply an answer to job ``job_id``: not a second answer to a job
        answered as well or better before (a degraded answer is replaced by a redo once
        the provider is back). An accepted answer stops the job's timer."""
        if not job_id:
            return True
        before = self.answered.get(job_id)
        if before is False or (before is True and degraded):
            return False
        self.answered[job_id] = bool(degraded)
        self.answered.move_to_end(job_id)
        while len(self.answered) > _ANSWERED_MEMORY:
            self.answered.popitem(last=False)
        timer = self.timers.pop(job_id, None)
        if timer is not None:
            timer.cancel()
        return True

    def hand_to_lpm(self, job_id: str, update: CompletionDone) -> None:
        """Queue a persona update for LPM (job ``job_id`` stays owed until handed on)."""
        self.to_lpm.append((job_id, update))
        self.send_to_lpm()

    def read_deleted(self, job_id: str, deleted: AbstractSet[int]) -> bool:
        """Whether job ``job_id`` read a page among turn seqs ``deleted``."""
        return not self.reads.get(job_id, frozenset()).isdisjoint(deleted)

    def drop_to_lpm(self, deleted: AbstractSet[int]) -> list[tuple[str, str]]:
        """Drop the persona updates waiting for LPM whose job read a page among turn seqs
        ``deleted`` (they may quote it); returns their ``(job id, tag)`` (each job still
        owed: the caller settles it once it is asked again)."""
        kept: deque[tuple[str, CompletionDone]] = deque()
        dropped: list[tuple[str, str]] = []
        for job_id, update in self.to_lpm:
            if self.read_deleted(job_id, deleted):
                dropped.append((job_id, update.tag))
            else:
                kept.append((job_id, update))
        self.to_lpm = kept
        return dropped

    def send_to_lpm(self) -> None:
        """Hand answered persona updates to LPM, in order. While LPM is not registered
        (starting after this actor, or restarting) they wait here and are offered again
        after ``RETRY_S``; a job leaves ``owed`` only once its update is handed on, so a
        snapshot taken meanwhile still owes it and a later incarnation asks again."""
        lpm = self.env.registry.lookup(self.env.lpm_name)
        while self.to_lpm and lpm is not None:
            job_id, update = self.to_lpm[0]
            try:
                lpm.tell(update)
            except pykka.ActorDeadError:
                break  # stopping for a restart; its successor registers soon
            self.to_lpm.popleft()
            if all(j != job_id for j, _ in self.to_lpm):
                self.settle(job_id)
        if self.to_lpm:
            self.arm_retry()

    def send_outgoing(self) -> None:
        """Hand held-back jobs to the gateway in order, as long as a worker has room and
        the asker is registered (a reply to a starting actor would find no one); whatever
        is left is offered again after ``RETRY_S``. Never waits."""
        gateway = self.env.gateway
        registry = self.env.registry
        while self.outgoing:
            job = self.outgoing[0]
            if registry.lookup(job.reply_to) is None:
                break
            slot = gateway.try_reserve()
            if slot is None or not gateway.submit(job, slot):
                break
            self.outgoing.popleft()
        if self.outgoing:
            self.arm_retry()

    def arm_retry(self) -> None:
        """Send ``RetryJobs`` to the actor after ``RETRY_S`` (once, however often asked)."""
        ref = self._actor_ref()
        if self.retry_timer is None and ref is not None:
            self.retry_timer = send_after(ref, RETRY_S, RetryJobs())

    def retry(self) -> None:
        """The retry timer fired: offer persona updates to LPM and held-back jobs again."""
        self.retry_timer = None
        self.send_to_lpm()
        self.send_outgoing()

    def state(self) -> list[dict[str, Any]]:
        """The jobs owed, for the snapshot (the held-back ones included)."""
        return [
            {
                "id": job_id,
                "kind": job.kind,
                "tag": job.tag,
                # A summary is asked again from the segment's pages of then.
                "payload": None if job.kind == "segment_summary" else job.payload,
            }
            for job_id, job in self.owed.items()
        ]

    def cancel_timers(self) -> None:
        """Cancel every job timer and the retry timer (the actor is stopping)."""
        for timer in self.timers.values():
            timer.cancel()
        if self.retry_timer is not None:
            self.retry_timer.cancel()
