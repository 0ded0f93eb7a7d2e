"""Listing a user's memories over HTTP and MCP: the library's one listing
(:meth:`~memoryos_actors.api.AsyncMemoryAPI.memories`, the one the ``memoryos memories``
command and the ``/ui`` page show), paged under the tenant's cursor and shaped as each
front end answers."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..aio import AsyncMemoryOS
from ..errors import InvalidInput
from ..memories import Memory
from ..messages import AgentProfile, UserProfile
from ..operations import MEMORY_KINDS, parse_memory_id
from ..paging import Key, memory_sort_key, page_of
from ..reports import UserState
from ..trait_table import category_of
from . import models as m
from .tenancy import external_id

__all__ = [
    "DEFAULT_LIMIT",
    "MAX_LIMIT",
    "Listing",
    "memories_response",
    "memory_kinds",
    "profile_dict",
    "read_listing",
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


class Listing:
    """Every memory of a user of some kinds (the library's listing, in its order), with
    what a listing shows beside them that a :class:`~memoryos_actors.Memory` does not
    hold: the turns stored so far and each assistant's profile."""

    __slots__ = ("agents", "memories", "turns")

    def __init__(self, state: UserState, memories: list[Memory]) -> None:
        self.memories = memories
        self.turns = state.turns
        self.agents: dict[str, AgentProfile] = {a: v["profile"] for a, v in state.agents.items()}


async def read_listing(mem: AsyncMemoryOS, uid: str, kinds: frozenset[str]) -> Listing:
    """The memories of ``kinds`` of ``uid`` (every one, unpaged: the front end pages them
    under its tenant's cursor), from :meth:`~memoryos_actors.api.AsyncMemoryAPI.memories`.

    The user's state is read for what is not a memory: the turn count and the assistants'
    profiles."""
    memories = list(await mem.memories(uid, sorted(kinds)))
    state = await mem.user_state(uid)
    return Listing(state, memories)


def profile_dict(profile: UserProfile | AgentProfile) -> dict[str, Any]:
    """A profile as JSON, its extras as an object."""
    d = profile.to_dict()
    d["extras"] = {k: v for k, v in profile.extras}
    return d


def _http_item(tenant: str, memory: Memory, listing: Listing) -> tuple[str, Any]:
    """The section of the HTTP answer that shows ``memory``, and how it is shown."""

    def aid(internal: str) -> str:
        return external_id(tenant, internal) or internal

    if memory.kind == "page":
        query, response = memory.query, memory.response
        ref = parse_memory_id(memory.memory_id)
        return "pages", m.PageOut(
            page_id=ref.key,
            memory_id=memory.memory_id,
            location=memory.tier,  # type: ignore[arg-type]  # stm, mtm or archive
            segment_id=memory.segment_id,
            assistant_id=aid(memory.assistant_id or ""),
            timestamp=memory.timestamp,
            query=query,
            response=response,
        )
    if memory.kind == "segment":
        sid = parse_memory_id(memory.memory_id).key
        return "segments", m.SegmentOut(
            segment_id=sid,
            memory_id=memory.memory_id,
            location=memory.tier,  # type: ignore[arg-type]  # mtm or archive
            heat=memory.heat,
            summary=memory.text,
            keywords=list(memory.keywords),
            page_ids=list(memory.page_ids),
        )
    if memory.kind == "trait":
        name = parse_memory_id(memory.memory_id).key
        return "traits", m.TraitOut(
            name=name,
            category=category_of(name) or "",
            level=memory.text,
            evidence=memory.evidence,
            memory_id=memory.memory_id,
        )
    ref = parse_memory_id(memory.memory_id)
    owner = memory.assistant_id or ""
    fact = m.FactOut(
        entry_id=ref.key,
        memory_id=(
            memory.memory_id if memory.kind == "fact" else f"agent_trait:{aid(owner)}:{ref.key}"
        ),
        text=memory.text,
        timestamp=memory.timestamp,
        source_segment=memory.source_segment,
        origin=memory.origin,
        metadata=memory.metadata,
    )
    return ("kb" if memory.kind == "fact" else f"agent:{aid(owner)}"), fact


def memories_response(
    tenant: str,
    user_id: str,
    listing: Listing,
    limit: int,
    after: Key | None,
) -> m.MemoriesResponse:
    """One page of ``listing`` as the HTTP API answers, in the listing order of
    :func:`~memoryos_actors.paging.memory_sort_key`, after the cursor key ``after``."""
    found = [_http_item(tenant, memory, listing) for memory in listing.memories]
    shown, next_cursor = page_of(
        found, lambda x: memory_sort_key(x[1].memory_id), "memories", limit, after, tenant
    )
    sections: dict[str, list[Any]] = {}
    for section, item in shown:
        sections.setdefault(section, []).append(item)

    def aid(internal: str) -> str:
        return external_id(tenant, internal) or internal

    return m.MemoriesResponse(
        user_id=user_id,
        turns=listing.turns,
        pages=sections.get("pages", []),
        segments=sections.get("segments", []),
        kb=sections.get("kb", []),
        traits=sections.get("traits", []),
        agents={
            aid(a): m.AgentMemory(
                profile=profile_dict(profile), traits=sections.get(f"agent:{aid(a)}", [])
            )
            for a, profile in listing.agents.items()
        },
        next_cursor=next_cursor,
    )
