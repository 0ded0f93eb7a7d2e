"""The ``/v1`` routes on single memories: the paged listing of a user's memories, one
memory, its deletion and correction, and its history."""

from __future__ import annotations

from fastapi import Request

from ..memories import Memory, MemoryEvent
from ..paging import decode_cursor, page_of
from . import models as m
from .docs import (
    BODY_ERRORS,
    CURSOR,
    KIND,
    LIMIT,
    MEMORY_ID,
    NO_MEMORY,
    NO_USER,
    USER_ID,
    v1_router,
)
from .listing import memories_response, memory_kinds, read_listing
from .state import STATE, ServerState
from .tenancy import external_id, external_memory_id, internal_id

__all__ = ["router"]


router = v1_router()
"""The memory listing, memory, correction and history routes (under ``/v1``). Each route is handed the app's
:class:`~.state.ServerState` as ``state``."""


# The routes' summaries and docstrings are published as the API's documentation
# (Markdown, for API users).
@router.get(
    "/users/{user_id}/memories",
    summary="List a user's memories",
    response_model=m.MemoriesResponse,
    tags=["memory"],
    responses=NO_USER,
    response_description="One page of the user's memories.",
)
async def memories(
    request: Request,
    user_id: str = USER_ID,
    limit: int = LIMIT,
    cursor: str | None = CURSOR,
    kind: list[str] | None = KIND,
    state: ServerState = STATE,
) -> m.MemoriesResponse:
    """The user's memories with their ids and where each is now, one page at a time:
    stored turns (pages, in short-term memory, mid-term memory or the archive), topic
    segments, facts learned about the user (`kb`), user traits, and what is known
    about each assistant (its profile, always; its traits, in the page that holds
    them).

    Memories come in a fixed order: pages, segments, facts, assistant traits (each
    oldest first, by the number in its id), then user traits by name. A page holds at most `limit` memories in all;
    `next_cursor` fetches the next page, and is null on the last one."""
    kinds = memory_kinds(kind)
    after = (
        None
        if cursor is None
        else decode_cursor(cursor, "memories", (int, int, str), state.tenant_of(request))
    )
    tenant, uid = await state.known(request, user_id)
    listing = await read_listing(state.memory(), uid, kinds)
    return memories_response(tenant, user_id, listing, limit, after)


@router.post(
    "/users/{user_id}/memories",
    status_code=201,
    summary="Remember a note",
    response_model=m.RememberResponse,
    tags=["memory"],
    responses=BODY_ERRORS,
    response_description="The memory is stored.",
)
async def remember(
    request: Request, body: m.RememberRequest, user_id: str = USER_ID, state: ServerState = STATE
) -> m.RememberResponse:
    """Remember a free-text memory of the user: a note or fact your application or agent
    gives, not taken from a turn, with optional `metadata` (a JSON object) returned with
    it. Answers once it is durable (in the user's write-ahead log).

    It is a fact of the user's memory (`origin`: `remembered`): retrieval returns it for
    a query about it, the listing shows it under `kb`, and it can be read, corrected
    (with history) and deleted by its `memory_id` like any other memory. Creates the
    user if needed."""
    tenant = state.tenant_of(request)
    mid = await state.memory().remember(
        internal_id(tenant, user_id), body.text, metadata=body.metadata
    )
    return m.RememberResponse(user_id=user_id, memory_id=external_memory_id(tenant, mid))


@router.get(
    "/users/{user_id}/memories/{memory_id}",
    summary="Get one memory",
    response_model=m.MemoryOut,
    tags=["memory"],
    responses=NO_MEMORY,
    response_description="The memory.",
)
async def get_memory(
    request: Request, user_id: str = USER_ID, memory_id: str = MEMORY_ID, state: ServerState = STATE
) -> m.MemoryOut:
    """One memory by id (`page:p12`, `segment:s3`, `fact:f7`,
    `agent_trait:<assistant>:a2`, `trait:<name>`), with where it is now and where it
    came from. 404 if the user has no such memory (or it was deleted)."""
    tenant, found = await state.on_memory(
        request, user_id, memory_id, lambda mem, u, i: mem.get_memory(u, i)
    )
    return _memory_out(tenant, found)


