"""The HTTP JSON API: a FastAPI app over :class:`~memoryos_actors.AsyncMemoryOS`.

Every ``/v1`` route (and ``/mcp``) needs an API key (``Authorization: Bearer <key>`` or
``X-API-Key: <key>``). A gate in front of the app checks, in this order, before anything
reaches the memory system: the key (401), the key's request limit (429 with
``Retry-After``), the body size (413) and its encoding (422). The tenant of the key decides
whose users a request can name (see :mod:`.tenancy`): another tenant's user is simply not
found (404). ``/healthz``, ``/readyz``, ``/metrics`` and the OpenAPI pages need no key.

The API's published text (``/openapi.json``, ``/docs``) is written for API users: it is
the description, shared parameters and error answers in :mod:`.docs`, the routes'
summaries and docstrings (Markdown), and the models' docstrings and field descriptions
(:mod:`.models`). Keep notes for developers out of them.

Why this module is over 700 lines: it is the route table, one short function per
route with its OpenAPI documentation; models, tenancy, keys, metrics and listing are
modules of their own.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fastapi import APIRouter, FastAPI, Request, Response, Security
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.security import APIKeyHeader, HTTPBearer
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.exceptions import HTTPException as StarletteHTTPException

from ..aio import AsyncMemoryOS
from ..config import MemoryConfig
from ..errors import (
    ActorCrashed,
    GatewayError,
    InvalidInput,
    MemoryOSError,
    Overloaded,
    SystemClosed,
    UnknownMemory,
    UnknownUser,
)
from ..memories import Memory, MemoryEvent
from ..messages import AgentProfile, ContextItem, MemoryContext, UserProfile
from ..paging import decode_cursor, page_of
from ..store.userstore import user_exists
from ..system import MemoryOS
from . import models as m
from .docs import (
    API_DESCRIPTION,
    ASSISTANT_ID,
    BODY_ERRORS,
    CHAT_ERRORS,
    CURSOR,
    ERRORS,
    KIND,
    LIMIT,
    MEMORY_ID,
    NO_MEMORY,
    NO_USER,
    USER_ID,
    mount_docs,
)
from .keys import KeyRecord, KeyStore
from .listing import memories_response, memory_kinds, profile_dict, read_memories
from .metrics import ServerMetrics
from .ratelimit import RateLimiter
from .tenancy import (
    external_id,
    external_memory_id,
    internal_id,
    internal_memory_id,
    relabel_user_id,
)

__all__ = ["ServerSettings", "create_app"]

_PUBLIC = frozenset(
    {
        "/healthz",
        "/readyz",
        "/metrics",
        "/docs",
        "/docs/oauth2-redirect",
        "/docs/assets",
        "/openapi.json",
    }
)
_METHODS = frozenset({"GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS"})
_KEY_SCOPE = "memoryos.key"
ASGIApp = Callable[
    [
        dict[str, Any],
        Callable[[], Awaitable[dict[str, Any]]],
        Callable[[dict[str, Any]], Awaitable[None]],
    ],
    Awaitable[None],
]


@dataclass(frozen=True, slots=True)
class ServerSettings:
    """How ``memoryos serve`` runs.

    Attributes:
        data_dir: the memory system's data directory.
        keys_file: the API key file (see :mod:`.keys`).
        config: the memory system's configuration.
        host: address to listen on.
        port: TCP port (0: any free port).
        max_body_bytes: largest request body accepted, bytes (else 413).
        rate_per_second: default sustained request limit per key, requests per second.
        burst: default requests a key may send at once.
        mcp: also serve MCP (streamable HTTP) at ``/mcp`` (needs the ``mcp`` extra).
        ready_file: when set, ``{"host", "port", "pid"}`` is written there (JSON) once the
            server accepts connections; for scripts and tests that start it on port 0.
    """

    data_dir: Path
    keys_file: Path
    config: MemoryConfig = field(default_factory=MemoryConfig)
    host: str = "127.0.0.1"
    port: int = 8080
    max_body_bytes: int = 512 * 1024
    rate_per_second: float = 50.0
    burst: int = 100
    mcp: bool = False
    ready_file: Path | None = None


# -- errors ------------------------------------------------------------------------------------


def _error(
    status: int,
    kind: str,
    message: str,
    *,
    headers: dict[str, str] | None = None,
    details: list[dict[str, Any]] | None = None,
) -> JSONResponse:
    body: dict[str, Any] = {"type": kind, "message": message}
    if details is not None:
        body["details"] = details
    return JSONResponse({"error": body}, status_code=status, headers=headers)


_STATUS: tuple[tuple[type[MemoryOSError], int], ...] = (
    (InvalidInput, 422),
    (UnknownUser, 404),
    (UnknownMemory, 404),
    (Overloaded, 503),
    (SystemClosed, 503),
    (ActorCrashed, 503),
    (GatewayError, 502),
)


def _memory_error(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, MemoryOSError)
    status = next((code for cls, code in _STATUS if isinstance(exc, cls)), 500)
    headers = {"Retry-After": "1"} if status == 503 else None
    message = str(exc.args[0]) if exc.args else str(exc)
    return _error(status, type(exc).__name__, message, headers=headers)


def _validation_error(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    details = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err.get("loc", ()))
        details.append({"loc": loc, "message": str(err.get("msg", ""))})
    summary = "; ".join(f"{d['loc']}: {d['message']}" for d in details[:5]) or "invalid input"
    return _error(422, "InvalidInput", summary, details=details)


def _http_error(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    kind = {404: "NotFound", 405: "MethodNotAllowed"}.get(exc.status_code, "HTTPError")
    return _error(exc.status_code, kind, str(exc.detail), headers=exc.headers)


# -- the gate: auth, rate limit, body size, before the app --------------------------------------


class _Gate:
    """ASGI middleware that refuses requests before the app (and memory) sees them.

    Also counts every answered request for ``/metrics`` by its route template.
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        keys: KeyStore,
        limiter: RateLimiter,
        metrics: ServerMetrics,
        max_body_bytes: int,
        mcp_app: ASGIApp | None = None,
    ) -> None:
        self.app = app
        self.keys = keys
        self.limiter = limiter
        self.metrics = metrics
        self.max_body = max_body_bytes
        self.mcp_app = mcp_app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = [500]

        async def send_counted(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                status[0] = int(message["status"])
            await send(message)

        path: str = scope.get("path", "")
        is_mcp = path == "/mcp" or path.startswith("/mcp/")
        try:
            await self._handle(scope, receive, send_counted, path, is_mcp)
        finally:
            route = "/mcp" if is_mcp else getattr(scope.get("route"), "path", "unmatched")
            method = scope.get("method", "")
            self.metrics.observe(
                method if method in _METHODS else "other",
                route,
                status[0],
                time.perf_counter() - started,
            )

    async def _handle(
        self, scope: dict[str, Any], receive: Any, send: Any, path: str, is_mcp: bool
    ) -> None:
        protected = is_mcp or path == "/v1" or path.startswith("/v1/")
        if protected:
            rec = self.keys.lookup(_presented_key(scope))
            if rec is None:
                self.metrics.rejected.labels("unauthorized").inc()
                await _error(
                    401,
                    "Unauthorized",
                    "a valid API key is required (Authorization: Bearer <key> or X-API-Key: <key>)",
                    headers={"WWW-Authenticate": "Bearer"},
                )(scope, receive, send)
                return
            wait = self.limiter.check(rec.key_id, time.monotonic(), rec.rate_per_second, rec.burst)
            if wait:
                self.metrics.rejected.labels("rate_limited").inc()
                await _error(
                    429,
                    "RateLimited",
                    f"request limit of key {rec.key_id} reached; retry after {wait} s",
                    headers={"Retry-After": str(wait)},
                )(scope, receive, send)
                return
            scope[_KEY_SCOPE] = rec
        if scope.get("method") in ("POST", "PUT", "PATCH", "DELETE"):
            body = await self._read_body(scope, receive, send)
            if body is None:
                return
            receive = _replay(body, receive)
        target = self.mcp_app if is_mcp and self.mcp_app is not None else self.app
        await target(scope, receive, send)

    async def _read_body(self, scope: dict[str, Any], receive: Any, send: Any) -> bytes | None:
        """The whole request body, or None after answering 413/422 itself."""
        declared = _header(scope, b"content-length")
        too_large = _error(
            413, "PayloadTooLarge", f"request body larger than {self.max_body} bytes"
        )
        if declared is not None:
            try:
                if int(declared) > self.max_body:
                    self.metrics.rejected.labels("too_large").inc()
                    await too_large(scope, receive, send)
                    return None
            except ValueError:
                pass
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return None
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body:
                self.metrics.rejected.labels("too_large").inc()
                await too_large(scope, receive, send)
                return None
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        ctype = (_header(scope, b"content-type") or "").split(";", 1)[0].strip().lower()
        if (
            body
            and scope.get(_KEY_SCOPE) is not None
            and ctype != "application/json"
            and not (scope.get("path", "").startswith("/mcp"))
        ):
            await _error(
                415,
                "UnsupportedMediaType",
                "send the body as JSON with Content-Type: application/json",
            )(scope, receive, send)
            return None
        try:
            body.decode("utf-8")
        except UnicodeDecodeError as exc:
            self.metrics.rejected.labels("bad_encoding").inc()
            await _error(
                422, "InvalidInput", f"request body is not valid UTF-8 (byte {exc.start})"
            )(scope, receive, send)
            return None
        return body


def _header(scope: dict[str, Any], name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key.lower() == name:
            return value.decode("latin-1")
    return None


def _presented_key(scope: dict[str, Any]) -> str | None:
    auth = _header(scope, b"authorization")
    if auth is not None and auth[:7].lower() == "bearer ":
        return auth[7:].strip()
    return _header(scope, b"x-api-key")


def _replay(body: bytes, receive: Any) -> Any:
    sent = False

    async def replay() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


# -- conversions ----------------------------------------------------------------------------


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
            m.TraitOut(name=t.name, category=t.category, level=t.level, evidence=t.evidence)
            for t in ctx.traits
        ],
        profile=profile_dict(ctx.lpm_profile),
        agent_profile=profile_dict(ctx.agent_profile),
        rendered=ctx.render(),
        elapsed_ms=ctx.elapsed_ms,
    )


