"""Single memories of a user: list, get, delete, correct, and their history.

:class:`MemoryEditing` holds those calls of the facade; it works on the facade's
:class:`~memoryos_actors.core.SystemCore` and returns the records of
:mod:`memoryos_actors.memories`. An edit is written to the user's WAL by the LPM actor,
then STM and MTM drop what it deletes, the cold index applies it, and the gateway forgets
the user's cached answers and embeddings (they may quote the deleted text).
"""

from __future__ import annotations

import dataclasses
import threading
import zlib
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from .actors.base import actor_names
from .actors.protocol import ApplyEdit, EditMemory, Inspect, ReadHistory, Remember
from .directory import UserEntry
from .errors import InvalidInput, UnknownMemory
from .lexicon import terms
from .memories import (
    MAX_ARCHIVED_LIMIT,
    ArchivedMemories,
    Memory,
    MemoryEvent,
    archived_in,
    archived_memory,
    archived_one,
    entry_metadata,
    page_memory,
    page_text,
)
from .messages import TraitLevel
from .paging import MemoryList, check_limit, decode_cursor, memory_sort_key, page_of
from .store.edits import (
    EDITABLE_KINDS,
    MEMORY_KINDS,
    EditRecord,
    MemoryRef,
    parse_memory_id,
)
from .validation import check_metadata as _check_metadata
from .validation import check_new_id as _check_new_id
from .validation import check_text as _check_text
from .validation import check_user_id as _check_user_id

if TYPE_CHECKING:
    from .activation import Lifecycle
    from .barrier import Barriers
    from .core import SystemCore

__all__ = ["MemoryEditing"]

#: Locks that serialise the edits of a user (see ``MemoryEditing._edit_lock``).
_EDIT_LOCK_STRIPES = 64


