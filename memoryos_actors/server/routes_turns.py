"""The ``/v1`` routes that write and read a user's memory: add a turn, retrieve memory for
a query, and chat (retrieve, answer with the LLM, store the turn), whole or streamed as
server-sent events."""

from __future__ import annotations

import copy
import json
from collections.abc import AsyncIterator
from typing import Any

from fastapi import Request
from fastapi.responses import StreamingResponse

from ..aio import AsyncMemoryOS
from ..errors import MemoryOSError
from ..messages import ContextItem, MemoryContext
from . import models as m
from .docs import BODY_ERRORS, CHAT_ERRORS, USER_ID, v1_router
from .listing import profile_dict
from .state import STATE, ServerState
from .tenancy import internal_id

__all__ = ["router"]


router = v1_router()
"""The turn, retrieval and chat routes (under ``/v1``). Each route is handed the app's
:class:`~.state.ServerState` as ``state``."""


# The routes' summaries and docstrings are published as the API's documentation
# (Markdown, for API users).
@router.post(
    "/users/{user_id}/turns",
    status_code=201,
    summary="Add a turn",
    response_model=m.AddTurnResponse,
    tags=["memory"],
    responses=BODY_ERRORS,
    response_description="The turn is stored.",
)
async def add_turn(
    request: Request, body: m.AddTurnRequest, user_id: str = USER_ID, state: ServerState = STATE
) -> m.AddTurnResponse:
    """Store one exchange with the user: what the user said and what the assistant
    answered. Answers once the turn is durable (in the user's write-ahead log).

    Creates the user on the first turn. Send a `turn_key` (e.g. your message id) to make
    a retry safe: a turn sent again with the key of one of the user's recent turns is
    stored once, and the answer names the first page.
    """
    tenant = state.tenant_of(request)
    page_id = await _store(state.memory(), tenant, internal_id(tenant, user_id), body)
    return m.AddTurnResponse(user_id=user_id, page_id=page_id)


async def _store(mem: AsyncMemoryOS, tenant: str, uid: str, turn: m.AddTurnRequest) -> str:
    """Store ``turn`` for library user ``uid`` of ``tenant``; the page id."""
    return await mem.add_turn(
        uid,
        turn.query,
        turn.response,
        turn.timestamp,
        internal_id(tenant, turn.assistant_id, "assistant_id"),
        turn_key=turn.turn_key,
    )


@router.post(
    "/users/{user_id}/turns/batch",
    status_code=201,
    summary="Add many turns",
    response_model=m.AddTurnsResponse,
    tags=["memory"],
    responses=BODY_ERRORS,
    response_description="Every turn is stored.",
)
async def add_turns(
    request: Request, body: m.AddTurnsRequest, user_id: str = USER_ID, state: ServerState = STATE
) -> m.AddTurnsResponse:
    """Store several exchanges of one user in one request (an import, a backlog), in
    order, each as Add a turn stores it; answers once all are durable.

    Give each turn a `turn_key`: if the request fails part way (an error names the turn
    it stopped at; the turns before it are stored), send the whole batch again and every
    turn is stored once."""
    tenant = state.tenant_of(request)
    uid = internal_id(tenant, user_id)
    mem = state.memory()
    page_ids: list[str] = []
    for n, turn in enumerate(body.turns):
        try:
            page_ids.append(await _store(mem, tenant, uid, turn))
        except MemoryOSError as exc:
            raise _at_turn(exc, n) from exc
    return m.AddTurnsResponse(user_id=user_id, page_ids=page_ids)


def _at_turn(exc: MemoryOSError, n: int) -> MemoryOSError:
    """``exc`` (raised by turn ``n`` of a batch) saying which turns are stored: the same
    class with the same attributes, so it is answered with the same status."""
    said = (
        f"turn {n} of the batch: {exc} (turns 0..{n - 1} are stored; with turn keys, "
        "send the batch again to store the rest once)"
        if n
        else f"turn 0 of the batch: {exc} (none is stored)"
    )
    again = copy.copy(exc)
    again.args = (said,)
    return again


@router.post(
    "/users/{user_id}/retrieve",
    summary="Retrieve memory for a query",
    response_model=m.RetrieveResponse,
    tags=["memory"],
    responses=BODY_ERRORS,
    response_description="What the memory holds about the query.",
)
async def retrieve(
    request: Request, body: m.RetrieveRequest, user_id: str = USER_ID, state: ServerState = STATE
) -> m.RetrieveResponse:
    """What the user's memory holds about `query`: the recent dialogue, earlier turns
    relevant to it with their topic summaries, facts and traits learned about the user,
    and the assistant's persona; each item with its id, score and where it came from.
    `rendered` is the same as text to put in an LLM prompt. Reading changes nothing
    but how "warm" the topics used are. A user with no data yet gets an empty context
    (and nothing is written for it)."""
    tenant = state.tenant_of(request)
    uid = internal_id(tenant, user_id)
    ctx = await state.memory().retrieve(
        uid, body.query, internal_id(tenant, body.assistant_id, "assistant_id")
    )
    return _context(ctx, user_id, body.assistant_id, body.top_k)


