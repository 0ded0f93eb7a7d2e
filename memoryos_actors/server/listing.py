"""Listing a user's memories: reading the tiers and the archive (each page once), and
the HTTP answer, one page of them."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..aio import AsyncMemoryOS
from ..errors import InvalidInput
from ..messages import AgentProfile, UserProfile
from ..paging import memory_sort_key, page_of
from ..reports import UserState
from ..store.archived import ArchivedPage, ArchivedSegment, decode_archived
from ..store.edits import MEMORY_KINDS
from . import models as m
from .tenancy import external_id

__all__ = [
    "DEFAULT_LIMIT",
    "MAX_LIMIT",
    "memories_response",
    "memory_kinds",
    "page_count",
    "profile_dict",
    "read_memories",
]

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
        raise InvalidInput(f"kind must be among {', '.join(MEMORY_KINDS)}; got {', '.join(bad)}")
    return frozenset(named or MEMORY_KINDS)


def page_count(state: UserState, archived: list[dict[str, Any]]) -> int:
    """Pages held in STM (queue and outbox), MTM and the archive."""
    n = len(state.page_ids())
    for rec in archived:
        found = decode_archived(rec)
        if found is not None:
            n += len(found.pages)
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
        found = decode_archived(rec)
        if isinstance(found, ArchivedSegment):
            if found.segment_id in live_segments:
                continue  # evicted after the state was read: listed from MTM
            pages = [p for p in found.pages if str(p["page_id"]) not in seen_pages]
            if len(pages) != len(found.pages):
                # Pages that were in STM's outbox when the state was read, then placed and
                # evicted with this segment before the archive was read.
                rec = found.with_pages(pages).encode()
        elif isinstance(found, ArchivedPage) and str(found.page["page_id"]) in seen_pages:
            continue
        kept.append(rec)
    return state, kept


def profile_dict(profile: UserProfile | AgentProfile) -> dict[str, Any]:
    """A profile as JSON, its extras as an object."""
    d = profile.to_dict()
    d["extras"] = {k: v for k, v in profile.extras}
    return d


def memories_response(
    tenant: str,
    user_id: str,
    st: Any,
    archived: list[dict[str, Any]],
    kinds: frozenset[str],
    limit: int,
    after: tuple[Any, ...] | None,
) -> m.MemoriesResponse:
    """One page of the user's memories of ``kinds``, in the listing order of
    :func:`~memoryos_actors.paging.memory_sort_key`, after the cursor key ``after``."""

    def aid(internal: str) -> str:
        return external_id(tenant, internal) or internal

    # (memory id, section, item): every memory once, then one page of them is shown.
    found: list[tuple[str, str, Any]] = []

    def page(p: Any, location: str, seg: str | None) -> None:
        if "page" not in kinds:
            return

        def get(k: str) -> Any:
            return p.get(k) if isinstance(p, dict) else getattr(p, k)

        out = m.PageOut(
            page_id=str(get("page_id")),
            memory_id=f"page:{get('page_id')}",
            location=location,  # type: ignore[arg-type]
            segment_id=seg,
            assistant_id=aid(str(get("assistant_id"))),
            timestamp=float(get("timestamp")),
            query=str(get("query")),
            response=str(get("response")),
        )
        found.append((out.memory_id, "pages", out))

    def segment(out: m.SegmentOut) -> None:
        if "segment" in kinds:
            found.append((out.memory_id, "segments", out))

    for p in (*st.outbox, *st.stm):  # the outbox: pages leaving STM, not placed yet
        page(p, "stm", None)
    for seg in st.segments:
        for p in seg.pages:
            page(p, "mtm", seg.segment_id)
        segment(
            m.SegmentOut(
                segment_id=seg.segment_id,
                memory_id=f"segment:{seg.segment_id}",
                location="mtm",
                heat=seg.heat,
                summary=seg.summary,
                keywords=sorted(seg.keywords),
                page_ids=[p.page_id for p in seg.pages],
            )
        )
    for rec in archived:
        held = decode_archived(rec)
        if isinstance(held, ArchivedSegment):
            seg = held.segment
            sid = held.segment_id
            for p in held.pages:
                page(p, "archive", sid)
            segment(
                m.SegmentOut(
                    segment_id=sid,
                    memory_id=f"segment:{sid}",
                    location="archive",
                    heat=float(seg.get("heat", 0.0)),
                    summary=str(seg.get("summary", "")),
                    keywords=sorted(seg.get("keywords", ())),
                    page_ids=[str(p["page_id"]) for p in held.pages],
                )
            )
        elif isinstance(held, ArchivedPage):
            page(held.page, "archive", held.segment_id)

    def fact(e: Any, assistant: str | None = None) -> m.FactOut:
        mid = (
            f"fact:{e.entry_id}"
            if assistant is None
            else f"agent_trait:{aid(assistant)}:{e.entry_id}"
        )
        return m.FactOut(
            entry_id=e.entry_id,
            memory_id=mid,
            text=e.text,
            timestamp=e.timestamp,
            source_segment=e.source_segment,
        )

    if "fact" in kinds:
        found.extend((f.memory_id, "kb", f) for f in (fact(e) for e in st.kb))
    if "agent_trait" in kinds:
        for a, v in st.agents.items():
            found.extend(
                (f.memory_id, f"agent:{aid(a)}", f)
                for f in (fact(t, a) for t in v.get("traits", ()))
            )
    if "trait" in kinds:
        found.extend(
            (
                f"trait:{t.name}",
                "traits",
                m.TraitOut(
                    name=t.name,
                    category=t.category,
                    level=t.level,
                    evidence=t.evidence,
                    memory_id=f"trait:{t.name}",
                ),
            )
            for t in st.traits
        )
    shown, next_cursor = page_of(
        found, lambda x: memory_sort_key(x[0]), "memories", limit, after, tenant
    )
    sections: dict[str, list[Any]] = {}
    for _mid, section, item in shown:
        sections.setdefault(section, []).append(item)
    return m.MemoriesResponse(
        user_id=user_id,
        turns=st.turns,
        pages=sections.get("pages", []),
        segments=sections.get("segments", []),
        kb=sections.get("kb", []),
        traits=sections.get("traits", []),
        agents={
            aid(a): m.AgentMemory(
                profile=profile_dict(v["profile"]), traits=sections.get(f"agent:{aid(a)}", [])
            )
            for a, v in st.agents.items()
        },
        next_cursor=next_cursor,
    )