# -- the app ------------------------------------------------------------------------------------


class _State:
    """What the routes share: the memory system and the server's status."""

    def __init__(self, settings: ServerSettings) -> None:
        self.settings = settings
        self.mem: AsyncMemoryOS | None = None
        self.status = "starting"

    def memory(self) -> AsyncMemoryOS:
        if self.mem is None or self.status != "ok":
            raise SystemClosed(f"the server is {self.status}")
        return self.mem

    def stats(self) -> dict[str, Any] | None:
        mem = self.mem
        if mem is None or self.status != "ok":
            return None
        try:
            return mem.sync.stats()
        except MemoryOSError:
            return None


def create_app(
    settings: ServerSettings, *, keys: KeyStore | None = None, memory: MemoryOS | None = None
) -> ASGIApp:
    """The server as an ASGI app (run it with uvicorn; see :func:`.run.serve`).

    The memory system is opened when the app starts (ASGI lifespan) and closed when it
    stops, unless an open ``memory`` is given (then the caller closes it).
    """
    state = _State(settings)
    keystore = keys if keys is not None else KeyStore(settings.keys_file)
    metrics = ServerMetrics(state.stats)
    mcp_server = None
    if settings.mcp:
        from .mcp_server import build_mcp

        mcp_server = build_mcp(state.memory, _mcp_tenant)

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        async with AsyncExitStack() as stack:
            if memory is None:
                mem = await AsyncMemoryOS.open(settings.data_dir, settings.config)
                stack.push_async_callback(mem.close)
            else:
                mem = AsyncMemoryOS(memory)
                stack.push_async_callback(mem.detach)
            state.mem = mem
            if mcp_server is not None:
                await stack.enter_async_context(mcp_server.session_manager.run())
            state.status = "ok"
            try:
                yield
            finally:
                state.status = "stopping"

    app = FastAPI(
        title="memoryos-actors",
        version=_version(),
        summary="Long-term memory for LLM agents and chat bots (MemoryOS tiers as actors).",
        description=API_DESCRIPTION,
        lifespan=lifespan,
        # The documentation pages are served by mount_docs, from local files.
        docs_url=None,
        redoc_url=None,
    )
    mount_docs(app)
    app.add_exception_handler(MemoryOSError, _memory_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)

    bearer = HTTPBearer(auto_error=False, description="API key: Authorization: Bearer <key>")
    header = APIKeyHeader(name="X-API-Key", auto_error=False, description="API key")
    # The gate checks the key; these only document it on the OpenAPI page.
    v1 = APIRouter(
        prefix="/v1", dependencies=[Security(bearer), Security(header)], responses=ERRORS
    )

    def tenant_of(request: Request) -> str:
        rec: KeyRecord = request.scope[_KEY_SCOPE]
        return rec.tenant

    async def known(request: Request, user_id: str) -> tuple[str, str]:
        """``(tenant, library user id)`` of an existing user of the key's tenant, else 404."""
        tenant = tenant_of(request)
        uid = internal_id(tenant, user_id)
        mem = state.memory()
        # One stat() of the user's directory: cheap enough for the event loop. A user being
        # imported or created right now may be live before its directory shows.
        if not user_exists(settings.data_dir, uid) and uid not in await mem.active_users():
            raise UnknownUser(f"no user {user_id!r}")
        return tenant, uid

    # The routes' summaries and docstrings are published as the API's documentation
    # (Markdown, for API users).

    @v1.get(
        "/users",
        summary="List the tenant's users",
        response_model=m.UsersResponse,
        tags=["users"],
        response_description="One page of user ids.",
    )
    async def list_users(
        request: Request, limit: int = LIMIT, cursor: str | None = CURSOR
    ) -> m.UsersResponse:
        """The users of this key's tenant that have stored data, sorted by id, one page at
        a time (see `limit` and `cursor`)."""
        after = None if cursor is None else decode_cursor(cursor, "users", (str,))
        tenant = tenant_of(request)
        mem = state.memory()
        ids = set(await mem.users()) | set(await mem.active_users())
        found = (external_id(tenant, uid) for uid in ids)
        users, next_cursor = page_of(
            [u for u in found if u is not None], lambda u: (u,), "users", limit, after
        )
        return m.UsersResponse(users=users, next_cursor=next_cursor)

    @v1.post(
        "/users/{user_id}/turns",
        status_code=201,
        summary="Add a turn",
        response_model=m.AddTurnResponse,
        tags=["memory"],
        responses=BODY_ERRORS,
        response_description="The turn is stored.",
    )
    async def add_turn(
        request: Request, body: m.AddTurnRequest, user_id: str = USER_ID
    ) -> m.AddTurnResponse:
        """Store one exchange with the user: what the user said and what the assistant
        answered. Answers once the turn is durable (in the user's write-ahead log).

        Creates the user on the first turn. Send a `turn_key` (e.g. your message id) to make
        a retry safe: a turn sent again with the key of one of the user's recent turns is
        stored once, and the answer names the first page.
        """
        tenant = tenant_of(request)
        page_id = await state.memory().add_turn(
            internal_id(tenant, user_id),
            body.query,
            body.response,
            body.timestamp,
            internal_id(tenant, body.assistant_id, "assistant_id"),
            turn_key=body.turn_key,
        )
        return m.AddTurnResponse(user_id=user_id, page_id=page_id)

    @v1.post(
        "/users/{user_id}/retrieve",
        summary="Retrieve memory for a query",
        response_model=m.RetrieveResponse,
        tags=["memory"],
        responses={**NO_USER, **BODY_ERRORS},
        response_description="What the memory holds about the query.",
    )
    async def retrieve(
        request: Request, body: m.RetrieveRequest, user_id: str = USER_ID
    ) -> m.RetrieveResponse:
        """What the user's memory holds about `query`: the recent dialogue, earlier turns
        relevant to it with their topic summaries, facts and traits learned about the user,
        and the assistant's persona; each item with its id, score and where it came from.
        `rendered` is the same as text to put in an LLM prompt. Reading changes nothing
        but how "warm" the topics used are. 404 if the user has no data."""
        tenant, uid = await known(request, user_id)
        ctx = await state.memory().retrieve(
            uid, body.query, internal_id(tenant, body.assistant_id, "assistant_id")
        )
        return _context(ctx, user_id, body.assistant_id, body.top_k)

    @v1.post(
        "/users/{user_id}/chat",
        summary="Answer from memory and store the turn",
        response_model=m.ChatResponse,
        tags=["memory"],
        responses={**BODY_ERRORS, **CHAT_ERRORS},
        response_description="The reply; the turn is stored.",
    )
    async def chat(request: Request, body: m.ChatRequest, user_id: str = USER_ID) -> m.ChatResponse:
        """Retrieve memory for the message, answer it with the server's LLM, and store the
        exchange as a turn. Creates the user on the first message.

        During an LLM provider outage a simple offline answer is given instead and the
        reply says so (`degraded`, `reason`). A provider configuration error (rejected key,
        unknown model, unreachable address) is a 502 naming it (`ProviderAuthError`,
        `ProviderModelNotFound`, `ProviderUnreachable`), never an offline answer; nothing
        is stored then."""
        tenant = tenant_of(request)
        reply = await state.memory().chat_reply(
            internal_id(tenant, user_id),
            body.query,
            internal_id(tenant, body.assistant_id, "assistant_id"),
        )
        return m.ChatResponse(
            user_id=user_id, reply=reply.text, degraded=reply.degraded, reason=reply.reason
        )

    @v1.get(
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
        after = None if cursor is None else decode_cursor(cursor, "memories", (int, int, str))
        tenant, uid = await known(request, user_id)
        st, archived = await read_memories(state.memory(), uid)
        return memories_response(tenant, user_id, st, archived, kinds, limit, after)

    @v1.get(
        "/users/{user_id}/profile",
        summary="Get the user's profile",
        response_model=m.UserProfileBody,
        tags=["profiles"],
        responses=NO_USER,
        response_description="The user's profile.",
    )
    async def get_profile(request: Request, user_id: str = USER_ID) -> m.UserProfileBody:
        """The static profile set for the user (name, gender, birth year, extras); empty
        fields if none was set."""
        _tenant, uid = await known(request, user_id)
        st = await state.memory().user_state(uid)
        return m.UserProfileBody(**profile_dict(st.profile))

    @v1.put(
        "/users/{user_id}/profile",
        summary="Set the user's profile",
        response_model=m.UserProfileBody,
        tags=["profiles"],
        responses=BODY_ERRORS,
        response_description="The profile, as stored.",
    )
    async def put_profile(
        request: Request, body: m.UserProfileBody, user_id: str = USER_ID
    ) -> m.UserProfileBody:
        """Replace the user's static profile; it is durable when this answers and shows in
        every later retrieval. Creates the user."""
        uid = internal_id(tenant_of(request), user_id)
        profile = UserProfile(
            name=body.name,
            gender=body.gender,
            birth_year=body.birth_year,
            extras=tuple(sorted(body.extras.items())),
        )
        await state.memory().set_user_profile(uid, profile)
        return body

    @v1.get(
        "/users/{user_id}/agents/{assistant_id}/profile",
        summary="Get an assistant's persona for the user",
        response_model=m.AgentProfileBody,
        tags=["profiles"],
        responses=NO_USER,
        response_description="The assistant's persona.",
    )
    async def get_agent_profile(
        request: Request, user_id: str = USER_ID, assistant_id: str = ASSISTANT_ID
    ) -> m.AgentProfileBody:
        """The assistant's static persona (role, character) as this user's memory holds
        it; empty fields if none was set."""
        tenant, uid = await known(request, user_id)
        st = await state.memory().user_state(uid)
        agent = st.agents.get(internal_id(tenant, assistant_id, "assistant_id"))
        if agent is None:
            return m.AgentProfileBody()
        return m.AgentProfileBody(**profile_dict(agent["profile"]))

    @v1.put(
        "/users/{user_id}/agents/{assistant_id}/profile",
        summary="Set an assistant's persona for the user",
        response_model=m.AgentProfileBody,
        tags=["profiles"],
        responses=BODY_ERRORS,
        response_description="The persona, as stored.",
    )
    async def put_agent_profile(
        request: Request,
        body: m.AgentProfileBody,
        user_id: str = USER_ID,
        assistant_id: str = ASSISTANT_ID,
    ) -> m.AgentProfileBody:
        """Replace the assistant's static persona in this user's memory; durable when this
        answers. Creates the user."""
        tenant = tenant_of(request)
        profile = AgentProfile(
            role=body.role, character=body.character, extras=tuple(sorted(body.extras.items()))
        )
        await state.memory().set_agent_profile(
            internal_id(tenant, user_id), profile, internal_id(tenant, assistant_id, "assistant_id")
        )
        return body

    @v1.get(
        "/users/{user_id}/export",
        summary="Export everything stored for a user",
        tags=["users"],
        response_model=dict[str, Any],
        responses=NO_USER,
        response_description="The user's export.",
    )
    async def export(request: Request, user_id: str = USER_ID) -> dict[str, Any]:
        """Everything stored for the user (turns, segments, facts, traits, profiles, the
        archive and the memories' history), as one JSON document: the format
        `memoryos export` writes and `memoryos import` reads."""
        _tenant, uid = await known(request, user_id)
        with tempfile.TemporaryDirectory(prefix="memoryos-export-") as tmp:
            path = Path(tmp) / "export.json"
            await state.memory().export_user(uid, path)
            text = await asyncio.to_thread(path.read_text, encoding="utf-8")
        return relabel_user_id(json.loads(text), uid, user_id)

    @v1.delete(
        "/users/{user_id}",
        summary="Forget a user",
        response_model=m.ForgetResponse,
        tags=["users"],
        responses=NO_USER,
        response_description="What was deleted.",
    )
    async def forget(request: Request, user_id: str = USER_ID) -> m.ForgetResponse:
        """Delete everything stored about the user, for good; other users are untouched.
        The answer says how many files went."""
        _tenant, uid = await known(request, user_id)
        report = await state.memory().forget_user(uid)
        return m.ForgetResponse(
            user_id=user_id, removed_files=len(report.removed_files), was_active=report.was_active
        )

    async def on_memory(
        request: Request,
        user_id: str,
        memory_id: str,
        call: Callable[[AsyncMemoryOS, str, str], Awaitable[Any]],
    ) -> tuple[str, Any]:
        """``(tenant, call(memory, library user id, library memory id))``; 404 for an
        unknown user or memory, named by the tenant's ids."""
        tenant, uid = await known(request, user_id)
        try:
            return tenant, await call(state.memory(), uid, internal_memory_id(tenant, memory_id))
        except UnknownMemory:
            raise UnknownMemory(f"user {user_id!r} has no memory {memory_id!r}") from None

    @v1.get(
        "/users/{user_id}/memories/{memory_id}",
        summary="Get one memory",
        response_model=m.MemoryOut,
        tags=["memory"],
        responses=NO_MEMORY,
        response_description="The memory.",
    )
    async def get_memory(
        request: Request, user_id: str = USER_ID, memory_id: str = MEMORY_ID
    ) -> m.MemoryOut:
        """One memory by id (`page:p12`, `segment:s3`, `fact:f7`,
        `agent_trait:<assistant>:a2`, `trait:<name>`), with where it is now and where it
        came from. 404 if the user has no such memory (or it was deleted)."""
        tenant, found = await on_memory(
            request, user_id, memory_id, lambda mem, u, i: mem.get_memory(u, i)
        )
        return _memory_out(tenant, found)

    @v1.delete(
        "/users/{user_id}/memories/{memory_id}",
        summary="Delete one memory",
        response_model=m.MemoryEventOut,
        tags=["memory"],
        responses=NO_MEMORY,
        response_description="The deletion, with the deleted text.",
    )
    async def delete_memory(
        request: Request, user_id: str = USER_ID, memory_id: str = MEMORY_ID
    ) -> m.MemoryEventOut:
        """Delete one memory everywhere it is kept (recent dialogue, topic segments, the
        archive and its search index, exports, caches): retrieval never returns it again.
        Deleting a segment deletes its turns. Durable when this answers. The answer
        carries the deleted text; the memory's history keeps only that it was deleted,
        and when. Facts learned from a deleted turn are memories of their own: delete them
        too."""
        tenant, event = await on_memory(
            request, user_id, memory_id, lambda mem, u, i: mem.delete_memory(u, i)
        )
        return _event_out(tenant, event)

    @v1.patch(
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
    ) -> m.MemoryEventOut:
        """Correct a fact or an assistant trait (`value`: the new sentence) or a user trait
        (`value`: low, medium or high). The old value stays in the memory's history;
        retrieval returns the new one. Durable when this answers. 422 for turns (pages)
        and segments: delete them instead."""
        tenant, event = await on_memory(
            request,
            user_id,
            memory_id,
            lambda mem, u, i: mem.correct_memory(u, i, body.value, body.evidence),
        )
        return _event_out(tenant, event)

    @v1.get(
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
    ) -> m.MemoryHistoryResponse:
        """What changed the memory and when, oldest first: created, changed (a persona
        update changed a trait), corrected, deleted. A deleted memory keeps only the
        fact and time of its deletion. One page at a time (see `limit` and `cursor`)."""
        after = None if cursor is None else decode_cursor(cursor, "history", (float, int))
        tenant, events = await on_memory(
            request, user_id, memory_id, lambda mem, u, i: mem.memory_history(u, i)
        )
        # Key: (time, n-th event at that time); events are only ever added later.
        keyed: list[tuple[tuple[float, int], MemoryEvent]] = []
        seen: dict[float, int] = {}
        for e in events:
            seen[e.at] = seen.get(e.at, -1) + 1
            keyed.append(((float(e.at), seen[e.at]), e))
        shown, next_cursor = page_of(keyed, lambda x: x[0], "history", limit, after)
        return m.MemoryHistoryResponse(
            user_id=user_id,
            memory_id=memory_id,
            events=[_event_out(tenant, e) for _k, e in shown],
            next_cursor=next_cursor,
        )

    app.include_router(v1)
    # The memory page (/ui): same keys, tenants and request limits as /v1.
    limiter = RateLimiter(settings.rate_per_second, settings.burst)
    from .ui import mount_ui

    mount_ui(
        app,
        memory=state.memory,
        keys=keystore,
        limiter=limiter,
        data_dir=settings.data_dir,
        config=settings.config,
    )

    @app.get(
        "/healthz",
        summary="Liveness",
        response_model=m.HealthResponse,
        tags=["ops"],
        response_description="The process serves HTTP.",
    )
    async def healthz() -> m.HealthResponse:
        """200 while the process serves HTTP (no key needed)."""
        return m.HealthResponse(status="ok")

    @app.get(
        "/readyz",
        summary="Readiness",
        response_model=m.ReadyResponse,
        tags=["ops"],
        responses={
            503: {"model": m.HealthResponse, "description": "Not ready: starting or stopping."}
        },
        response_description="Ready for memory calls.",
    )
    async def readyz() -> Response:
        """200 when the server accepts memory calls, else 503 (no key needed).

        `llm` tells how the LLM provider is doing (its circuit breakers, a configuration
        error, the last failure). A degraded provider does not make the server unready:
        memory calls still work, and chat replies come from the offline fallback, marked
        so."""
        ready = state.status == "ok"
        body: dict[str, Any] = {"status": state.status}
        if ready and state.mem is not None:
            gateway = getattr(state.mem.sync, "gateway_service", None)
            if gateway is not None:
                body["llm"] = gateway.provider_health()
        return JSONResponse(body, status_code=200 if ready else 503)

    @app.get(
        "/metrics",
        summary="Prometheus metrics",
        tags=["ops"],
        response_class=Response,
        responses={
            200: {"content": {CONTENT_TYPE_LATEST: {}}, "description": "Prometheus text format."}
        },
    )
    async def prometheus() -> Response:
        """Metrics in Prometheus text format (no key needed): HTTP requests by route and
        status with latency histograms, refusals by reason, the memory system's counters
        and the LLM provider's state. No user, tenant or key appears in them."""
        text = await asyncio.to_thread(generate_latest, metrics.registry)
        return Response(text, media_type=CONTENT_TYPE_LATEST)

    mcp_app = None
    if mcp_server is not None:
        mcp_app = mcp_server.streamable_http_app(
            streamable_http_path="/mcp",
            host=settings.host,
            max_request_body_size=settings.max_body_bytes,
        )
    return _Gate(
        app,
        keys=keystore,
        limiter=limiter,
        metrics=metrics,
        max_body_bytes=settings.max_body_bytes,
        mcp_app=mcp_app,
    )


def _memory_out(tenant: str, mem: Memory) -> m.MemoryOut:
    return m.MemoryOut(
        memory_id=external_memory_id(tenant, mem.memory_id),
        kind=mem.kind,  # type: ignore[arg-type]
        tier=mem.tier,
        text=mem.text,
        timestamp=mem.timestamp,  # type: ignore[arg-type]
        assistant_id=(
            external_id(tenant, mem.assistant_id) or mem.assistant_id if mem.assistant_id else None
        ),
        segment_id=mem.segment_id,
        source_segment=mem.source_segment,
        page_ids=list(mem.page_ids),
        evidence=mem.evidence,
        edited=mem.edited,
        chain_id=mem.chain_id,
    )


def _event_out(tenant: str, event: MemoryEvent) -> m.MemoryEventOut:
    return m.MemoryEventOut(
        memory_id=external_memory_id(tenant, event.memory_id),
        action=event.action,
        at=event.at,  # type: ignore[arg-type]
        old=event.old,
        new=event.new,
        by=event.by,
    )


def _mcp_tenant(request: Any) -> str | None:
    """The tenant of the key that the gate accepted for this MCP HTTP request."""
    rec = getattr(request, "scope", {}).get(_KEY_SCOPE)
    return rec.tenant if isinstance(rec, KeyRecord) else None


def _version() -> str:
    from .. import __version__

    return __version__
