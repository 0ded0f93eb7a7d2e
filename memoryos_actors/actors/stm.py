"""The STM actor: the durable entry point of every turn.

``AddTurn`` is answered as soon as the turn is in the user's write-ahead log and in the STM
queue. The dialogue-chain meta data (does the page continue the previous page's topic, the
chain's running summary, the page's keywords) is asked of the gateway afterwards, one job
at a time in turn order, because each page's chain summary extends the previous one; when
several pages are waiting, one job asks for all of them (``page_meta_batch``). Each
answer is written to the WAL too, so recovery never asks the LLM again.

A page pushed out of the STM queue waits in an outbox until its meta data is known, then
goes to the MTM actor, in turn order. MTM therefore places every page with its chain and
keywords, and the same turns give the same segments however fast they arrive.

Recovery (on first start and on every restart): the newest snapshot's STM section plus the
WAL's ``turn`` and ``meta`` records after it. STM is a FIFO of a fixed capacity, so the pages
it holds are always the last ``stm_capacity`` turns and replay is exact.
"""

from __future__ import annotations

import dataclasses
from collections import OrderedDict, deque
from collections.abc import Iterable
from typing import Any

import structlog

from supervisor import SupervisedActor, TimerRef, send_after

from ..errors import MemoryOSError
from ..messages import AddTurn, Page
from ..store.formats import MetaRecord, TurnRecord
from ..tiers.stm import STMCore
from . import persist
from .base import UserEnv
from .protocol import (
    ApplyEdit,
    CompletionDone,
    CompletionJob,
    GetState,
    InsertPage,
    InsertPages,
    Inspect,
    Pending,
    Ping,
    Progress,
    Snapshot,
    StateReply,
    STMPages,
    STMPicture,
    TierState,
)

__all__ = ["STMActor"]

log = structlog.get_logger("memoryos.stm")

#: Turn keys remembered for idempotent retries (in memory, and in each snapshot).
_RECENT_KEYS = 4096
_SNAPSHOT_KEYS = 1024

#: How long to wait before trying again to reach a restarting MTM or a full gateway (s).
_RETRY_S = 0.02

#: Most chain-meta jobs the offline backend answers in one message (see ``_pump``): a
#: user catching up with many pages that wait for their meta (a provider configured
#: before, say) lets its writers' asks in between.
_INLINE_JOBS = 4

#: Most pages forwarded to MTM in one message.
_FORWARD_BATCH = 32


#: How long a snapshot waits for MTM's and LPM's state (seconds).
_STATE_TIMEOUT_S = 60.0


class _SnapshotTimeout:
    """Timer message: snapshot ``token``'s states did not all arrive in time. Private."""

    __slots__ = ("token",)

    def __init__(self, token: int) -> None:
        self.token = token


class _Retry:
    """Timer message: try again to forward the outbox and request meta. Private."""

    __slots__ = ()


class _MetaTimeout:
    """Timer message: the meta job for ``page_id`` (attempt ``attempt``) took too long."""

    __slots__ = ("attempt", "page_id")

    def __init__(self, page_id: str, attempt: int) -> None:
        self.page_id = page_id
        self.attempt = attempt


