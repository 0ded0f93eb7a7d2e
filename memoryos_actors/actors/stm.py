"""The STM actor: the durable entry point of every turn.

``AddTurn`` is answered as soon as the turn is in the user's write-ahead log and in the STM
queue; the dialogue-chain meta data is asked of the gateway afterwards and filled in when the
reply arrives. A page pushed out of the queue is told to the MTM actor.

Recovery (on first start and on every restart): the newest snapshot's STM section plus every
``turn`` record of the WAL after it. Because STM is a FIFO of a fixed capacity, the pages it
holds are always the last ``stm_capacity`` turns, so replay is exact.
"""

from __future__ import annotations

import structlog

from supervisor import SupervisedActor, send_after

from ..errors import MemoryOSError
from ..messages import AddTurn, Page
from ..tiers.stm import STMCore
from . import persist
from .base import UserEnv
from .protocol import (
    CompletionDone,
    CompletionJob,
    GetState,
    InsertPage,
    Inspect,
    Ping,
    Snapshot,
    STMPages,
)

__all__ = ["STMActor", "page_from_record", "turn_record"]

log = structlog.get_logger("memoryos.stm")

#: How long to wait before re-sending a page to an MTM actor that is restarting (seconds).
_FORWARD_RETRY_S = 0.02


def turn_record(page: Page) -> dict[str, object]:
    """The WAL record of one turn (short keys: it is written once per turn)."""
    return {
        "t": "turn",
        "seq": page.seq,
        "a": page.assistant_id,
        "q": page.query,
        "r": page.response,
        "ts": page.timestamp,
    }


def page_from_record(user_id: str, rec: dict[str, object]) -> Page:
    """Rebuild the page of a WAL ``turn`` record."""
    seq = int(rec["seq"])  # type: ignore[call-overload]
    return Page(
        user_id=user_id,
        assistant_id=str(rec["a"]),
        page_id=f"p{seq}",
        seq=seq,
        query=str(rec["q"]),
        response=str(rec["r"]),
        timestamp=float(rec["ts"]),  # type: ignore[arg-type]
    )


class _RetryForward:
    """Timer message: try again to hand a page to MTM. Private to this actor."""

    __slots__ = ("insert",)

    def __init__(self, insert: InsertPage) -> None:
        self.insert = insert


