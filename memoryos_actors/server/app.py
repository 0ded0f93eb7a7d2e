"""The HTTP JSON API: a FastAPI app over :class:`~memoryos_actors.AsyncMemoryOS`.

Every ``/v1`` route (and ``/mcp``) needs an API key (``Authorization: Bearer <key>`` or
``X-API-Key: <key>``; both only with the same key). A gate in front of the app (:mod:`.gate`) checks, in this order,
before anything reaches the memory system: the key (401), the key's request limit (429
with ``Retry-After``), the body size (413) and its encoding (422). The tenant of the key
decides whose users a request can name (see :mod:`.tenancy`): another tenant's user is
simply not found (404). ``/healthz``, ``/readyz``, ``/metrics`` and the OpenAPI pages need
no key.

The API's published text (``/openapi.json``, ``/docs``) is written for API users: it is
the description, shared parameters and error answers in :mod:`.docs`, the routes'
summaries and docstrings (Markdown), and the models' docstrings and field descriptions
(:mod:`.models`). Keep notes for developers out of them.

This module holds the settings and :func:`create_app`, which opens the memory system for
the app's lifetime and registers the route groups: ``routes_users`` (list, export,
forget), ``routes_turns`` (add a turn, retrieve, chat), ``routes_memories`` (listing,
one memory, deletion, correction, history), ``routes_profiles``, ``routes_ops``
(health, readiness, metrics), and the memory page (``ui/``). The routes share a
:class:`~.state.ServerState`; error answers are in :mod:`.http_errors`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fastapi import FastAPI

from ..aio import AsyncMemoryOS
from ..config import MemoryConfig
from ..system import MemoryOS
from . import routes_memories, routes_ops, routes_profiles, routes_turns, routes_users
from .docs import API_DESCRIPTION, mount_docs
from .gate import Gate, mcp_tenant
from .http_errors import add_error_handlers
from .keys import KeyStore
from .metrics import ServerMetrics
from .ratelimit import DOOR_RECOUNT_SECONDS, RateLimiter
from .state import ServerState

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

    from ..cluster import ClusterMemoryOS

__all__ = ["ServerSettings", "create_app"]


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
        body_timeout_seconds: seconds a request's whole body may take to arrive after its
            headers (else 408).
        rate_per_second: default sustained request limit per key, requests per second.
        burst: default requests a key may send at once.
        mcp: also serve MCP (streamable HTTP) at ``/mcp`` (needs the ``mcp`` extra).
        ready_file: when set, ``{"host", "port", "pid"}`` is written there (JSON) once the
            server accepts connections; for scripts and tests that start it on port 0.
        door_count: the number of live front doors (server processes over the same
            shards) that share each key's request limit; each door allows its share,
            ``rate / N`` and ``burst / N`` (at least 1). Called at most every
            ``door_recount_seconds`` from the event loop, so it must be quick. None: this
            server is the only door.
        door_recount_seconds: seconds between two counts of the front doors.
        forwarded_allow_ips: the proxies whose ``X-Forwarded-For`` and
            ``X-Forwarded-Proto`` are believed (comma-separated addresses or networks,
            ``*`` for any peer); the client's address is then the one the proxy names,
            which the memory page's login limit counts by. None: no proxy is trusted, and
            the client is the peer of the connection, whatever headers it sends.
    """

    data_dir: Path
    keys_file: Path
    config: MemoryConfig = field(default_factory=MemoryConfig)
    host: str = "127.0.0.1"
    port: int = 8080
    max_body_bytes: int = 512 * 1024
    body_timeout_seconds: float = 30.0
    rate_per_second: float = 50.0
    burst: int = 100
    mcp: bool = False
    ready_file: Path | None = None
    door_count: Callable[[], int] | None = None
    door_recount_seconds: float = DOOR_RECOUNT_SECONDS
    forwarded_allow_ips: str | None = None


def create_app(
    settings: ServerSettings,
    *,
    keys: KeyStore | None = None,
    memory: MemoryOS | ClusterMemoryOS | None = None,
) -> Gate:
    """The server as an ASGI app (run it with uvicorn; see :func:`.run.serve`).

    The memory system is opened when the app starts (ASGI lifespan) and closed when it
    stops, unless an open ``memory`` is given (then the caller closes it).
    """
    state = ServerState(settings)
    keystore = keys if keys is not None else KeyStore(settings.keys_file)
    metrics = ServerMetrics(state.stats)
    mcp_server = None
    if settings.mcp:
        from .mcp_server import build_mcp

        mcp_server = build_mcp(state.memory, mcp_tenant)
    app = FastAPI(
        title="memoryos-actors",
        version=_version(),
        summary="Long-term memory for LLM agents and chat bots (MemoryOS tiers as actors).",
        description=API_DESCRIPTION,
        lifespan=_lifespan,
        # The documentation pages are served by mount_docs, from local files.
        docs_url=None,
        redoc_url=None,
    )
    # What the routes and the lifespan are handed (see .state.server_state).
    app.state.server = state
    app.state.metrics = metrics
    app.state.given_memory = memory
    app.state.mcp_server = mcp_server
    mount_docs(app)
    add_error_handlers(app)
    # Registered in this order, the API page lists the tags users, memory, profiles.
    for routes in (routes_users, routes_turns, routes_memories, routes_profiles):
        app.include_router(routes.router)
    # The memory page (/ui): same keys, tenants and request limits as /v1.
    limiter = RateLimiter(
        settings.rate_per_second,
        settings.burst,
        door_count=settings.door_count,
        recount_seconds=settings.door_recount_seconds,
    )
    from .ui import mount_ui
    from .ui.web import PAGE_HEADERS

    mount_ui(
        app,
        memory=state.memory,
        keys=keystore,
        limiter=limiter,
        data_dir=settings.data_dir,
        config=settings.config,
    )
    app.include_router(routes_ops.router)
    return Gate(
        app,
        keys=keystore,
        limiter=limiter,
        metrics=metrics,
        max_body_bytes=settings.max_body_bytes,
        body_timeout=settings.body_timeout_seconds,
        mcp_app=_mcp_app(mcp_server, settings),
        page_headers=PAGE_HEADERS,
    )


@asynccontextmanager
async def _lifespan(app: FastAPI) -> AsyncIterator[None]:
    """Open the memory system (or adopt the one given to :func:`create_app`) and the MCP
    session manager for the app's lifetime; the server's status follows."""
    state: ServerState = app.state.server
    given: MemoryOS | ClusterMemoryOS | None = app.state.given_memory
    mcp_server: MCPServer | None = app.state.mcp_server
    async with AsyncExitStack() as stack:
        if given is None:
            mem = await AsyncMemoryOS.open(state.settings.data_dir, state.settings.config)
            stack.push_async_callback(mem.close)
        else:
            mem = AsyncMemoryOS(given)
            stack.push_async_callback(mem.detach)
        state.mem = mem
        if mcp_server is not None:
            await stack.enter_async_context(mcp_server.session_manager.run())
        state.status = "ok"
        try:
            yield
        finally:
            state.status = "stopping"


def _mcp_app(mcp_server: MCPServer | None, settings: ServerSettings) -> Any:
    """The MCP endpoint's ASGI app (``/mcp``), or None without MCP."""
    if mcp_server is None:
        return None
    return mcp_server.streamable_http_app(
        streamable_http_path="/mcp",
        host=settings.host,
        max_request_body_size=settings.max_body_bytes,
    )


def _version() -> str:
    from ..version import __version__

    return __version__
