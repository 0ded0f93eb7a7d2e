"""The MTM actor: segments, heat, eviction to the archive, promotion to LPM.

Pages arrive from STM in turn order. The actor embeds each page through the gateway, lets
the pure :class:`~memoryos_actors.tiers.mtm.MTMCore` place it, and carries out the effects:
evicted segments and pages go to the user's archive, promoted segments are sent to the
gateway for a persona update whose answer goes to LPM, and segment summaries are refreshed
after a debounce window.

Recovery: the snapshot's MTM section, then every WAL turn that must have left STM by now
(``seq <= last_seq - stm_capacity``) and is not in the snapshot. Inserts are idempotent by
turn seq; a gap in the seqs of arriving pages (messages lost in a crash) is filled from the
WAL before the new page is placed.
"""

from __future__ import annotations

import dataclasses
from collections import deque
from typing import Any

import structlog

from supervisor import SupervisedActor, TimerRef, send_after

from ..errors import MemoryOSError
from ..messages import Page
from ..store.cold import emb_to_f16
from ..tiers._lex import stem
from ..tiers.mtm import LEXICAL_CANDIDATES, MTMCore
from . import persist
from .base import UserEnv
from .protocol import (
    CompletionDone,
    CompletionJob,
    FlushSummaries,
    GetState,
    MTMPicture,
    Pending,
    TierState,
    HeatTick,
    InsertPage,
    Inspect,
    MTMSearch,
    Ping,
    RefreshSummary,
    emb_from_bytes,
)

__all__ = ["MTMActor", "page_text"]

log = structlog.get_logger("memoryos.mtm")

#: How long to wait before offering held-back gateway jobs again (seconds).
_RETRY_S = 0.05


class _Retry:
    """Timer message: offer the held-back gateway jobs again. Private."""

    __slots__ = ()


def page_text(page: Page) -> str:
    """The text a page is embedded by: both sides of the turn and its chain summary."""
    if page.meta_chain:
        return f"{page.query}\n{page.response}\n{page.meta_chain}"
    return f"{page.query}\n{page.response}"


