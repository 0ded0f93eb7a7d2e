"""The MTM actor: segments, heat, eviction to the archive, promotion to LPM.

Pages arrive from STM in turn order. The actor embeds each page through the gateway, lets
the pure :class:`~memoryos_actors.tiers.mtm.MTMCore` place it, and carries out the effects:
evicted segments and pages go to the user's archive (:mod:`.mtm_archive`), promoted
segments are sent to the gateway for a persona update whose answer goes to LPM, and segment
summaries are refreshed after a debounce window.

Recovery (:mod:`.mtm_recovery`): the snapshot's MTM section, then every WAL turn that must
have left STM by now (``seq <= last_seq - stm_capacity``) and is not in the snapshot.
Inserts are idempotent by turn seq; a gap in the seqs of arriving pages (messages lost in a
crash) is filled from the WAL before the new page is placed.

Owed work outlives the actor: the snapshot's MTM section also holds the summaries owed, the
promoted segments waiting for their persona update, every gateway job asked for and not
answered yet, and the evicted segments and pages the archive could not take yet (a full
disk: they are written, oldest first, as soon as it takes records again) (``"work"``).
Every job's answer comes back here, also a persona update's, which MTM hands on to LPM
(holding it, still owed, while LPM is not registered: LPM starts after MTM, so at an
activation or a restart an answer can come first); a job carries an id (in its tag) that
LPM writes into its WAL record, so recovery asks again exactly the jobs whose answer is
neither in the snapshot (LPM's state lists the job ids it applied lately) nor in the WAL
tail: an answer LPM applied before its state was taken is in that list, one it applied
later is in the tail, whichever of the two tiers gave its state first. A job unanswered
after the LLM timeout with all its retries is asked again.
"""

from __future__ import annotations

import dataclasses
import functools
import threading
import time
from collections import deque
from collections.abc import Iterable
from collections.abc import Set as AbstractSet
from typing import Any

import structlog

from supervisor import SafeEvent, SupervisedActor, TimerRef, send_after

from ..errors import MemoryOSError
from ..lexicon import stem
from ..messages import Page, normalize_keywords
from ..store.formats import WalRecord
from ..tiers.hybrid import LEXICAL_CANDIDATES
from ..tiers.mtm import MTMCore
from . import mtm_recovery, persist
from .base import UserEnv, reply_state
from .mtm_archive import ArchiveOutbox
from .mtm_jobs import JobTimeout, MTMJobs, RetryJobs
from .protocol import (
    AnswersWaiting,
    ApplyEdit,
    CompletionDone,
    FlushSummaries,
    GetState,
    HeatTick,
    InsertPage,
    InsertPages,
    Inspect,
    MTMPicture,
    MTMSearch,
    OwedJobs,
    Pending,
    PersonaAgain,
    Ping,
    RefreshSummary,
    StateIncomplete,
    TierState,
    emb_from_bytes,
    split_tag,
)

__all__ = ["MTMActor", "page_text"]

log = structlog.get_logger("memoryos.mtm")

#: Longest a placement turn holds its permit across consecutive inserts, seconds.
_TURN_QUANTUM_S = 0.005

#: Job kinds whose answer carries a persona update for LPM.
_PERSONA_KINDS = ("persona_update", "segment_persona")


def page_text(page: Page) -> str:
    """The text a page is embedded by: both sides of the turn and its chain summary."""
    if page.meta_chain:
        return f"{page.query}\n{page.response}\n{page.meta_chain}"
    return f"{page.query}\n{page.response}"


