"""Single memories of a user: the records the API returns (:class:`Memory`,
:class:`MemoryEvent`, :class:`ArchivedMemories`, :class:`MemoryList`) and how archived
records become them. The calls that list, get, delete and correct memories are
:class:`~memoryos_actors.editing.MemoryEditing`. Memory ids are described in
:mod:`memoryos_actors.store.edits`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .paging import MemoryList
from .store.archived import ArchivedFact, ArchivedPage, ArchivedSegment
from .store.edits import MemoryRef, cold_item_id

if TYPE_CHECKING:
    from .store.userstore import UserStore

__all__ = [
    "ArchivedMemories",
    "Memory",
    "MemoryEvent",
    "MemoryList",
    "archived_in",
    "archived_memory",
    "archived_one",
    "page_memory",
    "page_text",
]

#: Most archived memories one ``archived_memories`` call returns.
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
        query: a page's query, as stored (``text`` joins it to the response).
        response: a page's response, as stored.
        heat: a segment's heat when it was last placed or evicted (0.0 for other kinds).
        keywords: a segment's keywords, sorted.
        origin: how a fact came: ``"remembered"`` given by ``remember``, ``""`` learnt
            from the conversation (and for other kinds).
        metadata: the application's metadata of a remembered fact (None: none).
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
    query: str = ""
    response: str = ""
    heat: float = 0.0
    keywords: tuple[str, ...] = ()
    origin: str = ""
    metadata: dict[str, Any] | None = None


def entry_metadata(text: object) -> dict[str, Any] | None:
    """A stored fact's metadata (compact JSON text of an object, see ``KBEntry``) as a
    dict; None when it has none (or the text is not an object: it never is)."""
    if not text or not isinstance(text, str):
        return None
    try:
        found = json.loads(text)
    except ValueError:
        return None
    return found if isinstance(found, dict) else None


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
            <segment>"``, ``"edit"`` (a call of this API) or ``"deletion of <memory id>"``
            (the memory quoted a deleted page and went with it).
        rewrote: for the deletion of a page or segment, the memories that quoted it and
            went with it, by id: facts and agent traits deleted, traits set back to what
            other turns taught (or cleared), facts the user corrected whose old values were
            erased, and the segment whose summary was cleared (asked for again while MTM
            holds it). Empty otherwise.
    """

    memory_id: str
    action: str
    at: float
    old: str | None
    new: str | None
    by: str
    rewrote: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ArchivedMemories:
    """One page of a user's archived memories of one kind (see
    :meth:`~memoryos_actors.api.MemoryAPI.archived_memories`).

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


def page_text(query: str, response: str) -> str:
    """A page's text as a :class:`Memory` shows it: the query and the response on two
    lines."""
    return f"{query}\n{response}"


def page_memory(
    page_id: str,
    tier: str,
    query: str,
    response: str,
    timestamp: float,
    *,
    assistant_id: str | None,
    segment_id: str | None = None,
    chain_id: str | None = None,
) -> Memory:
    """The :class:`Memory` of page ``page_id`` held in ``tier``: its text is made from its
    query and response (:func:`page_text`), which it also holds apart."""
    return Memory(
        f"page:{page_id}",
        "page",
        tier,
        page_text(query, response),
        timestamp,
        assistant_id=assistant_id,
        segment_id=segment_id,
        chain_id=chain_id,
        query=query,
        response=response,
    )


def archived_memory(item: Any, corrected: Any) -> Memory:
    """The :class:`Memory` of a cold-index item (a ``ColdItem``)."""
    if item.kind == "page":
        query, response, assistant_id, chain_id = item.page_parts()
        return page_memory(
            item.item_id,
            "archive",
            query,
            response,
            item.timestamp,
            assistant_id=assistant_id,
            segment_id=item.segment_id,
            chain_id=chain_id,
        )
    owner = item.owner
    mid = item.memory_id
    return Memory(
        mid,
        item.kind,
        "archive",
        item.entry_text,
        item.timestamp,
        assistant_id=owner or None,
        source_segment=item.source_segment,
        edited=mid in corrected,
        origin=str(item.record.get("origin") or ""),
        metadata=entry_metadata(item.record.get("metadata")),
    )


def archived_one(store: UserStore | None, ref: MemoryRef) -> Memory | None:
    """Archived page, fact or agent trait ``ref`` from ``store``'s cold index, or None."""
    item_id = cold_item_id(ref)
    if item_id is None or store is None:
        return None
    item = store.cold.item(item_id)
    if item is None or item.kind != ref.kind:
        return None
    return archived_memory(item, store.edits.corrected)


def archived_in(store: UserStore, kinds: frozenset[str]) -> list[Memory]:
    """Memories of ``kinds`` in ``store``'s archive, as the user's edits leave them."""
    edits = store.edits
    out: list[Memory] = []
    for _seq, held in store.archived():
        if isinstance(held, ArchivedSegment | ArchivedPage):
            sid = held.segment_id or None
            if isinstance(held, ArchivedSegment) and "segment" in kinds:
                seg = held.segment
                out.append(
                    Memory(
                        f"segment:{sid}",
                        "segment",
                        "archive",
                        str(seg.get("summary", "")),
                        float(seg.get("created", 0.0)),
                        page_ids=tuple(str(p["page_id"]) for p in held.pages),
                        heat=float(seg.get("heat", 0.0)),
                        keywords=tuple(sorted(seg.get("keywords", ()))),
                    )
                )
            if "page" in kinds:
                out.extend(
                    page_memory(
                        str(p["page_id"]),
                        "archive",
                        str(p["query"]),
                        str(p["response"]),
                        float(p["timestamp"]),
                        assistant_id=str(p.get("assistant_id", "")) or None,
                        segment_id=sid,
                        chain_id=str(p.get("chain_id") or "") or None,
                    )
                    for p in held.pages
                )
        elif isinstance(held, ArchivedFact) and held.kind in kinds:
            e, owner = held.entry, held.assistant
            mid = (
                f"fact:{e['entry_id']}"
                if held.kind == "fact"
                else f"agent_trait:{owner}:{e['entry_id']}"
            )
            out.append(
                Memory(
                    mid,
                    held.kind,
                    "archive",
                    str(e["text"]),
                    float(e["timestamp"]),
                    assistant_id=owner or None,
                    source_segment=e.get("source_segment"),
                    edited=mid in edits.corrected,
                    origin=str(e.get("origin") or ""),
                    metadata=entry_metadata(e.get("metadata")),
                )
            )
    return out