@router.post(
    "/users/{user_id}/chat",
    summary="Answer from memory and store the turn",
    response_model=m.ChatResponse,
    tags=["memory"],
    responses={**BODY_ERRORS, **CHAT_ERRORS},
    response_description="The reply; the turn is stored.",
)
async def chat(
    request: Request, body: m.ChatRequest, user_id: str = USER_ID, state: ServerState = STATE
) -> m.ChatResponse:
    """Retrieve memory for the message, answer it with the server's LLM, and store the
    exchange as a turn. Creates the user on the first message.

    During an LLM provider outage a simple offline answer is given instead and the
    reply says so (`degraded`, `reason`). A provider configuration error (rejected key,
    unknown model, unreachable address) is a 502 naming it (`ProviderAuthError`,
    `ProviderModelNotFound`, `ProviderUnreachable`), never an offline answer; nothing
    is stored then."""
    tenant = state.tenant_of(request)
    reply = await state.memory().chat_reply(
        internal_id(tenant, user_id),
        body.query,
        internal_id(tenant, body.assistant_id, "assistant_id"),
    )
    return m.ChatResponse(
        user_id=user_id, reply=reply.text, degraded=reply.degraded, reason=reply.reason
    )


@router.post(
    "/users/{user_id}/chat/stream",
    summary="Answer from memory, streamed as server-sent events",
    tags=["memory"],
    responses={
        **BODY_ERRORS,
        **CHAT_ERRORS,
        200: {
            "description": "The reply as it is written, then the stored turn's reply.",
            "content": {"text/event-stream": {}},
        },
    },
    response_class=StreamingResponse,
)
async def chat_stream(
    request: Request, body: m.ChatRequest, user_id: str = USER_ID, state: ServerState = STATE
) -> StreamingResponse:
    """Chat as `POST /v1/users/{user_id}/chat` does, with the reply sent as
    [server-sent events](https://html.spec.whatwg.org/multipage/server-sent-events.html)
    as the LLM writes it: `event: piece` with `data: {"text": "..."}` for each piece of
    the reply, in order, then `event: done` with the same JSON as the chat answer
    (`user_id`, `reply`, `degraded`, `reason`) once the turn is stored.

    An error before the first piece is an ordinary error answer (422, 502, 503...). An
    error after it is `event: error` with `data: {"error": {"type", "message"}}`, and
    the turn is not stored; nor is it when the client disconnects before `done`."""
    tenant = state.tenant_of(request)
    stream = state.memory().chat_stream(
        internal_id(tenant, user_id),
        body.query,
        internal_id(tenant, body.assistant_id, "assistant_id"),
    )
    try:
        first = await anext(stream, None)  # a failure so far: the usual error answer
    except BaseException:
        await stream.aclose()
        raise

    async def events() -> AsyncIterator[str]:
        try:
            if first is not None:
                yield _event("piece", {"text": first})
                async for piece in stream:
                    yield _event("piece", {"text": piece})
            reply = stream.reply
            assert reply is not None  # the stream ended: the turn is stored
            done = m.ChatResponse(
                user_id=user_id, reply=reply.text, degraded=reply.degraded, reason=reply.reason
            )
            yield _event("done", done.model_dump())
        except MemoryOSError as exc:
            yield _event("error", {"error": {"type": type(exc).__name__, "message": str(exc)}})
        finally:
            await stream.aclose()  # a client gone before the end: nothing is stored

    return StreamingResponse(
        events(),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
    )


def _event(name: str, data: dict[str, Any]) -> str:
    """One server-sent event (its data one line of JSON)."""
    return f"event: {name}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n"


def _item(it: ContextItem) -> m.ContextItemOut:
    return m.ContextItemOut(
        tier=it.tier,
        kind=it.kind,
        item_id=it.item_id,
        text=it.text,
        score=it.score,
        segment_id=it.segment_id,
        timestamp=it.timestamp,
        why=it.why,
    )


def _context(ctx: MemoryContext, user: str, assistant: str, k: int) -> m.RetrieveResponse:
    return m.RetrieveResponse(
        user_id=user,
        assistant_id=assistant,
        query=ctx.query,
        stm=[_item(i) for i in ctx.stm[-k:]],
        mtm=[_item(i) for i in ctx.mtm[:k]],
        segments=[_item(i) for i in ctx.segments[:k]],
        kb=[_item(i) for i in ctx.kb[:k]],
        agent_traits=[_item(i) for i in ctx.agent_traits[:k]],
        traits=[
            m.TraitOut(
                name=t.name,
                category=t.category,
                level=t.level,
                evidence=t.evidence,
                memory_id=None,
            )
            for t in ctx.traits
        ],
        profile=profile_dict(ctx.lpm_profile),
        agent_profile=profile_dict(ctx.agent_profile),
        rendered=ctx.render(),
        elapsed_ms=ctx.elapsed_ms,
    )