class STMActor(SupervisedActor):
    """Short-term memory of one user: a FIFO of ``stm_capacity`` pages behind a WAL."""

    expected_errors = (MemoryOSError,)

    def __init__(self, env: UserEnv) -> None:
        super().__init__()
        self.env = env
        self.core = STMCore(env.config.stm_capacity)
        self.seq = 0
        self.turns_since_snapshot = 0
        #: The periodic snapshot waiting for MTM's and LPM's states: (token, STM's part,
        #: states arrived by tier), and its timeout timer.
        self.pending_snapshot: tuple[int, dict[str, Any], dict[str, Any]] | None = None
        self.snapshot_token = 0
        self.snapshot_timer: TimerRef | None = None
        #: Pages pushed out of STM, oldest first, waiting for their meta or for MTM, each
        #: with the time of the turn that pushed it out (MTM's insert time for it).
        self.outbox: deque[tuple[Page, float]] = deque()
        #: The tag of the meta job at the gateway (its page ids joined by ","), and the
        #: attempt number.
        self.meta_inflight: str | None = None
        self.meta_attempt = 0
        #: The timeout timer of the meta job in flight (cancelled when its answer comes).
        self.meta_timer: TimerRef | None = None
        #: The latest page whose meta is known (the "previous page" of the next job).
        self.meta_prev: Page | None = None
        self.retry_armed = False
        #: Turn keys of recent turns -> their page ids, so a repeated AddTurn (a caller
        #: retrying after this actor crashed) is answered instead of stored twice.
        self.recent_keys: OrderedDict[str, str] = OrderedDict()
        # A job may fail to come back (a worker crash loses its mailbox): ask again after
        # the longest time a healthy call can take.
        cfg = env.config
        self.meta_timeout_s = cfg.llm_timeout_seconds * (cfg.llm_max_retries + 1) + 5.0

    # -- lifecycle -----------------------------------------------------------------------

    def on_start(self) -> None:
        recovered = self.env.recovered("stm")
        if recovered.state is not None:
            self.core = STMCore.from_state(recovered.state["stm"])
            self.seq = int(recovered.state["seq"])
            for key, page_id in recovered.state.get("turn_keys", ()):
                self._remember_key(str(key), str(page_id))
        metas: dict[int, MetaRecord] = {}
        replayed = 0
        for _lsn, rec in recovered.replay:
            if isinstance(rec, TurnRecord):
                if rec.turn_key:
                    self._remember_key(rec.turn_key, f"p{rec.seq}")
                if rec.seq > self.seq:
                    self.core.push(rec.page(self.env.user_id))
                    self.seq = rec.seq
                    replayed += 1
            elif isinstance(rec, MetaRecord):
                metas[rec.seq] = rec
        for page in self.core.pages():
            meta = metas.get(page.seq)
            if meta is not None and not page.chain_id:
                self.core.set_meta(
                    page.page_id, meta.meta_chain, meta.chain_id, list(meta.keywords)
                )
        for seq in self.env.store.edits.deleted_pages:  # deleted after the snapshot
            self.core.remove(seq)
        self._scrub_chains()
        for page in self.core.pages():
            if page.chain_id:
                self.meta_prev = page
        self.turns_since_snapshot = replayed
        self._pump()
        log.debug("stm.recovered", user=self.env.user_id, seq=self.seq, replayed=replayed)

    # -- messages ------------------------------------------------------------------------

    def on_receive(self, message: object) -> object:
        if isinstance(message, AddTurn):
            return self._add_turn(message)
        if isinstance(message, STMPages):
            return tuple(self.core.pages())
        if isinstance(message, ApplyEdit):
            return self._drop_pages(message.record.pages)
        if isinstance(message, CompletionDone):
            if not self.env.stale(message.epoch):
                self._meta_done(message)
            return None
        if isinstance(message, _Retry):
            self.retry_armed = False
            self._pump()
            return None
        if isinstance(message, _MetaTimeout):
            if self.meta_inflight == message.page_id and self.meta_attempt == message.attempt:
                log.warning("stm.meta_timeout", user=self.env.user_id, page=message.page_id)
                self.meta_inflight = None
                self.meta_timer = None
                self._pump()
            return None
        if isinstance(message, GetState):
            return TierState("stm", {"stm": self.core.to_state(), "seq": self.seq})
        if isinstance(message, Inspect):
            return STMPicture(
                self.seq, tuple(self.core.pages()), tuple(p for p, _when in self.outbox)
            )
        if isinstance(message, Snapshot):
            return self._snapshot()
        if isinstance(message, StateReply):
            self._state_arrived(message)
            return None
        if isinstance(message, _SnapshotTimeout):
            if self.pending_snapshot is not None and self.pending_snapshot[0] == message.token:
                self.pending_snapshot = None
                self.snapshot_timer = None
                self.env.metrics.inc("snapshots_deferred")
                log.warning(
                    "stm.snapshot_deferred",
                    user=self.env.user_id,
                    reason="MTM or LPM did not give its state in time",
                )
            return None
        if isinstance(message, Pending):
            return self.pending
        if isinstance(message, Progress):
            return self.seq, self.settled_through
        if isinstance(message, Ping):
            return None
        raise TypeError(f"STM actor got an unknown message: {type(message).__name__}")

    @property
    def pending(self) -> int:
        """Pages whose meta is not known yet or that are not yet handed to MTM."""
        waiting = sum(1 for p in self.core.pages() if not p.chain_id)
        return waiting + len(self.outbox)

    @property
    def settled_through(self) -> int:
        """The highest turn seq up to which every page has its meta and, if it left STM,
        was handed to MTM (see :class:`~.protocol.Progress`). Meta is asked for and the
        outbox drained oldest first, so this climbs past any seq while turns keep coming."""
        waiting = [p.seq for p, _when in self.outbox]
        waiting.extend(p.seq for p in self.core.pages() if not p.chain_id)
        return min(waiting) - 1 if waiting else self.seq

    def _remember_key(self, key: str, page_id: str) -> None:
        self.recent_keys[key] = page_id
        while len(self.recent_keys) > _RECENT_KEYS:
            self.recent_keys.popitem(last=False)

    def _add_turn(self, msg: AddTurn) -> str:
        if msg.turn_key and msg.turn_key in self.recent_keys:
            return self.recent_keys[msg.turn_key]  # stored before a crash: answer, don't redo
        env = self.env
        seq = self.seq + 1
        page = Page(
            user_id=env.user_id,
            assistant_id=msg.assistant_id,
            page_id=f"p{seq}",
            seq=seq,
            query=msg.query,
            response=msg.response,
            timestamp=msg.timestamp,
        )
        env.store.wal.append(persist.turn_record(page, msg.turn_key))
        self.seq = seq
        if msg.turn_key:
            self._remember_key(msg.turn_key, page.page_id)
        evicted = self.core.push(page)
        if evicted is not None:
            # The caller already waited for room in the placement queue (never wait here:
            # this actor is one that drains it). The page pushed out is pending placement
            # from now on; only MTM releases it, so the queue's pace is MTM's.
            env.insert_backlog.force_acquire()
            self.outbox.append((evicted, page.timestamp))
        self._pump()
        self.turns_since_snapshot += 1
        if self.turns_since_snapshot >= env.config.snapshot_every_turns:
            self._try_snapshot()
        return page.page_id

    def _try_snapshot(self) -> None:
        """Start the periodic snapshot without waiting for it: STM's part is taken now (the
        cut), MTM and LPM are asked to tell theirs (``GetState`` with ``reply_to``; they
        answer after every page already told to them), and the snapshot is written when
        both have arrived (:meth:`_state_arrived`). Turns go on meanwhile: a long placement
        queue behind a slow embedder never holds up ``add_turn``. A snapshot whose states
        do not arrive within ``_STATE_TIMEOUT_S`` is dropped and tried again after another
        ``snapshot_every_turns`` turns (recovery replays a longer WAL meanwhile)."""
        if self.pending_snapshot is not None:
            return  # one at a time; the turn counter keeps counting
        env = self.env
        if env.mtm_name not in env.registry or env.lpm_name not in env.registry:
            return  # a sibling is restarting; the next turn tries again
        self.snapshot_token += 1
        token = self.snapshot_token
        self.pending_snapshot = (token, self._stm_part(), {})
        self.turns_since_snapshot = 0
        if not (
            env.registry.tell(env.lpm_name, GetState(env.stm_name, token))
            and env.registry.tell(env.mtm_name, GetState(env.stm_name, token))
        ):
            # A sibling stopped meanwhile. A reply to this token that still comes is
            # ignored (no snapshot is pending); the next turn tries again.
            self.pending_snapshot = None
            return
        self.snapshot_timer = send_after(self.actor_ref, _STATE_TIMEOUT_S, _SnapshotTimeout(token))

    def _stm_part(self) -> dict[str, Any]:
        """STM's part of a snapshot, taken at the cut: its state, the turn keys, and the
        oldest turn seq whose WAL records must be kept."""
        oldest_needed = min(
            [p.seq for p, _ in self.outbox] + [p.seq for p in self.core.pages()] + [self.seq + 1]
        )
        return {
            "seq": self.seq,
            "stm": self.core.to_state(),
            # Caller-supplied turn keys must outlive the WAL records that carried them.
            "turn_keys": [[k, v] for k, v in list(self.recent_keys.items())[-_SNAPSHOT_KEYS:]],
            "keep_from_seq": oldest_needed,
        }

    def _state_arrived(self, reply: StateReply) -> None:
        pending = self.pending_snapshot
        if pending is None or pending[0] != reply.token:
            return  # a snapshot that timed out or was replaced
        parts = pending[2]
        parts[reply.state.tier] = reply.state.data
        if len(parts) < 2:
            return
        self.pending_snapshot = None
        if self.snapshot_timer is not None:
            self.snapshot_timer.cancel()
            self.snapshot_timer = None
        try:
            self._write_snapshot(pending[1], parts["mtm"], parts["lpm"])
        except MemoryOSError as exc:
            self.env.metrics.inc("snapshots_deferred")
            log.warning("stm.snapshot_failed", user=self.env.user_id, error=repr(exc))

    def _write_snapshot(self, part: dict[str, Any], mtm_state: Any, lpm_state: Any) -> None:
        state = {
            "seq": part["seq"],
            "stm": part["stm"],
            "mtm": mtm_state,
            "lpm": lpm_state,
            "turn_keys": part["turn_keys"],
        }
        persist.save_snapshot(
            self.env.store,
            state,
            keep_from_seq=part["keep_from_seq"],
            lpm_lsn=int(lpm_state.get("lsn", 0)),
        )

    # -- meta data and the outbox ----------------------------------------------------------

    def _next_without_meta(self, limit: int = 1) -> list[Page]:
        """Up to ``limit`` pages whose meta is not known, oldest first, consecutive seqs."""
        out: list[Page] = []
        for page in [p for p, _now in self.outbox] + list(self.core.pages()):
            if page.chain_id:
                if out:
                    break  # only a run of consecutive turns can share one chain call
                continue
            if out and page.seq != out[-1].seq + 1:
                break
            out.append(page)
            if len(out) >= limit:
                break
        return out

    def _pump(self) -> None:
        """Forward what is ready to MTM, and keep one meta job in flight.

        When several pages wait for their meta (the provider is slower than the turns
        arrive), one ``page_meta_batch`` job asks for all of them, up to
        ``meta_batch_max_pages``, in turn order; a single waiting page is one ``page_meta``
        job, as at light load. While pages already pushed out of STM wait for their meta,
        the bound is ``meta_batch_catchup_pages``: one job a turn at the provider then
        catches up with everything that arrived meanwhile.

        With no provider (the offline backend answers in this thread) a job's answer is
        applied at once and the next job asked for, until no page waits for its meta or
        ``_INLINE_JOBS`` jobs are done; then the rest follows in a later message.
        """
        for _ in range(_INLINE_JOBS):
            done = self._pump_once()
            if done is None:
                return
            self._meta_done(done, pump=False)
        self._drain_outbox()
        if self._next_without_meta() and not self.retry_armed:
            self.retry_armed = True
            self.actor_ref.tell(_Retry())

    def _pump_once(self) -> CompletionDone | None:
        """One step of :meth:`_pump`: forward what is ready, then start a meta job if none
        is in flight; returns the job's answer when it was computed here (not applied)."""
        self._drain_outbox()
        if self.meta_inflight is not None:
            return None
        cfg = self.env.config
        limit = cfg.meta_batch_max_pages
        if cfg.meta_batch_catchup_pages > limit and any(not p.chain_id for p, _ in self.outbox):
            # Pages pushed out of STM wait for their meta: the user is behind (each job
            # waits for its turn at the provider, turns keep coming). Their placement, the
            # user's settle lag and its writers' admission all wait for this job: ask for
            # all of them at once, up to the catch-up bound, instead of one batch a turn.
            limit = cfg.meta_batch_catchup_pages
        pages = self._next_without_meta(limit)
        if not pages:
            return None
        env = self.env
        if env.registry.lookup(env.stm_name) is not self.actor_ref:
            # Not registered yet (we are still starting): the answer would find no one.
            self._arm_retry()
            return None
        slot = env.gateway.try_reserve()
        if slot is None:
            self._arm_retry()
            return None
        first = pages[0]
        prev = (
            self.meta_prev
            if self.meta_prev is not None and self.meta_prev.seq == first.seq - 1
            else None
        )
        context: dict[str, Any] = {
            "previous_page": (
                {"query": prev.query, "response": prev.response} if prev is not None else None
            ),
            "previous_meta_chain": prev.meta_chain if prev is not None else "",
        }
        texts = [{"query": p.query, "response": p.response} for p in pages]
        if len(pages) == 1:
            kind, payload = "page_meta", {"page": texts[0], **context}
        else:
            kind, payload = "page_meta_batch", {"pages": texts, **context}
        tag = ",".join(p.page_id for p in pages)
        job = CompletionJob(kind, payload, env.user_id, env.stm_name, tag, env.epoch)
        done = None
        if env.gateway.service.answers_locally:
            # The offline backend answers in this thread: the answer is handed back for
            # _pump to apply now, with no message to ourselves and no timeout for it (a
            # failed answer is none: the timeout below asks again).
            done = env.gateway.answer_here(job, slot)
        elif not env.gateway.submit(job, slot):
            self._arm_retry()
            return None
        self.meta_inflight = tag
        self.meta_attempt += 1
        if done is not None:
            return done
        self.meta_timer = send_after(
            self.actor_ref, self.meta_timeout_s, _MetaTimeout(tag, self.meta_attempt)
        )
        return None

    def on_stop(self) -> None:
        if self.meta_timer is not None:
            self.meta_timer.cancel()
        if self.snapshot_timer is not None:
            self.snapshot_timer.cancel()

    def _arm_retry(self) -> None:
        if not self.retry_armed:
            self.retry_armed = True
            send_after(self.actor_ref, _RETRY_S, _Retry())

    def _meta_done(self, done: CompletionDone, *, pump: bool = True) -> None:
        page_ids = done.tag.split(",")
        if done.kind == "page_meta_batch":
            answers = list(done.data.get("pages", ()))
        else:
            answers = [done.data]
        if done.tag != self.meta_inflight:
            # Not the job in flight. If none is (it timed out and is not asked again yet)
            # and this answer starts at the first page still waiting, it is as good as the
            # one that would be asked for; otherwise it is late.
            waiting = self._next_without_meta() if self.meta_inflight is None else []
            if not waiting or waiting[0].page_id != page_ids[0]:
                for page_id, data in zip(page_ids, answers, strict=True):
                    self._late_meta(
                        page_id, self._unquote(page_ids[0], page_id, data), done.degraded
                    )
                return
        if self.meta_timer is not None:
            self.meta_timer.cancel()
            self.meta_timer = None
        self.meta_inflight = None
        # The gateway checked that a batch answer has one entry per page, in order.
        for page_id, data in zip(page_ids, answers, strict=True):
            self._apply_meta(page_id, self._unquote(page_ids[0], page_id, data))
        if pump:
            self._pump()

    def _unquote(self, first_id: str, page_id: str, data: dict[str, Any]) -> dict[str, Any]:
        """``data`` (a meta answer for ``page_id`` from a job starting at ``first_id``)
        without its chain summary when a page that summary may quote was deleted while the
        job was out: the page before the job's first and the job's pages before this one
        (a deleted page's text must not come back in its successor's summary)."""
        edits = self.env.store.edits
        first, seq = int(first_id[1:]), int(page_id[1:])
        if (
            data.get("meta_chain")
            and edits.deleted_pages
            and any(edits.page_deleted(s) for s in range(max(1, first - 1), seq))
        ):
            self.env.metrics.inc("meta_chains_scrubbed")
            return {**data, "meta_chain": ""}
        return data

    def _apply_meta(self, page_id: str, data: dict[str, object]) -> None:
        """Set one page's chain meta from its answer; the page's own WAL record follows."""
        seq = int(page_id[1:])
        prev = (
            self.meta_prev if self.meta_prev is not None and self.meta_prev.seq == seq - 1 else None
        )
        continues = bool(data.get("continues")) and prev is not None
        chain_id = prev.chain_id if continues and prev is not None else page_id
        meta_chain = str(data.get("meta_chain", ""))
        raw_keywords = data.get("keywords", ())
        if not isinstance(raw_keywords, Iterable):
            raise TypeError(f"page meta keywords are a {type(raw_keywords).__name__}")
        keywords = frozenset(str(k).lower() for k in raw_keywords if str(k))
        page = self.core.get(page_id)
        if page is not None:
            self.core.set_meta(page_id, meta_chain, chain_id, keywords)
            page = self.core.get(page_id)
        else:
            for i, (queued, when) in enumerate(self.outbox):
                if queued.page_id == page_id:
                    page = dataclasses.replace(
                        queued, meta_chain=meta_chain, chain_id=chain_id, keywords=keywords
                    )
                    self.outbox[i] = (page, when)
                    break
        if page is None:
            return  # already handed to MTM without meta (MTM was catching up): nothing to do
        self.env.store.wal.append(persist.meta_record(page))
        self.meta_prev = page

    def _late_meta(self, page_id: str, data: dict[str, Any], degraded: bool) -> None:
        """An answer for a page whose meta is already known: a redo of a degraded answer
        (the provider is back), or a duplicate of a job that timed out and was asked again.

        A fresh (non-degraded) answer replaces the page's chain summary and keywords while
        STM still holds the page (its chain stays: later pages were chained to it); once
        the page has gone to MTM the answer is counted as unused.
        """
        metrics = self.env.metrics
        if degraded:
            metrics.inc("late_meta_ignored")
            return
        meta_chain = str(data.get("meta_chain", ""))
        kws = frozenset(str(k).lower() for k in data.get("keywords", ()) if str(k))
        page = self.core.get(page_id)
        if page is not None and page.chain_id:
            self.core.set_meta(page_id, meta_chain, page.chain_id, kws)
            page = self.core.get(page_id)
        else:
            page = None
            for i, (queued, when) in enumerate(self.outbox):
                if queued.page_id == page_id and queued.chain_id:
                    page = dataclasses.replace(queued, meta_chain=meta_chain, keywords=kws)
                    self.outbox[i] = (page, when)
                    break
        if page is None:
            metrics.inc("late_meta_unused")
            return
        self.env.store.wal.append(persist.meta_record(page))  # replay keeps the last meta of a seq
        if self.meta_prev is not None and self.meta_prev.page_id == page.page_id:
            self.meta_prev = page
        metrics.inc("late_meta_applied")

    def _drop_pages(self, seqs: Any) -> int:
        """Delete the pages of turns ``seqs`` held here or in the outbox; returns how many."""
        wanted = {int(s) for s in seqs}
        dropped = sum(1 for seq in wanted if self.core.remove(seq) is not None)
        kept = deque((p, when) for p, when in self.outbox if p.seq not in wanted)
        dropped += len(self.outbox) - len(kept)
        self.outbox = kept
        if self.meta_prev is not None and self.meta_prev.seq in wanted:
            self.meta_prev = None
        self._scrub_chains()
        self._pump()
        return dropped

    def _scrub_chains(self) -> None:
        """Clear the chain summaries that may quote a deleted page (see the store's
        ``EditLog``); the pages keep their chain."""
        edits = self.env.store.edits
        if not edits.scrub_chains:
            return
        for page in self.core.pages():
            if page.meta_chain and edits.scrubbed(page.chain_id, page.seq):
                self.core.set_meta(page.page_id, "", page.chain_id, page.keywords)
        self.outbox = deque(
            (
                dataclasses.replace(p, meta_chain="")
                if p.meta_chain and edits.scrubbed(p.chain_id, p.seq)
                else p,
                when,
            )
            for p, when in self.outbox
        )
        if self.meta_prev is not None:
            self.meta_prev = self.core.get(self.meta_prev.page_id) or self.meta_prev
            if self.meta_prev.meta_chain and edits.scrubbed(
                self.meta_prev.chain_id, self.meta_prev.seq
            ):
                self.meta_prev = dataclasses.replace(self.meta_prev, meta_chain="")

    def _drain_outbox(self) -> None:
        """Forward, in turn order, every page at the head of the outbox whose meta is
        there: up to ``_FORWARD_BATCH`` of them a message (MTM embeds them in one call)."""
        while self.outbox and self.outbox[0][0].chain_id:
            ready: list[InsertPage] = []
            for page, now in self.outbox:
                if not page.chain_id or len(ready) >= _FORWARD_BATCH:
                    break
                ready.append(InsertPage(page, now))
            if not self._forward(ready[0] if len(ready) == 1 else InsertPages(tuple(ready))):
                self._arm_retry()
                return
            for _ in ready:
                self.outbox.popleft()

    def _forward(self, insert: InsertPage | InsertPages) -> bool:
        # Counted before the tell (MTM may place them before tell returns); not delivered:
        # MTM is restarting, and the caller tries again shortly.
        n = len(insert.inserts) if isinstance(insert, InsertPages) else 1
        self.env.insert_backlog.told(n)
        if self.env.registry.tell(self.env.mtm_name, insert):
            return True
        self.env.insert_backlog.told(-n)
        return False

    def _snapshot(self) -> int:
        """Write a coordinated snapshot of all three tiers; return the turn seq it covers.

        MTM and LPM are asked for their state *after* every page already told to them, so
        the snapshot is a consistent cut. The snapshot's ``seq`` is the last turn whose page
        MTM has (or that is in STM); pages still in the outbox are replayed from the WAL.
        """
        env = self.env
        mtm = env.registry.lookup(env.mtm_name)
        lpm = env.registry.lookup(env.lpm_name)
        if mtm is None or lpm is None:
            return 0  # a sibling is restarting; the next trigger will snapshot
        # LPM first, then MTM: a persona update MTM still owes in its state cannot be in
        # LPM's state, so it is either asked again or found in the WAL tail (by job id).
        part = self._stm_part()
        f_lpm = lpm.ask(GetState(), block=False)
        f_mtm = mtm.ask(GetState(), block=False)
        lpm_state = f_lpm.get(timeout=_STATE_TIMEOUT_S).data
        mtm_state = f_mtm.get(timeout=_STATE_TIMEOUT_S).data
        self._write_snapshot(part, mtm_state, lpm_state)
        self.turns_since_snapshot = 0
        return self.seq