class MTMActor(SupervisedActor):
    """Mid-term memory of one user."""

    expected_errors = (MemoryOSError,)

    def __init__(self, env: UserEnv) -> None:
        super().__init__()
        self.env = env
        self.dim = env.gateway.service.embedder_info()[1]
        self.core = MTMCore(env.config, self.dim, env.clock)
        self.summary_timers: dict[str, TimerRef] = {}
        #: Pages each segment gathered since its summary was last asked for.
        self.unsummarised: dict[str, int] = {}
        #: How many of the user's deletions this tier's segment summaries have seen (their
        #: segments' summaries cleared and asked for again): recovery scrubs only the
        #: summaries the later ones name, not a summary asked for after a deletion.
        self.deletions_seen = 0
        #: Evicted segments and pages on their way to the archive (and the pages it holds).
        self.outbox = ArchiveOutbox(env)
        #: Promoted segments whose persona update is not asked for yet, oldest first.
        self.persona_queue: list[Any] = []
        #: Identity of the pending _AskPersona (None: none pending), and its timer.
        self.persona_armed: object | None = None
        self.persona_timer: TimerRef | None = None
        self.counters = {"inserted": 0, "evicted_segments": 0, "evicted_pages": 0, "promoted": 0}
        #: Gateway jobs asked for and not answered yet (summaries, persona updates).
        self.jobs = MTMJobs(env, lambda: self.actor_ref)
        #: The state loaded at start, until the rest of recovery has run (see on_start).
        self.recovery: Any = None
        #: The pages the snapshot's STM held, by seq: a catch-up places them from here
        #: when no WAL record holds them (see :func:`.persist.wal_pages`).
        self.held_pages: dict[int, Page] = {}
        #: The ticket of a wait for the catch-up gate in progress (see on_stop_requested).
        self.gate_ticket: threading.Event | None = None
        #: False once a placement from the WAL was cut short by a stop request (or recovery
        #: ended early): pages before the next one handed over are missing here, so this
        #: incarnation places nothing more and refuses to give its state (StateIncomplete);
        #: the WAL still holds those pages for the next incarnation.
        self.complete = True
        #: Answers to this MTM's jobs, taken before each message (GatewayClient.open_inbox).
        self.answers: deque[CompletionDone] = deque()
        #: The placement permit held (None: none), and since when (perf_counter s).
        self.turn_ticket: threading.Event | None = None
        self.turn_started = 0.0

    # -- lifecycle -----------------------------------------------------------------------

    def on_start(self) -> None:
        env = self.env
        env.job_watch.start(self.jobs.token)
        self.answers = env.gateway.open_inbox(env.mtm_name)
        recovered = env.recovered("mtm")
        if recovered.state is not None:
            mtm_state = recovered.state["mtm"]
            self.core = MTMCore.from_state(mtm_state, env.config, self.dim, env.clock)
            self.outbox.seq = int(mtm_state.get("archive_seq", 0))
        self.held_pages = {
            seq: page
            for seq, page in persist.snapshot_stm_pages(recovered.state).items()
            if seq > self.core.max_seq
        }
        # Whatever was queued for the previous incarnation is gone; the WAL has it all.
        env.insert_backlog.reset()
        # The rest of recovery (the archive's tail, the WAL pages to place again, the owed
        # work) is the first thing this actor does once started, before any message it
        # handles: an activation waits for the group to start, not for pages a previous
        # incarnation left unplaced (a user passivated while its pages still waited for
        # their meta data has up to a whole session of them).
        self.recovery = recovered
        env.mtm_recovered.clear()
        self.actor_ref.tell(_Recover())

    def _finish_recovery(self) -> None:
        mtm_recovery.finish_recovery(self)

    def on_stop_requested(self) -> None:
        ticket = self.gate_ticket
        if ticket is not None:
            ticket.set()  # wake a wait for the catch-up gate: it gives up its place
        turn = self.turn_ticket
        if turn is not None:
            turn.set()  # wake a wait for a placement turn: it gives up its place

    def on_exit(self) -> None:
        self._end_turn()  # every exit path: never keep a placement permit

    # -- placement turns -----------------------------------------------------------------

    def _take_turn(self) -> bool:
        """Hold one of the process's placement permits (``UserEnv.fair_share``) for this
        user, waiting for it in fair order; True once held (or there is no limit), False
        if a stop was requested first. A turn lasts over consecutive inserts (see
        :meth:`_turn_done`), so a busy user pays one hand-off per quantum, not per page."""
        share = self.env.fair_share
        if share is None or self.turn_ticket is not None:
            return True
        ticket = self.turn_ticket = SafeEvent()
        backlog = self.env.insert_backlog
        backlog.turn_waiting(True)
        try:
            granted = share.acquire(self.env.user_id, ticket, lambda: self.stop_requested)
        finally:
            backlog.turn_waiting(False)
        if not granted:
            share.release(ticket)
            self.turn_ticket = None
            return False
        self.turn_started = time.perf_counter()
        return True

    def _place_told(self, inserts: tuple[InsertPage, ...]) -> None:
        """Place the pages STM told us of, in turn order, under a placement permit, with
        one embedding call for all of them. A provider's (or a model's) embedding is a
        wait, not the interpreter's work: it is asked for before the permit is taken, so
        concurrent ones still coalesce in the gateway's batcher; the in-process hashing
        embedder runs under the permit. The pages are released from the queue once placed
        (their settle lag ends there; the queue's pace is the whole call's time per page)."""
        pages = [ins.page for ins in inserts]
        try:
            early = not self.env.gateway.service.embeds_locally
            embeddings = self.embed_pages(pages) if early else None
            if not self._take_turn():
                self.complete = False  # stopping before these pages' turn: the WAL has them
                return
            if embeddings is None:
                embeddings = self.embed_pages(pages)
            for ins, emb in zip(inserts, embeddings, strict=True):
                self._insert(ins.page, ins.now, emb)
        finally:
            self.env.insert_backlog.release(len(inserts))

    def _turn_done(self) -> bool:
        """Whether to give the permit back now: the quantum is used up, or no message
        waits (an insert told meanwhile takes a new turn, behind the users waiting)."""
        if time.perf_counter() - self.turn_started >= _TURN_QUANTUM_S:
            return True
        return self.actor_inbox.empty()

    def _end_turn(self) -> None:
        """Give the placement permit back, if one is held."""
        ticket = self.turn_ticket
        share = self.env.fair_share
        if ticket is None or share is None:
            return
        self.turn_ticket = None
        share.release(ticket, time.perf_counter() - self.turn_started)

    def on_stop(self) -> None:
        self.env.gateway.close_inbox(self.env.mtm_name, self.answers)
        # Pages still queued for this incarnation are in the WAL: no longer queued work
        # in the process's bound (a new incarnation counts its own).
        self.env.insert_backlog.reset()
        ticket = self.gate_ticket
        if ticket is not None and self.env.catch_up_gate is not None:
            self.env.catch_up_gate.release(ticket)  # idempotent; never keep a slot
        for timer in self.summary_timers.values():
            timer.cancel()
        self.jobs.cancel_timers()
        if self.persona_timer is not None:
            self.persona_timer.cancel()

    # -- messages ------------------------------------------------------------------------

    def on_receive(self, message: object) -> object:
        try:
            return self._receive(message)
        finally:
            if self.turn_ticket is not None and self._turn_done():
                self._end_turn()

    def _receive(self, message: object) -> object:
        if self.recovery is not None:
            self._finish_recovery()  # whatever message comes first
        while self.answers:
            done = self.answers.popleft()
            if not self.env.stale(done.epoch):
                self._done(done)
        if isinstance(message, (_Recover, AnswersWaiting)):
            return None
        if isinstance(message, (InsertPage, InsertPages)):
            self._place_told(message.inserts if isinstance(message, InsertPages) else (message,))
            return None
        if isinstance(message, ApplyEdit):
            rec = message.record
            edits = self.env.store.edits
            # The segments of every deletion logged since this tier last looked (one the
            # facade logged without telling this tier, if any, too), then all seen.
            segments = set(rec.segments) | edits.segments_scrubbed_after(self.deletions_seen)
            self.deletions_seen = edits.deletions
            return self.drop_deleted(rec.pages, (rec.memory_id,), sorted(segments))
        if isinstance(message, MTMSearch):
            hits = self._search(message)
            if self.core.rules.promote_on_retrieval and hits.segments:
                # The visits raised heat: check promotion now, as the paper does whenever
                # heat changes, not only at the next insert or heat tick.
                self._apply(self.core.tick(message.now))
            return hits
        if isinstance(message, CompletionDone):
            if not self.env.stale(message.epoch):
                self._done(message)
            return None
        if isinstance(message, _AskPersona):
            if message.armed is self.persona_armed:
                self._ask_persona()
            return None
        if isinstance(message, PersonaAgain):
            asked = self._redo("persona_update", message.body)
            if message.owed is not None:
                self.env.job_watch.settle(*message.owed, asked)
            return None
        if isinstance(message, RefreshSummary):
            self.summary_timers.pop(message.segment_id, None)
            self._request_summary(message.segment_id)
            return None
        if isinstance(message, FlushSummaries):
            return self._ask_owed()
        if isinstance(message, OwedJobs):
            if message.ask_now:
                self._ask_owed()
            self.jobs.send_outgoing()
            return self.jobs.token, frozenset(self.jobs.owed)
        if isinstance(message, HeatTick):
            self._apply(self.core.tick(self.env.clock.now()))
            return None
        if isinstance(message, GetState):
            if not self.complete:
                # Stopping with pages unplaced: a snapshot of this state would claim them.
                if message.reply_to is not None:
                    return None  # the periodic snapshot times out and is tried later
                raise StateIncomplete(
                    f"MTM of {self.env.user_id!r} stopped before placing every page"
                )
            self.outbox.write_owed()
            return reply_state(
                self.env,
                message,
                TierState(
                    "mtm",
                    {
                        **self.core.to_state(),
                        "archive_seq": self.outbox.seq,
                        "work": mtm_recovery.work_state(self),
                    },
                ),
            )
        if isinstance(message, Inspect):
            records = (self.core.segment(v.segment_id) for v in self.core.segments())
            return MTMPicture(tuple(r for r in records if r is not None))
        if isinstance(message, RetryJobs):
            self.jobs.retry()
            return None
        if isinstance(message, JobTimeout):
            self.jobs.timed_out(message.job_id)
            return None
        if isinstance(message, Pending):
            self.jobs.send_to_lpm()
            self.jobs.send_outgoing()
            self.outbox.write_owed()  # a flush tries again whatever the disk refused
            return self.jobs.pending()
        if isinstance(message, Ping):
            return None
        raise TypeError(f"MTM actor got an unknown message: {type(message).__name__}")

    # -- work ----------------------------------------------------------------------------

    def _search(self, message: MTMSearch) -> Any:
        cold = cold_pages = cold_window = None
        cold_rows: Any = None  # narrow rows by seq (ColdIndex.pages_by_seq, light)
        store = self.env.store
        if message.mode == "hybrid" and self.env.config.cold_tier:
            # The cold tier: archived pages, scored with MTM's under one formula.
            # The core's query terms (its idf keys), so the cold index gives each one's id.
            qt = [stem(k) for k in normalize_keywords(message.query_keywords)]
            try:
                # Candidates as narrow scoring rows; the few returned are read in full.
                cold = store.cold.search(qt, LEXICAL_CANDIDATES, light=True)
                cold_pages = store.cold.pages_by_seq
                cold_rows = functools.partial(store.cold.pages_by_seq, light=True)
                cold_window = functools.partial(store.cold.pages_between, light=True)
            except MemoryOSError as exc:
                # The cold index is derived data: answer from the hot tiers rather than fail.
                log.warning("mtm.cold_search_failed", user=self.env.user_id, error=str(exc))
                cold = cold_pages = cold_window = cold_rows = None
        return self.core.search(
            emb_from_bytes(message.query_embedding),
            message.query_keywords,
            message.top_m,
            message.top_k,
            message.now,
            message.mode,
            cold=cold,
            cold_pages=cold_pages,
            query_text=message.query_text,
            cold_window=cold_window,
            cold_rows=cold_rows,
        )

    def catch_up(
        self, upto_seq: int, records: Iterable[tuple[int, WalRecord]] | None = None
    ) -> bool:
        """Place the WAL's pages up to ``upto_seq`` (recovery's catch-up)."""
        return self._catch_up(upto_seq, records)

    def _catch_up(
        self, upto_seq: int, records: Iterable[tuple[int, WalRecord]] | None = None
    ) -> bool:
        """Place the WAL's pages up to ``upto_seq`` (see :func:`.mtm_recovery.catch_up`)."""
        return mtm_recovery.catch_up(self, upto_seq, records)

    def _insert(self, page: Page, now: float, embedding: Any) -> None:
        if not self.complete:
            return  # stopping with earlier pages unplaced: never place past that hole
        if page.seq <= self.core.max_seq or page.seq in self.outbox.archived:
            return  # already placed (replayed from the WAL): inserts are idempotent
        if page.seq > self.core.max_seq + 1 and not self._catch_up(page.seq - 1):
            return  # the catch-up was just cut short by a stop request
        if self.env.store.edits.page_deleted(page.seq):
            return  # deleted while on its way from STM
        self._place(page, now, embedding)

    def drop_deleted(self, seqs: Any, memory_ids: Any, segments: Any = ()) -> int:
        """Remove deleted pages (and deleted segments) from this tier; returns the pages
        removed. Nothing is archived: deleted memories go nowhere. Text that may quote a
        deleted page goes too: the chain summaries the store's edits name, and the summary
        of each of ``segments`` (asked for again from the pages left)."""
        edits = self.env.store.edits
        if edits.scrub_chains:
            self.core.clear_chain_summaries(edits.scrubbed)
        for seg_id in segments:
            if self.core.set_summary(str(seg_id), "", ()) and self.core.segment_pages(str(seg_id)):
                every = self.env.config.summary_every_pages
                self.unsummarised[str(seg_id)] = max(self.unsummarised.get(str(seg_id), 0), every)
                self.schedule_summary(str(seg_id))
        dropped = 0
        for mid in memory_ids:
            if str(mid).startswith("segment:"):
                seg_id = str(mid)[len("segment:") :]
                pages = self.core.segment_pages(seg_id)
                if self.core.discard_segment(seg_id):
                    dropped += len(pages)
                self._forget_segment(seg_id)
        for seq in seqs:
            sid = self.core.segment_of(int(seq))
            if self.core.discard_page(int(seq)):
                dropped += 1
                if sid is not None and not self.core.segment_pages(sid):
                    self._forget_segment(sid)
        self.unread(
            {int(s) for s in seqs},
            {str(m)[len("segment:") :] for m in memory_ids if str(m).startswith("segment:")},
        )
        return dropped

    def unread(self, seqs: AbstractSet[int], segments: AbstractSet[str]) -> None:
        """Persona work that would read deleted pages (turn ``seqs``; ``segments`` deleted
        whole) leaves them out: a promoted segment waiting for its persona update keeps
        the pages left; an answer waiting for LPM that read a deleted page is dropped and
        asked again (called once the pages are gone from the core)."""
        queue = []
        for record in self.persona_queue:
            pages = tuple(p for p in record.pages if p.seq not in seqs)
            if record.segment_id in segments or not pages:
                continue
            queue.append(
                record
                if len(pages) == len(record.pages)
                else dataclasses.replace(record, pages=pages)
            )
        self.persona_queue = queue
        for job_id, tag in self.jobs.drop_to_lpm(self.env.store.edits.deleted_pages):
            self.jobs.settle(job_id, self._redo("persona_update", split_tag(tag)[1]))

    def _cancel_summary_timer(self, seg_id: str) -> None:
        """Cancel ``seg_id``'s pending summary request, if one is scheduled."""
        timer = self.summary_timers.pop(seg_id, None)
        if timer is not None:
            timer.cancel()

    def _forget_segment(self, seg_id: str) -> None:
        self._cancel_summary_timer(seg_id)
        self.unsummarised.pop(seg_id, None)

    def embed_pages(self, pages: list[Page]) -> Any:
        """The embeddings of ``pages``, in one embedder call."""
        return self.env.gateway.embed([page_text(p) for p in pages], user_id=self.env.user_id)

    def place(self, page: Page, now: float, embedding: Any) -> None:
        """Place ``page`` at ``now`` as a live insert does (the WAL catch-up of recovery)."""
        self._place(page, now, embedding)

    def _place(self, page: Page, now: float, embedding: Any) -> None:
        self._apply(self.core.insert(page, embedding, now=now))
        self.counters["inserted"] += 1

    def _apply(self, effects: Any) -> None:
        env = self.env
        metrics = env.metrics
        self.outbox.write_owed()  # what a full disk refused before goes first
        embs = self.core.take_evicted_embeddings()
        for segment in effects.evicted_segments:
            self.counters["evicted_segments"] += 1
            metrics.inc("evicted_segments")
            self._cancel_summary_timer(segment.segment_id)
            self.outbox.segment_evicted(segment, embs, self.deletions_seen)
            log.debug("mtm.evicted", user=env.user_id, segment=segment.segment_id)
        for page in effects.evicted_pages:
            self.counters["evicted_pages"] += 1
            metrics.inc("evicted_pages")
            self.outbox.page_evicted(page, effects.segment_id or None, embs)
        for segment in effects.promoted:
            self.counters["promoted"] += 1
            metrics.inc("promoted_segments")
            self.persona_queue.append(segment)
        # Ask after persona_debounce_seconds (at once when 0, i.e. once the messages
        # already in the mailbox are handled): segments promoted meanwhile share one
        # persona_update call. flush() asks at once.
        self.arm_persona_ask(env.config.persona_debounce_seconds)
        for segment in effects.evicted_segments:
            self.unsummarised.pop(segment.segment_id, None)
        # A summary is asked for once a segment has gathered `summary_every_pages` new
        # pages, then debounced: few LLM calls per stored turn, summaries never far behind.
        for seg_id in effects.summary_due:
            n = self.unsummarised.get(seg_id, 0) + 1
            self.unsummarised[seg_id] = n
            if n >= env.config.summary_every_pages:
                self.schedule_summary(seg_id)

    def schedule_summary(self, seg_id: str) -> None:
        """Ask for ``seg_id``'s summary after the debounce window, unless already due."""
        if seg_id not in self.summary_timers:
            self.summary_timers[seg_id] = send_after(
                self.actor_ref, self.env.config.summary_debounce_seconds, RefreshSummary(seg_id)
            )

    def arm_persona_ask(self, delay: float) -> None:
        """Ask for the queued promoted segments' persona updates in ``delay`` seconds (once
        the mailbox's messages are handled when 0), unless an ask is pending already."""
        if self.persona_queue and self.persona_armed is None:
            token = self.persona_armed = object()
            if delay > 0:
                self.persona_timer = send_after(self.actor_ref, delay, _AskPersona(token))
            else:
                self.actor_ref.tell(_AskPersona(token))

    def _ask_owed(self) -> int:
        """Ask now for every summary and persona update owed (those waiting for their
        debounce window too); returns the calls asked for."""
        for timer in self.summary_timers.values():
            timer.cancel()
        self.summary_timers.clear()
        asked = self._ask_persona()  # first: it may take a summary along
        owed = list(self.unsummarised)
        for seg_id in owed:
            self._request_summary(seg_id)
        return asked + len(owed)

    def _readable(self, pages: Iterable[Page]) -> list[Page]:
        """``pages`` but those deleted: the edit log has a deletion before this tier drops
        the page (its ``ApplyEdit`` may still be on its way), and a job must never read a
        deleted page (its answer would be dropped and asked again, and again)."""
        deleted = self.env.store.edits.deleted_pages
        return [p for p in pages if p.seq not in deleted]

    def _request_summary(self, segment_id: str) -> None:
        self.unsummarised.pop(segment_id, None)
        pages = self._readable(self.core.segment_pages(segment_id))
        if not pages:
            return  # evicted or deleted meanwhile
        self.jobs.ask(
            "segment_summary",
            {"pages": [{"query": p.query, "response": p.response} for p in pages]},
            segment_id,
            reads=(p.seq for p in pages),
        )

    def _ask_persona(self) -> int:
        """Ask for the persona updates of every queued promoted segment; returns the calls."""
        self.persona_armed = None
        if self.persona_timer is not None:
            self.persona_timer.cancel()
            self.persona_timer = None
        queued, self.persona_queue = self.persona_queue, []
        # A segment promoted twice while waiting is asked about once, with its latest pages.
        latest = {segment.segment_id: segment for segment in queued}
        by_assistant: dict[str, list[Any]] = {}
        for segment in latest.values():
            aid = segment.pages[-1].assistant_id if segment.pages else "default"
            by_assistant.setdefault(aid, []).append(segment)
        for segments in by_assistant.values():
            only = segments[0].segment_id if len(segments) == 1 else None
            if only is not None and only in self.unsummarised and self.core.segment_pages(only):
                self._request_segment_persona(only, segments[0])
            else:
                self._request_persona(segments)
        return len(by_assistant)

    def _request_segment_persona(self, segment_id: str, promoted: Any) -> None:
        """A promoted segment that also owes its summary: one call for both.

        The answer comes back here (``segment_persona``); MTM stores the summary and tells
        LPM the persona part, tagged like a ``persona_update``.
        """
        self._cancel_summary_timer(segment_id)
        self.unsummarised.pop(segment_id, None)
        pages = self._readable(self.core.segment_pages(segment_id))
        if not pages:
            return  # every page deleted: nothing to learn
        assistant = promoted.pages[-1].assistant_id if promoted.pages else "default"
        self.jobs.ask(
            "segment_persona",
            {"pages": [{"query": p.query, "response": p.response} for p in pages]},
            f"{segment_id}|{assistant}",
            reads=(p.seq for p in pages),
        )

    def _request_persona(self, segments: list[Any]) -> None:
        """One persona_update call for promoted segments of one assistant, in order.

        The answer comes back here and goes on to LPM, tagged
        ``"<job>:<segment ids joined by +>|<assistant>"``.
        """
        readable = [(s, self._readable(s.pages)) for s in segments]
        readable = [(s, pages) for s, pages in readable if pages]
        if not readable:
            return  # every page deleted: nothing to learn
        last = segments[-1]
        assistant = last.pages[-1].assistant_id if last.pages else "default"
        self.jobs.ask(
            "persona_update",
            {
                "pages": [
                    {"query": p.query, "response": p.response}
                    for _s, pages in readable
                    for p in pages
                ]
            },
            f"{'+'.join(s.segment_id for s, _pages in readable)}|{assistant}",
            reads=(p.seq for _s, pages in readable for p in pages),
        )

    # -- answers ----------------------------------------------------------------------------

    def _done(self, done: CompletionDone) -> None:
        """An answer to one of this MTM's jobs: store the summary, hand a persona update
        on to LPM. A job answered before is applied again only to replace a degraded
        answer (the gateway redoes those when the provider is back)."""
        job_id, body, _assistant = split_tag(done.tag)
        if not self.jobs.accept(job_id, done.degraded):
            return  # a second answer to a job already answered as well or better
        data = done.data
        # A job that read a page deleted since may quote it: its answer is dropped and
        # the job asked again from the pages left.
        stale = self.jobs.read_deleted(job_id, self.env.store.edits.deleted_pages)
        if stale:
            # Asked again now from the pages left; a flush waiting for this job waits for
            # the ones asked in its place.
            self.jobs.settle(job_id, self._redo(done.kind, body))
            return
        if done.kind in ("segment_summary", "segment_persona"):
            self.core.set_summary(
                body,
                str(data.get("summary", "")),
                frozenset(str(k) for k in data.get("keywords", ())),
            )
        if done.kind not in _PERSONA_KINDS:
            self.jobs.settle(job_id)  # a persona update's once LPM has it
        else:
            persona: dict[str, Any] = {
                k: data.get(k, []) for k in ("traits", "facts", "agent_traits")
            }
            # LPM drops it too if one of these pages is deleted before it gets there.
            persona["pages"] = sorted(self.jobs.reads.get(job_id, ()))
            self.jobs.hand_to_lpm(
                job_id,
                CompletionDone("persona_update", done.tag, persona, done.degraded, done.epoch),
            )

    def _redo(self, kind: str, body: str) -> list[str]:
        """Ask again, at once, for the work of a ``kind`` job on ``body`` whose answer was
        dropped (it read a page deleted since): the summary of a segment that still has
        pages, the persona update of the segments ``body`` names that are still here (with
        their pages left). Returns the ids of the jobs asked for."""
        first = self.jobs.count
        resummarise = kind in ("segment_summary", "segment_persona")
        if resummarise and self.core.segment_pages(body):
            every = self.env.config.summary_every_pages
            self.unsummarised[body] = max(self.unsummarised.get(body, 0), every)
        if kind in _PERSONA_KINDS:
            self.requeue_persona(body)
            self._ask_persona()  # may take the summary along (segment_persona)
        if resummarise and body in self.unsummarised:
            self._cancel_summary_timer(body)
            self._request_summary(body)
        return self.jobs.asked_since(first)

    def requeue_persona(self, body: str) -> None:
        """Queue again for a persona update the segments ``body`` names (``"s1+s2"``) that
        are still here, with the pages they hold now."""
        for seg_id in body.split("+"):
            record = self.core.segment(seg_id)
            if record is not None and record.pages:
                self.persona_queue.append(record)


class _Recover:
    """Self-message: finish recovery (see ``MTMActor.on_start``). Private."""

    __slots__ = ()


class _AskPersona:
    """Self-message: ask for the persona updates of the segments promoted so far. Private.

    ``armed`` identifies the request; one that flush() already served is ignored.
    """

    __slots__ = ("armed",)

    def __init__(self, armed: object) -> None:
        self.armed = armed