class STMActor(SupervisedActor):
    """Short-term memory of one user: a FIFO of ``stm_capacity`` pages behind a WAL."""

    expected_errors = (MemoryOSError,)

    def __init__(self, env: UserEnv) -> None:
        super().__init__()
        self.env = env
        self.core = STMCore(env.config.stm_capacity)
        self.seq = 0
        self.turns_since_snapshot = 0

    # -- lifecycle -----------------------------------------------------------------------

    def on_start(self) -> None:
        store = self.env.store
        rec_ = persist.recover(store)
        if rec_.state is not None:
            self.core = STMCore.from_state(rec_.state["stm"])
            self.seq = int(rec_.state["seq"])
        replayed = 0
        for _lsn, rec in rec_.records:
            if rec.get("t") == "turn" and int(rec["seq"]) > self.seq:
                page = page_from_record(self.env.user_id, rec)
                self.core.push(page)
                self.seq = page.seq
                replayed += 1
        self.turns_since_snapshot = replayed
        # Pages replayed from the WAL have no chain meta yet: ask for it again.
        for page in self.core.pages():
            if not page.meta_chain and replayed:
                self._request_meta(page, None)
        log.debug("stm.recovered", user=self.env.user_id, seq=self.seq, replayed=replayed)

    # -- messages ------------------------------------------------------------------------

    def on_receive(self, message: object) -> object:
        if isinstance(message, AddTurn):
            return self._add_turn(message)
        if isinstance(message, STMPages):
            return tuple(self.core.pages())
        if isinstance(message, CompletionDone):
            self._apply_meta(message)
            return None
        if isinstance(message, _RetryForward):
            self._forward(message.insert, retry=False)
            return None
        if isinstance(message, GetState):
            return {"stm": self.core.to_state(), "seq": self.seq}
        if isinstance(message, Inspect):
            return self.seq, tuple(self.core.pages())
        if isinstance(message, Snapshot):
            return self._snapshot()
        if isinstance(message, Ping):
            return self.seq
        raise TypeError(f"STM actor got an unknown message: {type(message).__name__}")

    def _add_turn(self, msg: AddTurn) -> str:
        env = self.env
        # Reserve room for the background work first: if the system is flooded the caller
        # gets Overloaded before anything is written, so a retry never duplicates a turn.
        slot = env.gateway.reserve(env.config.overload_timeout_seconds)
        try:
            env.insert_backlog.acquire(env.config.overload_timeout_seconds)
        except BaseException:
            env.gateway.release(slot)
            raise
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
        try:
            env.store.wal.append(turn_record(page))
        except BaseException:
            env.gateway.release(slot)
            env.insert_backlog.release()
            raise
        self.seq = seq
        evicted = self.core.push(page)
        if evicted is not None:
            self._forward(InsertPage(evicted, page.timestamp), retry=True)
        else:
            env.insert_backlog.release()
        self._request_meta(page, slot)
        self.turns_since_snapshot += 1
        if self.turns_since_snapshot >= env.config.snapshot_every_turns:
            self._snapshot()
        return page.page_id

    def _forward(self, insert: InsertPage, *, retry: bool) -> None:
        ref = self.env.registry.lookup(self.env.mtm_name)
        if ref is not None:
            try:
                ref.tell(insert)
                return
            except Exception:  # died between lookup and tell
                pass
        if retry:
            # MTM is restarting; its recovery replays the WAL, and a retry closes the window
            # in which the new MTM had already read the WAL but was not yet registered.
            send_after(self.actor_ref, _FORWARD_RETRY_S, _RetryForward(insert))
        else:
            self.env.insert_backlog.release()

    def _request_meta(self, page: Page, slot: str | None) -> None:
        """Ask the gateway for the page's chain meta; ``slot`` is a reserved backlog slot."""
        env = self.env
        if slot is None:
            slot = env.gateway.reserve(env.config.overload_timeout_seconds)
        previous = self.core.previous(page.page_id)
        payload = {
            "page": {"query": page.query, "response": page.response},
            "previous_page": (
                {"query": previous.query, "response": previous.response}
                if previous is not None
                else None
            ),
            "previous_meta_chain": previous.meta_chain if previous is not None else "",
        }
        env.gateway.submit(
            CompletionJob(
                kind="page_meta",
                payload=payload,
                user_id=env.user_id,
                reply_to=env.stm_name,
                tag=page.page_id,
            ),
            slot,
        )

    def _apply_meta(self, done: CompletionDone) -> None:
        data = done.data
        previous = self.core.previous(done.tag)
        continues = bool(data.get("continues")) and previous is not None
        chain_id = (previous.chain_id or previous.page_id) if continues and previous else done.tag
        self.core.set_meta(
            done.tag,
            meta_chain=str(data.get("meta_chain", "")),
            chain_id=chain_id,
            keywords=frozenset(str(k) for k in data.get("keywords", ())),
        )

    def _snapshot(self) -> int:
        """Write a coordinated snapshot of all three tiers; return the turn seq it covers.

        MTM and LPM are asked for their state *after* every page already told to them, so
        the snapshot is a consistent cut: MTM holds every page up to ``seq - stm_capacity``.
        """
        env = self.env
        mtm = env.registry.lookup(env.mtm_name)
        lpm = env.registry.lookup(env.lpm_name)
        if mtm is None or lpm is None:
            return 0  # a sibling is restarting; the next trigger will snapshot
        f_mtm = mtm.ask(GetState(), block=False)
        f_lpm = lpm.ask(GetState(), block=False)
        mtm_state = f_mtm.get(timeout=60)
        lpm_state = f_lpm.get(timeout=60)
        state = {
            "seq": self.seq,
            "stm": self.core.to_state(),
            "mtm": mtm_state,
            "lpm": lpm_state,
        }
        persist.save_snapshot(
            env.store,
            state,
            keep_from_seq=self.seq - env.config.stm_capacity + 1,
            lpm_lsn=int(lpm_state.get("lsn", 0)),
        )
        self.turns_since_snapshot = 0
        return self.seq