class MemoryEditing:
    """The per-memory calls of the facade (thread-safe). The contracts are documented on
    :class:`~memoryos_actors.api.MemoryAPI`.

    Every call here raises :class:`~memoryos_actors.errors.UnknownUser` for a user with no
    data, and writes nothing for it.
    """

    def __init__(self, core: SystemCore, lifecycle: Lifecycle, barriers: Barriers) -> None:
        self._core = core
        self._lifecycle = lifecycle
        self._barriers = barriers
        # An edit reads the memory's value, then logs the change: two edits of one user
        # must not interleave between the two, or a correction logs a value a deletion
        # erased. Striped by user: a bounded set of locks, edits of most users apart.
        self._edit_locks = tuple(threading.Lock() for _ in range(_EDIT_LOCK_STRIPES))

    def _edit_lock(self, uid: str) -> threading.Lock:
        return self._edit_locks[zlib.crc32(uid.encode("utf-8")) % _EDIT_LOCK_STRIPES]

    # -- reading ---------------------------------------------------------------------------

    def memories(
        self,
        user_id: str,
        kinds: Iterable[str] | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> MemoryList:
        """See :meth:`~memoryos_actors.api.MemoryAPI.memories`."""
        uid = _check_user_id(user_id)
        wanted = self._check_kinds(kinds)
        check_limit(limit)
        after = None if cursor is None else decode_cursor(cursor, "memories", (int, int, str))
        listed = self._lifecycle.call(
            uid, lambda entry: self._list(entry, uid, wanted), create=False
        )
        shown, next_cursor = page_of(
            listed, lambda m: memory_sort_key(m.memory_id), "memories", limit, after
        )
        return MemoryList(shown, next_cursor)

    def get_memory(self, user_id: str, memory_id: str) -> Memory:
        """See :meth:`~memoryos_actors.api.MemoryAPI.get_memory`."""
        uid = _check_user_id(user_id)
        ref = parse_memory_id(memory_id)
        return self._lifecycle.call(uid, lambda entry: self._find(entry, uid, ref), create=False)

    def memory_history(self, user_id: str, memory_id: str) -> list[MemoryEvent]:
        """See :meth:`~memoryos_actors.api.MemoryAPI.memory_history`."""
        uid = _check_user_id(user_id)
        ref = parse_memory_id(memory_id)

        def run(entry: UserEntry) -> list[MemoryEvent]:
            edits, changes = self._core.ask(actor_names(uid)[2], ReadHistory(ref.memory_id))
            try:
                current: Memory | None = self._find(entry, uid, ref)
            except UnknownMemory:
                current = None
            events: list[MemoryEvent] = []
            if current is not None and ref.kind != "trait":
                by = (
                    "turn"
                    if ref.kind == "page"
                    else "segmentation"
                    if ref.kind == "segment"
                    else "remember"
                    if current.origin == "remembered"
                    else f"persona update of {current.source_segment or 'unknown segment'}"
                )
                own = [e for e in edits if e.memory_id == ref.memory_id]
                first = own[0].old if own and ref.kind in ("fact", "agent_trait") else current.text
                events.append(
                    MemoryEvent(ref.memory_id, "created", current.timestamp, None, str(first), by)
                )
            level: str | None = None
            for ts, new_level, _evidence, source in changes:
                if source != "edit":
                    events.append(
                        MemoryEvent(
                            ref.memory_id,
                            "changed",
                            ts,
                            level,
                            new_level,
                            f"persona update of {source}" if source else "persona update",
                        )
                    )
                level = new_level
            for edit in edits:
                if edit.memory_id != ref.memory_id:
                    # A deletion that took this memory along: it quoted a deleted page.
                    took = {mid: action for mid, action, _at in edit.derived}
                    events.append(
                        MemoryEvent(
                            ref.memory_id,
                            "deleted" if took.get(ref.memory_id) == "delete" else "changed",
                            float(edit.ts),
                            None,
                            None,
                            f"deletion of {edit.memory_id}",
                        )
                    )
                    continue
                deleted = edit.op == "delete"
                events.append(
                    MemoryEvent(
                        ref.memory_id,
                        "deleted" if deleted else "corrected",
                        float(edit.ts),
                        str(edit.old) or None,
                        None if deleted or edit.new is None else edit.new,
                        "edit",
                    )
                )
            if not events:
                raise UnknownMemory(f"user {uid!r} has no memory {ref.memory_id!r}")
            events.sort(key=lambda e: e.at)
            return events

        return self._lifecycle.call(uid, run, create=False)

    def archived_memories(
        self,
        user_id: str,
        kind: str = "page",
        query: str | None = None,
        offset: int = 0,
        limit: int = 50,
        per_day: bool = False,
    ) -> ArchivedMemories:
        """See :meth:`~memoryos_actors.api.MemoryAPI.archived_memories`."""
        uid = _check_user_id(user_id)
        if kind not in ("page", "fact", "agent_trait"):
            raise InvalidInput(f"kind must be 'page', 'fact' or 'agent_trait', got {kind!r}")
        for name, value, top in (("offset", offset, None), ("limit", limit, MAX_ARCHIVED_LIMIT)):
            if (
                isinstance(value, bool)
                or not isinstance(value, int)
                or value < 0
                or (top is not None and value > top)
            ):
                raise InvalidInput(f"{name} must be an int in 0..{top or 'any'}, got {value!r}")
        if query is not None:
            query = _check_text(
                query, "query", self._core.config.max_text_bytes, setting="max_text_bytes"
            )

        def run(entry: UserEntry) -> ArchivedMemories:
            assert entry.store is not None
            cold = entry.store.cold
            corrected = entry.store.edits.corrected
            # Cold items, or the narrower rows a search answers: archived_memory reads both.
            items: list[Any]
            total, items = cold.newest(kind, 0 if query else offset, 0 if query else limit + 1)
            if query:
                found = cold.search(terms(query), offset + limit + 1, kinds=(kind,)).items
                items = list(found[offset:])
            days = tuple((d * 86400.0, n) for d, n in cold.day_counts(kind)) if per_day else ()
            out = tuple(archived_memory(item, corrected) for item in items[:limit])
            return ArchivedMemories(kind, total, offset, out, query, len(items) > limit, days)

        return self._lifecycle.call(uid, run, create=False)

    # -- changing --------------------------------------------------------------------------

    def remember(
        self, user_id: str, text: str, *, metadata: Mapping[str, Any] | None = None
    ) -> str:
        """See :meth:`~memoryos_actors.api.MemoryAPI.remember`."""
        uid = _check_new_id(_check_user_id(user_id))
        self._core.check_writable("remember")
        text = _check_text(
            text, "text", self._core.config.max_text_bytes, setting="max_text_bytes"
        ).strip()
        if not text:
            raise InvalidInput("text must not be blank")
        meta = _check_metadata(dict(metadata) if isinstance(metadata, Mapping) else metadata)
        lpm_n = actor_names(uid)[2]
        memory_id = self._lifecycle.call(
            uid, lambda _e: self._core.ask(lpm_n, Remember(text, meta))
        )
        return str(memory_id)

    def delete_memory(self, user_id: str, memory_id: str) -> MemoryEvent:
        """See :meth:`~memoryos_actors.api.MemoryAPI.delete_memory`."""
        uid = _check_user_id(user_id)
        ref = parse_memory_id(memory_id)
        self._core.check_writable("delete_memory")

        def run(entry: UserEntry) -> tuple[EditRecord, tuple[str, ...]]:
            with self._edit_lock(uid):
                return deleting(entry)

        def deleting(entry: UserEntry) -> tuple[EditRecord, tuple[str, ...]]:
            found = self._find(entry, uid, ref)
            gone: list[Memory] = []
            if ref.kind == "page":
                gone = [found]
            elif ref.kind == "segment":
                ids = {f"page:{p}" for p in found.page_ids}
                gone = [
                    m for m in self._list(entry, uid, frozenset(("page",))) if m.memory_id in ids
                ]
            chains: dict[str, int] = {}
            for m in gone:
                if m.chain_id:
                    seq = int(m.memory_id[len("page:p") :])
                    chains[m.chain_id] = min(chains.get(m.chain_id, seq), seq)
            segments = (found.segment_id,) if ref.kind == "page" and found.segment_id else ()
            stm_n, mtm_n, _lpm_n = actor_names(uid)
            upto = int(self._core.ask(stm_n, Inspect()).turns)
            seqs = tuple(int(m.memory_id[len("page:p") :]) for m in gone)
            # What LPM needs to find the facts and traits that quote the pages: their
            # texts, and what each segment MTM holds keeps (the archive has the rest).
            held = self._core.ask(mtm_n, Inspect()).segments
            kept = tuple(
                (
                    seg.segment_id,
                    tuple(page_text(p.query, p.response) for p in seg.pages if p.seq not in seqs),
                )
                for seg in held
            )
            rec = self._edit(
                uid,
                EditMemory(
                    "delete",
                    ref.memory_id,
                    "",  # the text is not kept anywhere
                    pages=seqs,
                    chains=tuple((c, s, upto) for c, s in chains.items()),
                    segments=segments,
                    quoted=tuple((m.segment_id or "", m.text) for m in gone),
                    kept=kept,
                ),
            )
            # A summary that may quote the page is asked for again, unless the page was
            # all its segment held (the segment went with it).
            left = dict(kept)
            summaries = tuple(
                f"segment:{sid}"
                for sid in segments
                if left.get(sid) or (sid not in left and self._archived_left(entry, sid, seqs))
            )
            return dataclasses.replace(rec, old=found.text), summaries

        rec, summaries = self._lifecycle.call(uid, run, create=False)
        self._purge_cached(uid)
        return MemoryEvent(
            ref.memory_id,
            "deleted",
            rec.ts,
            str(rec.old),
            None,
            "edit",
            rewrote=rec.rewrote + summaries,
        )

    def correct_memory(
        self, user_id: str, memory_id: str, value: str, evidence: str = ""
    ) -> MemoryEvent:
        """See :meth:`~memoryos_actors.api.MemoryAPI.correct_memory`."""
        uid = _check_user_id(user_id)
        ref = parse_memory_id(memory_id)
        self._core.check_writable("correct_memory")
        if ref.kind not in EDITABLE_KINDS:
            raise InvalidInput(
                f"{ref.kind} memories cannot be corrected (delete it and add "
                "the turn again instead); facts, agent traits and traits can"
            )
        max_bytes = self._core.config.max_text_bytes
        value = _check_text(value, "value", max_bytes, setting="max_text_bytes").strip()
        if not value:
            raise InvalidInput("value must not be blank")
        evidence = _check_text(
            evidence, "evidence", max_bytes, allow_empty=True, setting="max_text_bytes"
        )
        if ref.kind == "trait":
            TraitLevel.known(ref.key, value, evidence)  # one of the 90, a valid level

        def run(entry: UserEntry) -> EditRecord:
            with self._edit_lock(uid):
                try:
                    old = self._find(entry, uid, ref).text
                except UnknownMemory:
                    if ref.kind != "trait":
                        raise
                    old = ""  # a trait not observed yet can be set too
                return self._edit(
                    uid, EditMemory("correct", ref.memory_id, old, value=value, evidence=evidence)
                )

        rec = self._lifecycle.call(uid, run, create=False)
        self._purge_cached(uid)
        return MemoryEvent(
            ref.memory_id,
            "corrected",
            rec.ts,
            str(rec.old) or None,
            str(rec.new),
            "edit",
        )

    # -- helpers ---------------------------------------------------------------------------

    @staticmethod
    def _check_kinds(kinds: Iterable[str] | None) -> frozenset[str]:
        if kinds is None:
            return frozenset(MEMORY_KINDS)
        if isinstance(kinds, str):
            kinds = (kinds,)
        out = frozenset(kinds)
        bad = sorted(k for k in out if k not in MEMORY_KINDS)
        if bad or not out:
            raise InvalidInput(f"kinds must be among {list(MEMORY_KINDS)}, got {sorted(out)}")
        return out

    def _edit(self, uid: str, edit: EditMemory) -> EditRecord:
        stm_n, mtm_n, lpm_n = actor_names(uid)
        rec = self._core.ask(lpm_n, edit)
        self._core.ask(stm_n, ApplyEdit(rec))
        self._core.ask(mtm_n, ApplyEdit(rec))
        return rec

    @staticmethod
    def _archived_left(entry: UserEntry, segment_id: str, seqs: tuple[int, ...]) -> bool:
        """Whether the archive holds a page of ``segment_id`` besides turns ``seqs``."""
        if entry.store is None:
            return False
        return any(
            seq not in seqs for _sid, seq, _text in entry.store.cold.segment_pages((segment_id,))
        )

    def _purge_cached(self, uid: str) -> None:
        """The gateway's cached answers, embeddings and redo records of ``uid`` may quote
        an edited memory: drop them (they are only a cache)."""
        self._core.gateway_service.purge_user(uid)
        self._core.gateway.purge_user(uid)

    def _find(self, entry: UserEntry, uid: str, ref: MemoryRef) -> Memory:
        for mem in self._list(entry, uid, frozenset((ref.kind,)), only=ref):
            if mem.memory_id == ref.memory_id:
                return mem
        raise UnknownMemory(f"user {uid!r} has no memory {ref.memory_id!r}")

    def _list(
        self, entry: UserEntry, uid: str, kinds: frozenset[str], only: MemoryRef | None = None
    ) -> list[Memory]:
        stm_n, mtm_n, lpm_n = actor_names(uid)
        out: list[Memory] = []
        need_pages = bool(kinds & {"page", "segment"})
        if need_pages:
            # Pages told to MTM are placed before its picture is taken.
            self._barriers.drain_user(uid, summaries=False)
            stm = self._core.ask(stm_n, Inspect())
            mtm = self._core.ask(mtm_n, Inspect())
            if "page" in kinds:
                for p in tuple(stm.outbox) + tuple(stm.pages):
                    out.append(
                        page_memory(
                            p.page_id,
                            "stm",
                            p.query,
                            p.response,
                            p.timestamp,
                            assistant_id=p.assistant_id,
                            chain_id=p.chain_id or None,
                        )
                    )
            for seg in mtm.segments:
                if "page" in kinds:
                    out.extend(
                        page_memory(
                            p.page_id,
                            "mtm",
                            p.query,
                            p.response,
                            p.timestamp,
                            assistant_id=p.assistant_id,
                            segment_id=seg.segment_id,
                            chain_id=p.chain_id or None,
                        )
                        for p in seg.pages
                    )
                if "segment" in kinds:
                    out.append(
                        Memory(
                            f"segment:{seg.segment_id}",
                            "segment",
                            "mtm",
                            seg.summary,
                            seg.created,
                            page_ids=tuple(p.page_id for p in seg.pages),
                            heat=seg.heat,
                            keywords=tuple(sorted(seg.keywords)),
                        )
                    )
        edits = entry.store.edits if entry.store is not None else None
        if kinds & {"fact", "agent_trait", "trait"}:
            lpm = self._core.ask(lpm_n, Inspect())
            corrected = edits.corrected if edits is not None else {}
            if "trait" in kinds:
                out.extend(
                    Memory(
                        f"trait:{t.name}",
                        "trait",
                        "lpm",
                        str(t.level),
                        0.0,
                        evidence=t.evidence,
                        edited=f"trait:{t.name}" in corrected,
                    )
                    for t in lpm.traits
                )
            if "fact" in kinds:
                out.extend(
                    Memory(
                        f"fact:{e.entry_id}",
                        "fact",
                        "lpm",
                        e.text,
                        e.timestamp,
                        source_segment=e.source_segment,
                        edited=f"fact:{e.entry_id}" in corrected,
                        origin=e.origin,
                        metadata=entry_metadata(e.metadata),
                    )
                    for e in lpm.kb
                )
            if "agent_trait" in kinds:
                for aid, persona in lpm.agents.items():
                    for e in persona.get("traits", ()):
                        mid = f"agent_trait:{aid}:{e.entry_id}"
                        out.append(
                            Memory(
                                mid,
                                "agent_trait",
                                "lpm",
                                e.text,
                                e.timestamp,
                                assistant_id=aid,
                                source_segment=e.source_segment,
                                edited=mid in corrected,
                            )
                        )
        if entry.store is not None and (
            only is None or not any(m.memory_id == only.memory_id for m in out)
        ):
            found = archived_one(entry.store, only) if only is not None else None
            # One archived memory is looked up in the cold index; reading the whole
            # archive is left for listings and what the index does not hold.
            out.extend([found] if found is not None else archived_in(entry.store, kinds))
        # STM, MTM and the archive are looked at one after the other, in the direction
        # pages move: a page (or segment) that moved on between two looks is in both.
        # It is listed once, as the later look found it.
        latest = {m.memory_id: m for m in out}
        if len(latest) == len(out):
            return out
        return [m for m in out if latest[m.memory_id] is m]
