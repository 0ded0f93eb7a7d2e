"""Running the servers: ``memoryos serve`` (HTTP, optionally with MCP at ``/mcp``) and
``memoryos mcp`` (MCP over stdio)."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from ..config import MemoryConfig
from ..errors import InvalidInput, StorageError
from ..system import AsyncMemoryOS
from .app import ServerSettings, create_app
from .keys import check_tenant

__all__ = ["serve", "serve_mcp_stdio"]


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # proto=IPPROTO_TCP: asyncio sets TCP_NODELAY only on sockets that say they are TCP;
    # without it every response waits ~40 ms for the client's delayed ACK (Nagle).
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise InvalidInput(f"cannot listen on {host}:{port}: {exc.strerror}") from None
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def _write_ready(path: Path, host: str, port: int) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps({"host": host, "port": port, "pid": os.getpid()}),
                   encoding="utf-8")
    os.replace(tmp, path)


def serve(settings: ServerSettings) -> None:
    """Serve the HTTP API until SIGINT/SIGTERM, then close the memory system cleanly."""
    import uvicorn

    from ..system import MemoryOS

    sock = _bind(settings.host, settings.port)
    try:
        # Opened here, not in the app's lifespan, so a locked or damaged data directory is
        # the typed error the CLI reports (exit code 2), not a log line from uvicorn.
        memory = MemoryOS.open(settings.data_dir, settings.config)
    except BaseException:
        sock.close()
        raise
    port = sock.getsockname()[1]
    app = create_app(settings, memory=memory)

    class _Server(uvicorn.Server):
        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            await super().startup(sockets=sockets)
            if self.should_exit:
                return
            if settings.ready_file is not None:
                _write_ready(settings.ready_file, settings.host, port)
            print(f"memoryos: serving http://{settings.host}:{port} (OpenAPI at /docs)",
                  file=sys.stderr, flush=True)

    config = uvicorn.Config(app, lifespan="on", log_level="warning", access_log=False,
                            timeout_graceful_shutdown=10, server_header=False)
    server = _Server(config)
    try:
        server.run(sockets=[sock])
    finally:
        sock.close()
        memory.close()
    if not server.started:
        raise StorageError("the server did not start; the error is logged above")


def serve_mcp_stdio(data_dir: Path, config: MemoryConfig, tenant: str) -> None:
    """Serve MCP over stdin/stdout for ``tenant``'s users until stdin closes."""
    from .mcp_server import build_mcp

    check_tenant(tenant)
    holder: dict[str, AsyncMemoryOS] = {}

    @asynccontextmanager
    async def lifespan(_server: Any) -> AsyncIterator[None]:
        mem = await AsyncMemoryOS.open(data_dir, config)
        holder["mem"] = mem
        try:
            yield
        finally:
            holder.pop("mem", None)
            await mem.close()

    def memory() -> AsyncMemoryOS:
        return holder["mem"]

    server = build_mcp(memory, lambda _request: None, fixed_tenant=tenant, lifespan=lifespan)
    asyncio.run(server.run_stdio_async())
