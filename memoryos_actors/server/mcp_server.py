"""The MCP server (official ``mcp`` SDK, 2.x ``MCPServer``): memory tools for agents.

Tools: ``add_turn``, ``retrieve``, ``remember``, ``chat``, ``list_users``, ``list_memories``,
``delete_memory``, ``correct_memory`` and ``forget_user``, each for the user named in
the call; an argument a tool does not take is refused, never ignored. Over streamable
HTTP (``/mcp`` on ``memoryos serve --mcp``) the tenant is the API key's, checked by the
server's gate before the SDK sees the request; over stdio (``memoryos mcp``) it is the
``--tenant`` given on the command line, since whoever can start the process owns its
data.

``delete_memory`` deletes one memory (and names what quoted it and went with it);
``forget_user`` deletes all of a user's memory.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import Any, TypeVar

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import Tool as MCPTool
from mcp_types import ToolAnnotations

from ..aio import AsyncMemoryOS
from ..errors import InvalidInput, MemoryOSError, UnknownMemory, UnknownUser
from ..paging import Key, check_limit, decode_cursor, memory_sort_key, page_of
from .listing import DEFAULT_LIMIT, MAX_LIMIT, Listing, memory_kinds, read_listing
from .state import user_on_disk
from .tenancy import (
    external_memory_id,
    internal_id,
    internal_memory_id,
    tenant_user_ids,
)

__all__ = ["build_mcp"]

T = TypeVar("T")

#: The memory kinds list_memories shows (segments and assistant traits are left to HTTP).
_MCP_KINDS = frozenset({"page", "fact", "trait"})

_INSTRUCTIONS = (
    "Long-term memory of users' conversations. Call add_turn after each exchange with a "
    "user, retrieve before answering to get what you remembered about the user (recent "
    "dialogue, relevant past turns, facts and traits), list_memories to show a user what "
    "is stored, forget_user to delete everything about a user."
)


def _tool_errors(fn: Callable[..., Awaitable[T]]) -> Callable[..., Awaitable[T]]:
    """Expected memory errors become tool errors the model can read."""

    @functools.wraps(fn)
    async def wrapper(*args: Any, **kwargs: Any) -> T:
        try:
            return await fn(*args, **kwargs)
        except MemoryOSError as exc:
            message = str(exc.args[0]) if exc.args else str(exc)
            raise ToolError(f"{type(exc).__name__}: {message}") from None

    return wrapper


class _StrictMCPServer(MCPServer):
    """An :class:`MCPServer` whose tools refuse arguments they do not take.

    The SDK drops them without a word, so a misspelt optional argument (``turnkey`` for
    ``turn_key``) would change what a call does and the caller would never know. Each
    tool's schema says so too (``additionalProperties: false``).
    """

    _takes: dict[str, list[str]] | None = None
    #: Set by :func:`build_mcp`: the open memory system, and whose call each one is.
    memory: Callable[[], AsyncMemoryOS]
    tenant_of_request: Callable[[Any], str | None]
    fixed_tenant: str | None = None

    async def list_tools(self) -> list[MCPTool]:
        return [
            tool.model_copy(
                update={"input_schema": {**tool.input_schema, "additionalProperties": False}}
            )
            for tool in await super().list_tools()
        ]

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        if self._takes is None:
            self._takes = {
                t.name: list(t.input_schema.get("properties", {}))
                for t in await super().list_tools()
            }
        takes = self._takes.get(name)
        if takes is not None:  # an unknown tool is the SDK's to refuse
            unknown = [a for a in arguments if a not in takes]
            if unknown:
                raise ToolError(
                    f"InvalidInput: {name} has no argument "
                    f"{', '.join(repr(a) for a in unknown)} (it takes {', '.join(takes)})"
                )
        return await super().call_tool(name, arguments, context)


def mcp_memories(
    user_id: str, listing: Listing, limit: int, after: Key | None, tenant: str
) -> dict[str, Any]:
    """One page of ``listing`` (pages, facts and traits) as ``list_memories`` answers."""
    found: list[dict[str, Any]] = []
    for memory in listing.memories:
        key = memory.memory_id.split(":", 1)[1]
        if memory.kind == "page":
            query, response = memory.query, memory.response
            found.append(
                {
                    "page_id": key,
                    "memory_id": memory.memory_id,
                    "location": memory.tier,
                    "query": query,
                    "response": response,
                }
            )
        elif memory.kind == "fact":
            fact: dict[str, Any] = {"entry_id": key, "memory_id": memory.memory_id}
            fact["text"] = memory.text
            if memory.origin:  # a remembered note: how it came, with its metadata
                fact.update(origin=memory.origin, metadata=memory.metadata)
            found.append(fact)
        elif memory.kind == "trait":
            found.append(
                {"memory_id": memory.memory_id, "level": memory.text, "evidence": memory.evidence}
            )
    shown, next_cursor = page_of(
        found, lambda x: memory_sort_key(x["memory_id"]), "memories", limit, after, tenant
    )
    section = {"page": "pages", "fact": "facts", "trait": "traits"}
    out: dict[str, Any] = {
        "user_id": user_id,
        "turns": listing.turns,
        "pages": [],
        "facts": [],
        "traits": [],
    }
    for item in shown:
        out[section[item["memory_id"].split(":", 1)[0]]].append(item)
    out["next_cursor"] = next_cursor
    return out


def build_mcp(
    memory: Callable[[], AsyncMemoryOS],
    tenant_of_request: Callable[[Any], str | None],
    fixed_tenant: str | None = None,
    lifespan: Callable[[Any], AbstractAsyncContextManager[Any]] | None = None,
) -> MCPServer:
    """An :class:`MCPServer` whose tools call ``memory()``.

    The tenant of a call is ``tenant_of_request(http_request)`` on HTTP, else
    ``fixed_tenant``; a call with neither is refused. ``lifespan`` runs around the
    server (stdio: it opens and closes the memory system).
    """
    from ..version import __version__

    # serverInfo.version: clients show it and log it, and tell releases apart by it.
    server = _StrictMCPServer(
        "memoryos-actors",
        instructions=_INSTRUCTIONS,
        log_level="WARNING",
        lifespan=lifespan,
        version=__version__,
    )
    server.memory = memory
    server.tenant_of_request = tenant_of_request
    server.fixed_tenant = fixed_tenant
    for tool, hints in _TOOLS:
        # A docstring's continuation lines keep the source's indentation; a client shows
        # the description as it is given, so it is given without it.
        server.tool(annotations=hints, description=inspect.cleandoc(tool.__doc__ or ""))(tool)
    return server


def _server(ctx: Context) -> _StrictMCPServer:
    """The server a tool call came to (it holds the memory system and the tenancy)."""
    server = ctx.mcp_server
    assert isinstance(server, _StrictMCPServer)
    return server


def _memory(ctx: Context) -> AsyncMemoryOS:
    return _server(ctx).memory()


def _tenant(ctx: Context) -> str:
    server = _server(ctx)
    request = ctx.request_context.request
    found = server.tenant_of_request(request) if request is not None else server.fixed_tenant
    if found is None:
        raise ToolError("no tenant for this call (an API key is required over HTTP)")
    return found


async def _existing(ctx: Context, user_id: str) -> tuple[str, str]:
    t = _tenant(ctx)
    uid = internal_id(t, user_id)
    mem = _memory(ctx)
    if not user_on_disk(mem.sync, uid) and uid not in await mem.active_users():
        raise UnknownUser(f"no user {user_id!r}")
    return t, uid


# The tools: each is handed its call's context, which names the server (and so the memory
# system and the tenancy) it came to.


@_tool_errors
async def add_turn(
    user_id: str,
    query: str,
    response: str,
    ctx: Context,
    assistant_id: str = "default",
    turn_key: str | None = None,
) -> dict[str, str]:
    """Store one exchange (the user's query and the assistant's response) in the user's
    memory. Pass turn_key to make a retry store the turn only once."""
    t = _tenant(ctx)
    page_id = await _memory(ctx).add_turn(
        internal_id(t, user_id),
        query,
        response,
        None,
        internal_id(t, assistant_id, "assistant_id"),
        turn_key=turn_key,
    )
    return {"user_id": user_id, "page_id": page_id}


@_tool_errors
async def remember(
    user_id: str, text: str, ctx: Context, metadata: dict[str, Any] | None = None
) -> dict[str, str]:
    """Remember a note or fact about the user (not taken from a conversation turn), with
    optional metadata (a JSON object). Retrieval returns it when relevant; it is listed
    under facts and can be corrected or deleted by the memory_id this returns."""
    t = _tenant(ctx)
    mid = await _memory(ctx).remember(internal_id(t, user_id), text, metadata=metadata)
    return {"user_id": user_id, "memory_id": external_memory_id(t, mid)}


@_tool_errors
async def retrieve(
    user_id: str, query: str, ctx: Context, assistant_id: str = "default", top_k: int = 10
) -> dict[str, Any]:
    """What the user's memory holds about query: the rendered context (recent dialogue,
    relevant past turns, profile, facts, traits) and the ids of the pages it used. A user
    with no data yet gets an empty context."""
    if not 1 <= top_k <= 100:
        raise ToolError("top_k must be between 1 and 100")
    t = _tenant(ctx)
    uid = internal_id(t, user_id)
    ctx_ = await _memory(ctx).retrieve(uid, query, internal_id(t, assistant_id, "assistant_id"))
    return {
        "user_id": user_id,
        "context": ctx_.render(),
        "page_ids": list(ctx_.page_ids()[:top_k]),
        "facts": [i.text for i in ctx_.kb[:top_k]],
    }


@_tool_errors
async def chat(
    user_id: str, query: str, ctx: Context, assistant_id: str = "default"
) -> dict[str, Any]:
    """Answer query from the user's memory with the server's LLM, and store the turn.

    ``degraded`` is true (with the ``reason``) when the LLM was unavailable and the
    offline fallback wrote the reply."""
    t = _tenant(ctx)
    reply = await _memory(ctx).chat_reply(
        internal_id(t, user_id), query, internal_id(t, assistant_id, "assistant_id")
    )
    return {
        "user_id": user_id,
        "reply": reply.text,
        "degraded": reply.degraded,
        "reason": reply.reason,
    }


@_tool_errors
async def list_users(ctx: Context) -> list[str]:
    """The users (of this tenant) that have stored memory."""
    t = _tenant(ctx)
    mem = _memory(ctx)
    ids = set(await mem.users()) | set(await mem.active_users())
    return tenant_user_ids(t, ids)


@_tool_errors
async def list_memories(
    user_id: str,
    ctx: Context,
    limit: int = DEFAULT_LIMIT,
    cursor: str | None = None,
    kind: str | None = None,
) -> dict[str, Any]:
    """The user's stored turns (page id, where it is: stm, mtm or archive; the query and
    response), the facts learned about the user and the user's traits, one page at a
    time: at most limit items (1..1000), in a fixed order (pages and facts oldest first,
    then traits by name). If next_cursor is not null, call again with cursor=next_cursor for
    the rest. kind: only page, fact or trait (comma-separated for several)."""
    kinds = memory_kinds(kind) if kind else _MCP_KINDS
    if not kinds <= _MCP_KINDS:
        raise InvalidInput(f"kind must be among {', '.join(sorted(_MCP_KINDS))}")
    check_limit(limit, MAX_LIMIT)
    owner = _tenant(ctx)
    after = None if cursor is None else decode_cursor(cursor, "memories", (int, int, str), owner)
    _t, uid = await _existing(ctx, user_id)
    listing = await read_listing(_memory(ctx), uid, kinds)
    return mcp_memories(user_id, listing, limit, after, owner)


@_tool_errors
async def delete_memory(user_id: str, memory_id: str, ctx: Context) -> dict[str, Any]:
    """Delete one memory of the user (memory_id from list_memories: page:p12,
    segment:s3, fact:f7, trait:<name>, agent_trait:<assistant>:<id>) from every tier;
    it is never retrieved again. What quoted a deleted turn goes with it (facts and
    agent traits deleted, traits set back or cleared, its segment's summary made
    again): "rewrote" names each."""
    t, uid = await _existing(ctx, user_id)
    try:
        event = await _memory(ctx).delete_memory(uid, internal_memory_id(t, memory_id))
    except UnknownMemory:
        raise UnknownMemory(f"user {user_id!r} has no memory {memory_id!r}") from None
    return {
        "user_id": user_id,
        "memory_id": memory_id,
        "deleted": True,
        "at": event.at,
        "rewrote": [external_memory_id(t, mid) for mid in event.rewrote],
    }


@_tool_errors
async def correct_memory(
    user_id: str, memory_id: str, value: str, ctx: Context, evidence: str = ""
) -> dict[str, Any]:
    """Correct a fact or agent trait (value: the new sentence) or a user trait (value:
    low, medium or high). The old value stays in the memory's history."""
    t, uid = await _existing(ctx, user_id)
    try:
        event = await _memory(ctx).correct_memory(
            uid, internal_memory_id(t, memory_id), value, evidence
        )
    except UnknownMemory:
        raise UnknownMemory(f"user {user_id!r} has no memory {memory_id!r}") from None
    return {
        "user_id": user_id,
        "memory_id": memory_id,
        "old": event.old,
        "new": event.new,
        "at": event.at,
    }


@_tool_errors
async def forget_user(user_id: str, ctx: Context) -> dict[str, Any]:
    """Delete everything stored about the user (all tiers, archive, files). Other users
    are untouched. To delete one memory, use delete_memory."""
    _t, uid = await _existing(ctx, user_id)
    report = await _memory(ctx).forget_user(uid)
    return {"user_id": user_id, "removed_files": len(report.removed_files)}


#: The tools, in the order ``tools/list`` names them, with their hints.
_TOOLS: tuple[tuple[Callable[..., Awaitable[Any]], ToolAnnotations | None], ...] = (
    (add_turn, ToolAnnotations(idempotent_hint=False, destructive_hint=False)),
    (retrieve, ToolAnnotations(read_only_hint=True)),
    (remember, ToolAnnotations(idempotent_hint=False, destructive_hint=False)),
    (chat, None),
    (list_users, ToolAnnotations(read_only_hint=True)),
    (list_memories, ToolAnnotations(read_only_hint=True)),
    (delete_memory, ToolAnnotations(destructive_hint=True, idempotent_hint=False)),
    (correct_memory, ToolAnnotations(destructive_hint=False, idempotent_hint=True)),
    (forget_user, ToolAnnotations(destructive_hint=True, idempotent_hint=True)),
)
