"""Reading a user's memories for listing: the tiers and the archive, each page once."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..errors import InvalidInput
from ..store.edits import MEMORY_KINDS
from ..system import AsyncMemoryOS, UserState

__all__ = ["DEFAULT_LIMIT", "MAX_LIMIT", "memory_kinds", "page_count", "read_memories"]

#: Items in one page of a listing (HTTP and MCP) when the caller gives no limit.
DEFAULT_LIMIT = 100
#: Most items one page of a listing may hold.
MAX_LIMIT = 1000


def memory_kinds(given: Iterable[str] | str | None) -> frozenset[str]:
    """The memory kinds a listing asks for: every kind for None or nothing, else the kinds
    named (each value may be a comma-separated list); :class:`InvalidInput` for a kind
    that does not exist."""
    if isinstance(given, str):
        given = (given,)
    named = {k.strip() for v in (given or ()) for k in v.split(",") if k.strip()}
    bad = sorted(named - set(MEMORY_KINDS))
    if bad:
        raise InvalidInput(f"kind must be among {', '.join(MEMORY_KINDS)}; got "
                           f"{', '.join(bad)}")
    return frozenset(named or MEMORY_KINDS)


def page_count(state: UserState, archived: list[dict[str, Any]]) -> int:
    """Pages held in STM (queue and outbox), MTM and the archive."""
    n = len(state.page_ids())
    for rec in archived:
        if rec.get("t") == "segment":
            n += len(rec["segment"]["pages"])
        elif rec.get("t") == "page":
            n += 1
    return n


async def read_memories(mem: AsyncMemoryOS, uid: str) -> tuple[UserState, list[dict[str, Any]]]:
    """The user's state and archive records, every stored page in exactly one of them.

    One read of each, never a wait: :meth:`~memoryos_actors.MemoryOS.user_state` holds
    every page not archived when it was read (pages on their way from STM to MTM are in
    its ``outbox``), and the archive, read after it, holds every page evicted before that.
    What MTM evicted between the two reads is in both; it is left out of the archive part
    here. Deleted pages are in neither, so a listing after a delete is as quick as any.
    """
    state = await mem.user_state(uid)
    archived = await mem.archive(uid)
    seen_pages = set(state.page_ids())
    live_segments = {seg.segment_id for seg in state.segments}
    kept: list[dict[str, Any]] = []
    for rec in archived:
        if rec.get("t") == "segment":
            seg = rec["segment"]
            if str(seg["segment_id"]) in live_segments:
                continue  # evicted after the state was read: listed from MTM
            pages = [p for p in seg["pages"] if str(p["page_id"]) not in seen_pages]
            if len(pages) != len(seg["pages"]):
                # Pages that were in STM's outbox when the state was read, then placed and
                # evicted with this segment before the archive was read.
                rec = {**rec, "segment": {**seg, "pages": pages}}
        elif rec.get("t") == "page" and str(rec["page"]["page_id"]) in seen_pages:
            continue
        kept.append(rec)
    return state, kept