def _archived_page_seqs(rec: dict[str, Any]) -> list[int]:
    """Turn seqs of the pages an archive record holds."""
    if rec.get("t") == "segment":
        return [int(p["seq"]) for p in rec["segment"]["pages"]]
    if rec.get("t") == "page":
        return [int(rec["page"]["seq"])]
    return []


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
        #: Last archive record this MTM's state reflects (snapshots store it).
        self.archive_seq = 0
        #: Seqs of the pages the archive held when this incarnation started: never inserted
        #: or archived again (pages archived from then on are new by definition).
        self.archived: set[int] = set()
        #: Promoted segments whose persona update is not asked for yet, oldest first.
        self.persona_queue: list[Any] = []
        #: Identity of the pending _AskPersona (None: none pending), and its timer.
        self.persona_armed: object | None = None
        self.persona_timer: TimerRef | None = None
        self.counters = {"inserted": 0, "evicted_segments": 0, "evicted_pages": 0, "promoted": 0}
        #: Gateway jobs (summaries, persona updates) not yet accepted by a worker, oldest
        #: first: this actor never waits for the gateway, it offers them again later.
        self.outgoing: deque[CompletionJob] = deque()
        self.retry_timer: TimerRef | None = None

    # -- lifecycle -----------------------------------------------------------------------

    def on_start(self) -> None:
        env = self.env
        recovered = env.recovered("mtm")
        snap_seq = 0
        if recovered.state is not None:
            mtm_state = recovered.state["mtm"]
            self.core = MTMCore.from_state(mtm_state, env.config, self.dim, env.clock)
            snap_seq = int(recovered.state["seq"])
            self.archive_seq = int(mtm_state.get("archive_seq", 0))
        # One pass over the archive. Evictions after the snapshot are applied again, so no
        # page is both archived and in MTM, and those pages are never inserted again; and
        # every page id it holds is remembered, so a WAL replay that evicts a page again
        # does not archive it twice (pages archived from now on are new by definition).
        snapshot_archive_seq = self.archive_seq
        archive = env.store.archive
        for seq, rec in (archive.iter() if archive is not None else ()):
            self.archived.update(_archived_page_seqs(rec))
            if seq <= snapshot_archive_seq:
                continue
            self.archive_seq = seq
            if rec.get("t") == "segment":
                self.core.discard_segment(str(rec["segment"]["segment_id"]))
            elif rec.get("t") == "page":
                self.core.discard_page(int(rec["page"]["seq"]))
        # Whatever was queued for the previous incarnation is gone; the WAL has it all.
        env.insert_backlog.reset()
        last = persist.last_turn_seq(recovered.records, snap_seq)
        self._catch_up(last - env.config.stm_capacity, recovered.records)

    def on_stop(self) -> None:
        for timer in self.summary_timers.values():
            timer.cancel()
        if self.retry_timer is not None:
            self.retry_timer.cancel()
        if self.persona_timer is not None:
            self.persona_timer.cancel()

    # -- messages ------------------------------------------------------------------------

    def on_receive(self, message: object) -> object:
        if isinstance(message, InsertPage):
            self.env.insert_backlog.release()
            self._insert(message.page, message.now)
            return None
        if isinstance(message, MTMSearch):
            hits = self._search(message)
            if self.core.rules.promote_on_retrieval and hits.segments:
                # The visits raised heat: check promotion now, as the paper does whenever
                # heat changes, not only at the next insert or heat tick.
                self._apply(self.core.tick(message.now))
            return hits
        if isinstance(message, CompletionDone):
            if self.env.stale(message.epoch):
                return None
            data = message.data
            segment_id = message.tag.partition("|")[0]
            self.core.set_summary(
                segment_id,
                str(data.get("summary", "")),
                frozenset(str(k) for k in data.get("keywords", ())),
            )
            if message.kind == "segment_persona":
                # One call answered both: the persona part goes on to LPM as usual.
                lpm = self.env.registry.lookup(self.env.lpm_name)
                if lpm is not None:
                    persona = {k: data.get(k, []) for k in ("traits", "facts", "agent_traits")}
                    lpm.tell(CompletionDone("persona_update", message.tag, persona,
                                            message.degraded, message.epoch))
            return None
        if isinstance(message, _AskPersona):
            if message.armed is self.persona_armed:
                self._ask_persona()
            return None
        if isinstance(message, RefreshSummary):
            self.summary_timers.pop(message.segment_id, None)
            self._request_summary(message.segment_id)
            return None
        if isinstance(message, FlushSummaries):
            for timer in self.summary_timers.values():
                timer.cancel()
            self.summary_timers.clear()
            asked = self._ask_persona()  # first: it may take a summary along
            owed = list(self.unsummarised)
            for seg_id in owed:
                self._request_summary(seg_id)
            return asked + len(owed)
        if isinstance(message, HeatTick):
            self._apply(self.core.tick(self.env.clock.now()))
            return None
        if isinstance(message, GetState):
            return TierState("mtm", {**self.core.to_state(), "archive_seq": self.archive_seq})
        if isinstance(message, Inspect):
            records = (self.core.segment(v.segment_id) for v in self.core.segments())
            return MTMPicture(tuple(r for r in records if r is not None))
        if isinstance(message, _Retry):
            self.retry_timer = None
            self._send_outgoing()
            return None
        if isinstance(message, Pending):
            self._send_outgoing()
            return len(self.outgoing)
        if isinstance(message, Ping):
            return None
        raise TypeError(f"MTM actor got an unknown message: {type(message).__name__}")

    # -- work ----------------------------------------------------------------------------

    def _search(self, message: MTMSearch) -> Any:
        cold = cold_pages = None
        store = self.env.store
        if message.mode == "hybrid" and self.env.config.cold_tier:
            # The cold tier: archived pages, scored with MTM's under one formula.
            qt = [stem(k) for k in message.query_keywords]
            try:
                cold = store.cold.search(qt, LEXICAL_CANDIDATES)
                cold_pages = store.cold.pages_by_seq
            except MemoryOSError as exc:
                # The cold index is derived data: answer from the hot tiers rather than fail.
                log.warning("mtm.cold_search_failed", user=self.env.user_id, error=str(exc))
                cold = cold_pages = None
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
        )

    def _catch_up(self, upto_seq: int, records: Any = None) -> None:
        """Insert from the WAL every page with ``max_seq < seq <= upto_seq``.

        Each page is inserted at the time of the turn ``stm_capacity`` later (the one that
        pushed it out of STM), as it was live, and with its meta data if the WAL has it.
        """
        if upto_seq <= self.core.max_seq:
            return
        cap = self.env.config.stm_capacity
        pages = persist.wal_pages(self.env.store, self.core.max_seq, upto_seq, cap,
                                  records=records)
        for page, when in pages:
            if page.seq not in self.archived:
                self._place(page, when)

    def _insert(self, page: Page, now: float) -> None:
        if page.seq <= self.core.max_seq or page.seq in self.archived:
            return  # already placed (replayed from the WAL): inserts are idempotent
        if page.seq > self.core.max_seq + 1:
            self._catch_up(page.seq - 1)
        self._place(page, now)

    def _place(self, page: Page, now: float) -> None:
        embedding = self.env.gateway.embed_one(page_text(page), user_id=self.env.user_id)
        self._apply(self.core.insert(page, embedding, now=now))
        self.counters["inserted"] += 1

    def _apply(self, effects: Any) -> None:
        env = self.env
        store = env.store
        archive = store.archive
        metrics = env.metrics
        embs = self.core.take_evicted_embeddings()
        for segment in effects.evicted_segments:
            self.counters["evicted_segments"] += 1
            metrics.inc("evicted_segments")
            timer = self.summary_timers.pop(segment.segment_id, None)
            if timer is not None:
                timer.cancel()
            fresh = tuple(p for p in segment.pages
                          if p.seq not in self.archived)
            if archive is not None and fresh:
                if len(fresh) != len(segment.pages):
                    segment = dataclasses.replace(segment, pages=fresh)
                self.archive_seq = max(self.archive_seq, store.archive_append(
                    {"t": "segment", "keywords": sorted(segment.keywords),
                     "segment": segment.to_dict(),
                     "embs": {str(p.seq): emb_to_f16(embs[p.seq])
                              for p in fresh if p.seq in embs}}))
            log.debug("mtm.evicted", user=env.user_id, segment=segment.segment_id)
        for page in effects.evicted_pages:
            self.counters["evicted_pages"] += 1
            metrics.inc("evicted_pages")
            if archive is not None and page.seq not in self.archived:
                rec: dict[str, Any] = {"t": "page", "keywords": sorted(page.keywords),
                                       "page": page.to_dict()}
                if effects.segment_id:
                    rec["segment_id"] = effects.segment_id
                if page.seq in embs:
                    rec["emb"] = emb_to_f16(embs[page.seq])
                self.archive_seq = max(self.archive_seq, store.archive_append(rec))
        for segment in effects.promoted:
            self.counters["promoted"] += 1
            metrics.inc("promoted_segments")
            self.persona_queue.append(segment)
        if self.persona_queue and self.persona_armed is None:
            # Ask after persona_debounce_seconds (at once when 0, i.e. once the messages
            # already in the mailbox are handled): segments promoted meanwhile share one
            # persona_update call. flush() asks at once.
            token = self.persona_armed = object()
            delay = env.config.persona_debounce_seconds
            if delay > 0:
                self.persona_timer = send_after(self.actor_ref, delay, _AskPersona(token))
            else:
                self.actor_ref.tell(_AskPersona(token))
        for segment in effects.evicted_segments:
            self.unsummarised.pop(segment.segment_id, None)
        # A summary is asked for once a segment has gathered `summary_every_pages` new
        # pages, then debounced: few LLM calls per stored turn, summaries never far behind.
        for seg_id in effects.summary_due:
            n = self.unsummarised.get(seg_id, 0) + 1
            self.unsummarised[seg_id] = n
            if n >= env.config.summary_every_pages and seg_id not in self.summary_timers:
                self.summary_timers[seg_id] = send_after(
                    self.actor_ref, env.config.summary_debounce_seconds, RefreshSummary(seg_id)
                )

    def _request_summary(self, segment_id: str) -> None:
        self.unsummarised.pop(segment_id, None)
        pages = self.core.segment_pages(segment_id)
        if not pages:
            return  # evicted meanwhile
        env = self.env
        self._submit(CompletionJob(
            kind="segment_summary",
            payload={"pages": [{"query": p.query, "response": p.response} for p in pages]},
            user_id=env.user_id,
            reply_to=env.mtm_name,
            tag=segment_id,
            epoch=env.epoch,
        ))

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
        timer = self.summary_timers.pop(segment_id, None)
        if timer is not None:
            timer.cancel()
        self.unsummarised.pop(segment_id, None)
        env = self.env
        pages = self.core.segment_pages(segment_id)
        assistant = promoted.pages[-1].assistant_id if promoted.pages else "default"
        self._submit(CompletionJob(
            kind="segment_persona",
            payload={"pages": [{"query": p.query, "response": p.response} for p in pages]},
            user_id=env.user_id,
            reply_to=env.mtm_name,
            tag=f"{segment_id}|{assistant}",
            epoch=env.epoch,
        ))

    def _request_persona(self, segments: list[Any]) -> None:
        """One persona_update call for promoted segments of one assistant, in order.

        The answer goes to LPM tagged ``"<segment ids joined by +>|<assistant>"``.
        """
        env = self.env
        pages = [{"query": p.query, "response": p.response}
                 for segment in segments for p in segment.pages]
        last = segments[-1]
        assistant = last.pages[-1].assistant_id if last.pages else "default"
        self._submit(CompletionJob(
            kind="persona_update",
            payload={"pages": pages},
            user_id=env.user_id,
            reply_to=env.lpm_name,
            tag=f"{'+'.join(s.segment_id for s in segments)}|{assistant}",
            epoch=env.epoch,
        ))

    def _submit(self, job: CompletionJob) -> None:
        self.outgoing.append(job)
        self._send_outgoing()

    def _send_outgoing(self) -> None:
        """Hand held-back jobs to the gateway in order, as long as a worker has room and
        the asker is registered (a reply to a starting actor would find no one); whatever
        is left is offered again after ``_RETRY_S``. Never waits."""
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
        if self.outgoing and self.retry_timer is None and self.actor_ref is not None:
            self.retry_timer = send_after(self.actor_ref, _RETRY_S, _Retry())


class _AskPersona:
    """Self-message: ask for the persona updates of the segments promoted so far. Private.

    ``armed`` identifies the request; one that flush() already served is ignored.
    """

    __slots__ = ("armed",)

    def __init__(self, armed: object) -> None:
        self.armed = armed
