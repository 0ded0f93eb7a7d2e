"""Single memories of a user: list, get, delete, correct, and their history.

A mixin of :class:`~memoryos_actors.system.MemoryOS` (``MemoryEditing``) and the records it
returns (:class:`Memory`, :class:`MemoryEvent`). Memory ids are described in
:mod:`memoryos_actors.store.edits`; an edit is written to the user's WAL by the LPM actor,
then STM and MTM drop what it deletes, the cold index applies it, and the gateway forgets
the user's cached answers and embeddings (they may quote the deleted text).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from .actors.base import actor_names
from .actors.protocol import ApplyEdit, EditMemory, Inspect, ReadHistory
from .directory import UserEntry
from .errors import InvalidInput, UnknownMemory
from .messages import TraitLevel
from .paging import MemoryList, check_limit, decode_cursor, memory_sort_key, page_of
from .store.edits import (
    EDITABLE_KINDS,
    MEMORY_KINDS,
    MemoryRef,
    cold_item_id,
    parse_memory_id,
)
from .validation import check_text as _check_text
from .validation import check_user_id as _check_user_id

__all__ = ["ArchivedMemories", "Memory", "MemoryEditing", "MemoryEvent", "MemoryList"]

#: Most archived memories one :meth:`MemoryEditing.archived_memories` call returns.
MAX_ARCHIVED_LIMIT = 500


@dataclass(frozen=True, slots=True)
class Memory:
    """One memory of a user, with where it is and where it came from.

    Attributes:
        memory_id: its id (``page:p12``, ``segment:s3``, ``fact:f7``,
            ``agent_trait:<assistant>:a2``, ``trait:<name>``).
        kind: ``"page"``, ``"segment"``, ``"fact"``, ``"agent_trait"`` or ``"trait"``.
        tier: where it is now: ``"stm"``, ``"mtm"``, ``"archive"`` (the cold tier) or
            ``"lpm"``.
        text: its content: a page's query and response on two lines, a segment's summary,
            a fact's or agent trait's sentence, a trait's level.
        timestamp: when it was stored or learned, seconds (0.0 for a trait).
        assistant_id: the assistant of a page or agent trait.
        segment_id: the segment holding a page.
        source_segment: the segment a fact or agent trait was distilled from.
        page_ids: a segment's pages, oldest first.
        evidence: a trait's evidence.
        edited: whether it was corrected since it was learned.
        chain_id: the dialogue chain of a page.
    """

    memory_id: str
    kind: str
    tier: str
    text: str
    timestamp: float
    assistant_id: str | None = None
    segment_id: str | None = None
    source_segment: str | None = None
    page_ids: tuple[str, ...] = ()
    evidence: str = ""
    edited: bool = False
    chain_id: str | None = None


@dataclass(frozen=True, slots=True)
class MemoryEvent:
    """One change in a memory's history.

    Attributes:
        memory_id: the memory.
        action: ``"created"``, ``"changed"`` (a persona update changed a trait),
            ``"corrected"`` or ``"deleted"``.
        at: when, seconds.
        old: the value before (None for ``"created"``).
        new: the value after (None for ``"deleted"``).
        by: what made the change: ``"turn"``, ``"segmentation"``, ``"persona update of
            <segment>"`` or ``"edit"`` (a call of this API).
    """

    memory_id: str
    action: str
    at: float
    old: str | None
    new: str | None
    by: str


@dataclass(frozen=True, slots=True)
class ArchivedMemories:
    """One page of a user's archived memories of one kind (see
    :meth:`MemoryEditing.archived_memories`).

    Attributes:
        kind: ``"page"``, ``"fact"`` or ``"agent_trait"``.
        total: archived memories of that kind (deleted ones not counted), whatever the
            query.
        offset: how many were skipped before the first of ``memories``.
        memories: newest first, or with ``query`` best match first.
        query: the search, if any.
        has_more: whether more follow ``memories`` (in the same order).
        per_day: ``(day start, memories)`` per UTC day that has any, oldest first; the
            day start in seconds since the epoch. Empty when ``per_day=False`` was asked.
    """

    kind: str
    total: int
    offset: int
    memories: tuple[Memory, ...]
    query: str | None = None
    has_more: bool = False
    per_day: tuple[tuple[float, int], ...] = ()


def _page_text(query: str, response: str) -> str:
    return f"{query}\n{response}"


def _archived_memory(item: Any, corrected: Any) -> Memory:
    """The :class:`Memory` of a cold-index item (a ``ColdItem``)."""
    rec = item.record
    if item.kind == "page":
        return Memory(
            f"page:{item.item_id}",
            "page",
            "archive",
            _page_text(str(rec.get("query", "")), str(rec.get("response", ""))),
            item.timestamp,
            assistant_id=str(rec.get("assistant_id", "")) or None,
            segment_id=item.segment_id,
            chain_id=str(rec.get("chain_id") or "") or None,
        )
    owner = str(rec.get("assistant", ""))
    entry_id = str(rec.get("entry_id", ""))
    mid = f"fact:{entry_id}" if item.kind == "fact" else f"agent_trait:{owner}:{entry_id}"
    return Memory(
        mid,
        item.kind,
        "archive",
        str(rec.get("text", item.text)),
        item.timestamp,
        assistant_id=owner or None,
        source_segment=rec.get("source_segment"),
        edited=mid in corrected,
    )


class MemoryEditing:
    """Per-memory calls of :class:`MemoryOS` (a mixin).

    Every call here raises :class:`~memoryos_actors.errors.UnknownUser` for a user with no
    data, and writes nothing for it.
    """

    # -- reading ---------------------------------------------------------------------------

    def memories(
        self,
        user_id: str,
        kinds: Iterable[str] | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> MemoryList:
        """The memories of ``user_id`` (of ``kinds`` only, if given), with ids and
        provenance: pages (STM, MTM and archive), segments, facts, agent traits and the user
        traits that have a level. Deleted memories are not listed.

        In a stable order: by kind (in the order above), then oldest first by the
        sequence number in the id (which never changes as a page moves between tiers;
        traits, which have none, by name).
        With ``limit`` (1 or more), at most that many, and the list's ``next_cursor``
        (None on the last page) gives the rest: ``memories(user, cursor=page.next_cursor,
        limit=...)``. Paging while turns are added neither skips nor repeats a memory that
        existed when paging began. A cursor that did not come from this call (or was
        changed) is :class:`InvalidInput`. Each call still reads the whole user.
        """
        uid = _check_user_id(user_id)
        wanted = self._check_kinds(kinds)
        check_limit(limit)
        after = None if cursor is None else decode_cursor(cursor, "memories", (int, int, str))
        listed = self._call(uid, lambda entry: self._list(entry, uid, wanted), create=False)
        shown, next_cursor = page_of(
            listed, lambda m: memory_sort_key(m.memory_id), "memories", limit, after
        )
        return MemoryList(shown, next_cursor)

    def get_memory(self, user_id: str, memory_id: str) -> Memory:
        """The memory ``memory_id`` of ``user_id``; :class:`UnknownMemory` if it has none
        (or it was deleted)."""
        uid = _check_user_id(user_id)
        ref = parse_memory_id(memory_id)
        return self._call(uid, lambda entry: self._find(entry, uid, ref), create=False)

    def memory_history(self, user_id: str, memory_id: str) -> list[MemoryEvent]:
        """What changed memory ``memory_id`` and when, oldest first: its creation (while it
        exists), the changes persona updates made to a trait, and every correction and
        deletion (kept after the memory is deleted). :class:`UnknownMemory` if there is
        nothing to tell."""
        uid = _check_user_id(user_id)
        ref = parse_memory_id(memory_id)

        def run(entry: UserEntry) -> list[MemoryEvent]:
            edits, changes = self._ask(actor_names(uid)[2], ReadHistory(ref.memory_id))
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
                    else f"persona update of {current.source_segment or 'unknown segment'}"
                )
                first = (
                    edits[0]["old"]
                    if edits and ref.kind in ("fact", "agent_trait")
                    else current.text
                )
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
            for rec in edits:
                deleted = rec.get("op") == "delete"
                new = rec.get("new")
                events.append(
                    MemoryEvent(
                        ref.memory_id,
                        "deleted" if deleted else "corrected",
                        float(rec.get("ts", 0.0)),
                        str(rec.get("old", "")) or None,
                        None if deleted or new is None else str(new),
                        "edit",
                    )
                )
            if not events:
                raise UnknownMemory(f"user {uid!r} has no memory {ref.memory_id!r}")
            events.sort(key=lambda e: e.at)
            return events

        return self._call(uid, run, create=False)

    def archived_memories(
        self,
        user_id: str,
        kind: str = "page",
        query: str | None = None,
        offset: int = 0,
        limit: int = 50,
        per_day: bool = False,
    ) -> ArchivedMemories:
        """A page of the memories of ``kind`` (``"page"``, ``"fact"`` or ``"agent_trait"``)
        that left the hot tiers for the user's archive: ``limit`` (0..500) of them from
        ``offset`` on, newest first, or with ``query`` the best matches for its words
        first. Read from the cold index, so the cost depends on ``offset + limit``, not on
        the length of the history (unlike :meth:`archive`, which reads every record).
        Deleted memories are left out, corrected ones shown corrected. With ``per_day``,
        also how many there are per UTC day (for a picture of the history)."""
        from .lexicon import terms

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
            query = _check_text(query, "query", self.config.max_text_bytes)

        def run(entry: UserEntry) -> ArchivedMemories:
            assert entry.store is not None
            cold = entry.store.cold
            corrected = entry.store.edits.corrected
            total, items = cold.newest(kind, 0 if query else offset, 0 if query else limit + 1)
            if query:
                found = cold.search(terms(query), offset + limit + 1, kinds=(kind,)).items
                items = list(found[offset:])
            days = tuple((d * 86400.0, n) for d, n in cold.day_counts(kind)) if per_day else ()
            out = tuple(_archived_memory(item, corrected) for item in items[:limit])
            return ArchivedMemories(kind, total, offset, out, query, len(items) > limit, days)

        return self._call(uid, run, create=False)

    # -- changing --------------------------------------------------------------------------

    def delete_memory(self, user_id: str, memory_id: str) -> MemoryEvent:
        """Delete one memory of ``user_id`` from every tier, the cold index, exports and
        the gateway's caches; retrieval never returns it again. Durable: the edit is in the
        user's WAL before this returns (per the ``fsync`` setting).

        Deleting a segment deletes its pages; deleting a trait clears its level. Text that
        may quote a deleted page is cleared with it: the chain summaries of the later pages
        of its dialogue chain, and the summary of the segment that held it (asked for again
        from the pages left). Facts the LLM distilled from a deleted page are memories of
        their own (delete them too). The history keeps only that the memory was deleted,
        and when: its earlier values are erased from it. The event returned carries the
        deleted text (``old``) for the caller; it is stored nowhere.
        :class:`UnknownMemory` if there is no such memory.
        """
        uid = _check_user_id(user_id)
        ref = parse_memory_id(memory_id)
        self._check_writable("delete_memory")

        def run(entry: UserEntry) -> dict[str, Any]:
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
            upto = int(self._ask(actor_names(uid)[0], Inspect()).turns)
            rec = self._edit(
                uid,
                EditMemory(
                    "delete",
                    ref.memory_id,
                    "",  # the text is not kept anywhere
                    pages=tuple(int(m.memory_id[len("page:p") :]) for m in gone),
                    chains=tuple((c, s, upto) for c, s in chains.items()),
                    segments=segments,
                ),
            )
            return {**rec, "old": found.text}

        rec = self._call(uid, run, create=False)
        self._purge_cached(uid)
        return MemoryEvent(
            ref.memory_id, "deleted", float(rec["ts"]), str(rec["old"]), None, "edit"
        )

    def correct_memory(
        self, user_id: str, memory_id: str, value: str, evidence: str = ""
    ) -> MemoryEvent:
        """Correct a fact, an agent trait (``value``: the new sentence) or a user trait
        (``value``: ``"low"``, ``"medium"`` or ``"high"``; ``evidence`` optional; any of the
        90 traits, observed or not). The old
        value stays in :meth:`memory_history`; retrieval returns the new one. Durable like
        :meth:`delete_memory`. :class:`InvalidInput` for pages and segments (delete them
        instead), :class:`UnknownMemory` if there is no such memory."""
        uid = _check_user_id(user_id)
        ref = parse_memory_id(memory_id)
        self._check_writable("correct_memory")
        if ref.kind not in EDITABLE_KINDS:
            raise InvalidInput(
                f"{ref.kind} memories cannot be corrected (delete it and add "
                "the turn again instead); facts, agent traits and traits can"
            )
        max_bytes = self.config.max_text_bytes
        value = _check_text(value, "value", max_bytes).strip()
        if not value:
            raise InvalidInput("value must not be blank")
        evidence = _check_text(evidence, "evidence", max_bytes, allow_empty=True)
        if ref.kind == "trait":
            TraitLevel.known(ref.key, value, evidence)  # one of the 90, a valid level

        def run(entry: UserEntry) -> dict[str, Any]:
            try:
                old = self._find(entry, uid, ref).text
            except UnknownMemory:
                if ref.kind != "trait":
                    raise
                old = ""  # a trait not observed yet can be set too
            return self._edit(
                uid, EditMemory("correct", ref.memory_id, old, value=value, evidence=evidence)
            )

        rec = self._call(uid, run, create=False)
        self._purge_cached(uid)
        return MemoryEvent(
            ref.memory_id,
            "corrected",
            float(rec["ts"]),
            str(rec["old"]) or None,
            str(rec["new"]),
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

    def _edit(self, uid: str, edit: EditMemory) -> dict[str, Any]:
        stm_n, mtm_n, lpm_n = actor_names(uid)
        rec = self._ask(lpm_n, edit)
        self._ask(stm_n, ApplyEdit(rec))
        self._ask(mtm_n, ApplyEdit(rec))
        return rec

    def _purge_cached(self, uid: str) -> None:
        """The gateway's cached answers, embeddings and redo records of ``uid`` may quote
        an edited memory: drop them (they are only a cache)."""
        self.gateway_service.purge_user(uid)
        self._gateway.purge_user(uid)

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
            self._drain_user(uid, summaries=False)
            stm = self._ask(stm_n, Inspect())
            mtm = self._ask(mtm_n, Inspect())
            if "page" in kinds:
                for p in tuple(stm.outbox) + tuple(stm.pages):
                    out.append(
                        Memory(
                            f"page:{p.page_id}",
                            "page",
                            "stm",
                            _page_text(p.query, p.response),
                            p.timestamp,
                            assistant_id=p.assistant_id,
                            chain_id=p.chain_id or None,
                        )
                    )
            for seg in mtm.segments:
                if "page" in kinds:
                    out.extend(
                        Memory(
                            f"page:{p.page_id}",
                            "page",
                            "mtm",
                            _page_text(p.query, p.response),
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
                        )
                    )
        edits = entry.store.edits if entry.store is not None else None
        if kinds & {"fact", "agent_trait", "trait"}:
            lpm = self._ask(lpm_n, Inspect())
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
            found = self._archived_one(entry, only) if only is not None else None
            # One archived memory is looked up in the cold index; reading the whole
            # archive is left for listings and what the index does not hold.
            out.extend([found] if found is not None else self._archived(entry, kinds))
        # STM, MTM and the archive are looked at one after the other, in the direction
        # pages move: a page (or segment) that moved on between two looks is in both.
        # It is listed once, as the later look found it.
        latest = {m.memory_id: m for m in out}
        if len(latest) == len(out):
            return out
        return [m for m in out if latest[m.memory_id] is m]

    @staticmethod
    def _archived_one(entry: UserEntry, ref: MemoryRef) -> Memory | None:
        """Archived page, fact or agent trait ``ref`` from the cold index, or None."""
        item_id = cold_item_id(ref)
        store = entry.store
        if item_id is None or store is None:
            return None
        item = store.cold.item(item_id)
        if item is None or item.kind != ref.kind:
            return None
        return _archived_memory(item, store.edits.corrected)

    @staticmethod
    def _archived(entry: UserEntry, kinds: frozenset[str]) -> list[Memory]:
        """Memories in the archive, as the user's edits leave them."""
        store = entry.store
        assert store is not None
        edits = store.edits
        out: list[Memory] = []
        for _seq, rec in store.archive_records():
            t = rec.get("t")
            if t in ("segment", "page"):
                if t == "segment":
                    seg = rec["segment"]
                    sid = str(seg["segment_id"])
                    pages = seg["pages"]
                    if "segment" in kinds:
                        out.append(
                            Memory(
                                f"segment:{sid}",
                                "segment",
                                "archive",
                                str(seg.get("summary", "")),
                                float(seg.get("created", 0.0)),
                                page_ids=tuple(str(p["page_id"]) for p in pages),
                            )
                        )
                else:
                    sid = rec.get("segment_id")
                    pages = [rec["page"]]
                if "page" in kinds:
                    out.extend(
                        Memory(
                            f"page:{p['page_id']}",
                            "page",
                            "archive",
                            _page_text(str(p["query"]), str(p["response"])),
                            float(p["timestamp"]),
                            assistant_id=str(p.get("assistant_id", "")) or None,
                            segment_id=str(sid) if sid else None,
                            chain_id=str(p.get("chain_id") or "") or None,
                        )
                        for p in pages
                    )
            elif t in ("fact", "agent_trait") and t in kinds:
                e = rec["entry"]
                owner = str(rec.get("assistant", ""))
                mid = (
                    f"fact:{e['entry_id']}"
                    if t == "fact"
                    else f"agent_trait:{owner}:{e['entry_id']}"
                )
                out.append(
                    Memory(
                        mid,
                        t,
                        "archive",
                        str(e["text"]),
                        float(e["timestamp"]),
                        assistant_id=owner or None,
                        source_segment=e.get("source_segment"),
                        edited=mid in edits.corrected,
                    )
                )
        return out