@router.delete(
    "/users/{user_id}/memories/{memory_id}",
    summary="Delete one memory",
    response_model=m.MemoryEventOut,
    tags=["memory"],
    responses=NO_MEMORY,
    response_description="The deletion, with the deleted text and what went with it.",
)
async def delete_memory(
    request: Request, user_id: str = USER_ID, memory_id: str = MEMORY_ID, state: ServerState = STATE
) -> m.MemoryEventOut:
    """Delete one memory everywhere it is kept (recent dialogue, topic segments, the
    archive and its search index, exports, caches): retrieval never returns it again.
    Deleting a segment deletes its turns. What quotes a deleted turn goes with it:
    facts and assistant traits learned from it are deleted, a trait whose evidence
    quotes it falls back to what other turns taught (or is cleared), its topic's
    summary is cleared (and made again); `rewrote` names each. Durable when this
    answers. The answer carries the deleted text; the memory's history keeps only that
    it was deleted, and when."""
    tenant, event = await state.on_memory(
        request, user_id, memory_id, lambda mem, u, i: mem.delete_memory(u, i)
    )
    return _event_out(tenant, event)


@router.patch(
    "/users/{user_id}/memories/{memory_id}",
    summary="Correct one memory",
    response_model=m.MemoryEventOut,
    tags=["memory"],
    responses={**NO_MEMORY, **BODY_ERRORS},
    response_description="The correction, with the old and new value.",
)
async def correct_memory(
    request: Request,
    body: m.MemoryCorrection,
    user_id: str = USER_ID,
    memory_id: str = MEMORY_ID,
    state: ServerState = STATE,
) -> m.MemoryEventOut:
    """Correct a fact or an assistant trait (`value`: the new sentence) or a user trait
    (`value`: low, medium or high). The old value stays in the memory's history;
    retrieval returns the new one. Durable when this answers. 422 for turns (pages)
    and segments: delete them instead."""
    tenant, event = await state.on_memory(
        request,
        user_id,
        memory_id,
        lambda mem, u, i: mem.correct_memory(u, i, body.value, body.evidence),
    )
    return _event_out(tenant, event)


@router.get(
    "/users/{user_id}/memories/{memory_id}/history",
    summary="A memory's history",
    response_model=m.MemoryHistoryResponse,
    tags=["memory"],
    responses=NO_MEMORY,
    response_description="One page of the memory's changes.",
)
async def memory_history(
    request: Request,
    user_id: str = USER_ID,
    memory_id: str = MEMORY_ID,
    limit: int = LIMIT,
    cursor: str | None = CURSOR,
    state: ServerState = STATE,
) -> m.MemoryHistoryResponse:
    """What changed the memory and when, oldest first: created, changed (a persona
    update changed a trait), corrected, deleted. A deleted memory keeps only the
    fact and time of its deletion. One page at a time (see `limit` and `cursor`)."""
    after = (
        None
        if cursor is None
        else decode_cursor(cursor, "history", (float, int), state.tenant_of(request))
    )
    tenant, events = await state.on_memory(
        request, user_id, memory_id, lambda mem, u, i: mem.memory_history(u, i)
    )
    # Key: (time, n-th event at that time); events are only ever added later.
    keyed: list[tuple[tuple[float, int], MemoryEvent]] = []
    seen: dict[float, int] = {}
    for e in events:
        seen[e.at] = seen.get(e.at, -1) + 1
        keyed.append(((float(e.at), seen[e.at]), e))
    shown, next_cursor = page_of(keyed, lambda x: x[0], "history", limit, after, tenant)
    return m.MemoryHistoryResponse(
        user_id=user_id,
        memory_id=memory_id,
        events=[_event_out(tenant, e) for _k, e in shown],
        next_cursor=next_cursor,
    )


def _memory_out(tenant: str, mem: Memory) -> m.MemoryOut:
    # Memory's kind and tier are plain str holding the model's literals: pydantic checks
    # them (the ignores).
    return m.MemoryOut(
        memory_id=external_memory_id(tenant, mem.memory_id),
        kind=mem.kind,  # type: ignore[arg-type]
        tier=mem.tier,  # type: ignore[arg-type]
        text=mem.text,
        timestamp=mem.timestamp,
        assistant_id=(
            external_id(tenant, mem.assistant_id) or mem.assistant_id if mem.assistant_id else None
        ),
        segment_id=mem.segment_id,
        source_segment=mem.source_segment,
        page_ids=list(mem.page_ids),
        evidence=mem.evidence,
        edited=mem.edited,
        chain_id=mem.chain_id,
        origin=mem.origin,
        metadata=mem.metadata,
    )


def _event_out(tenant: str, event: MemoryEvent) -> m.MemoryEventOut:
    # As in _memory_out: the action is a plain str holding the model's literal.
    return m.MemoryEventOut(
        memory_id=external_memory_id(tenant, event.memory_id),
        action=event.action,  # type: ignore[arg-type]
        at=event.at,
        old=event.old,
        new=event.new,
        by=event.by,
        rewrote=[external_memory_id(tenant, mid) for mid in event.rewrote],
    )
