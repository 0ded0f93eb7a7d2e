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
from typing import Any

import structlog

from supervisor import SupervisedActor, TimerRef, send_after

from ..errors import MemoryOSError
from ..messages import Page
from ..tiers.mtm import MTMCore
from . import persist
from .base import UserEnv
from .protocol import (
    CompletionDone,
    CompletionJob,
    FlushSummaries,
    GetState,
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
        self.counters = {"inserted": 0, "evicted_segments": 0, "evicted_pages": 0, "promoted": 0}

    # -- lifecycle -----------------------------------------------------------------------

    def on_start(self) -> None:
        env = self.env
        recovered = persist.recover(env.store)
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
        self._catch_up(last - env.config.stm_capacity)

    def on_stop(self) -> None:
        for timer in self.summary_timers.values():
            timer.cancel()

    # -- messages ------------------------------------------------------------------------

    def on_receive(self, message: object) -> object:
        if isinstance(message, InsertPage):
            self.env.insert_backlog.release()
            self._insert(message.page, message.now)
            return None
        if isinstance(message, MTMSearch):
            hits = self.core.search(
                emb_from_bytes(message.query_embedding),
                message.query_keywords,
                message.top_m,
                message.top_k,
                message.now,
                message.mode,
            )
            if self.core.rules.promote_on_retrieval and hits.segments:
                # The visits raised heat: check promotion now, as the paper does whenever
                # heat changes, not only at the next insert or heat tick.
                self._apply(self.core.tick(message.now))
            return hits
        if isinstance(message, CompletionDone):
            data = message.data
            self.core.set_summary(
                message.tag,
                str(data.get("summary", "")),
                frozenset(str(k) for k in data.get("keywords", ())),
            )
            return None
        if isinstance(message, RefreshSummary):
            self.summary_timers.pop(message.segment_id, None)
            self._request_summary(message.segment_id)
            return None
        if isinstance(message, FlushSummaries):
            for timer in self.summary_timers.values():
                timer.cancel()
            self.summary_timers.clear()
            for seg_id in list(self.unsummarised):
                self._request_summary(seg_id)
            return None
        if isinstance(message, HeatTick):
            self._apply(self.core.tick(self.env.clock.now()))
            return None
        if isinstance(message, GetState):
            return {**self.core.to_state(), "archive_seq": self.archive_seq}
        if isinstance(message, Inspect):
            records = (self.core.segment(v.segment_id) for v in self.core.segments())
            return tuple(r for r in records if r is not None)
        if isinstance(message, Ping):
            return self.core.max_seq
        raise TypeError(f"MTM actor got an unknown message: {type(message).__name__}")

    # -- work ----------------------------------------------------------------------------

    def _catch_up(self, upto_seq: int) -> None:
        """Insert from the WAL every page with ``max_seq < seq <= upto_seq``.

        Each page is inserted at the time of the turn ``stm_capacity`` later (the one that
        pushed it out of STM), as it was live, and with its meta data if the WAL has it.
        """
        if upto_seq <= self.core.max_seq:
            return
        cap = self.env.config.stm_capacity
        for page, when in persist.wal_pages(self.env.store, self.core.max_seq, upto_seq, cap):
            if page.seq not in self.archived:
                self._place(page, when)

    def _insert(self, page: Page, now: float) -> None:
        if page.seq <= self.core.max_seq or page.seq in self.archived:
            return  # already placed (replayed from the WAL): inserts are idempotent
        if page.seq > self.core.max_seq + 1:
            self._catch_up(page.seq - 1)
        self._place(page, now)

    def _place(self, page: Page, now: float) -> None:
        embedding = self.env.gateway.embed_one(page_text(page))
        self._apply(self.core.insert(page, embedding, now=now))
        self.counters["inserted"] += 1

    def _apply(self, effects: Any) -> None:
        env = self.env
        archive = env.store.archive
        metrics = env.metrics
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
                self.archive_seq = max(self.archive_seq, archive.append(
                    {"t": "segment", "keywords": sorted(segment.keywords),
                     "segment": segment.to_dict()}))
            log.debug("mtm.evicted", user=env.user_id, segment=segment.segment_id)
        for page in effects.evicted_pages:
            self.counters["evicted_pages"] += 1
            metrics.inc("evicted_pages")
            if archive is not None and page.seq not in self.archived:
                self.archive_seq = max(self.archive_seq, archive.append(
                    {"t": "page", "keywords": sorted(page.keywords), "page": page.to_dict()}))
        for segment in effects.promoted:
            self.counters["promoted"] += 1
            metrics.inc("promoted_segments")
            self._request_persona(segment)
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
        slot = env.gateway.reserve(env.config.overload_timeout_seconds)
        env.gateway.submit(
            CompletionJob(
                kind="segment_summary",
                payload={"pages": [{"query": p.query, "response": p.response} for p in pages]},
                user_id=env.user_id,
                reply_to=env.mtm_name,
                tag=segment_id,
            ),
            slot,
        )

    def _request_persona(self, segment: Any) -> None:
        env = self.env
        slot = env.gateway.reserve(env.config.overload_timeout_seconds)
        pages = [{"query": p.query, "response": p.response} for p in segment.pages]
        assistant = segment.pages[-1].assistant_id if segment.pages else "default"
        env.gateway.submit(
            CompletionJob(
                kind="persona_update",
                payload={"pages": pages},
                user_id=env.user_id,
                reply_to=env.lpm_name,
                tag=f"{segment.segment_id}|{assistant}",
            ),
            slot,
        )
