"""Running the servers: ``memoryos serve`` (HTTP, optionally with MCP at ``/mcp``) and
``memoryos mcp`` (MCP over stdio)."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import math
import os
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..aio import AsyncMemoryOS
from ..config import MemoryConfig
from ..errors import InvalidInput, StorageError
from ..stopping import DEFAULT_SHUTDOWN_TIMEOUT_S, StopSignals
from .app import ServerSettings, create_app
from .keys import check_tenant

if TYPE_CHECKING:
    from .uvicorn_server import HTTPServer

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


def _trusted_proxies(value: str | None) -> list[str]:
    """The proxies named by ``--forwarded-allow-ips`` (see
    :attr:`ServerSettings.forwarded_allow_ips`) as uvicorn takes them; ``[]`` (no proxy)
    for None. :class:`InvalidInput` for an entry that is neither an address, a network
    nor ``*``: uvicorn would take it as a name no peer ever has, and trust nobody without
    a word."""
    import ipaddress

    if value is None:
        return []
    entries = [e.strip() for e in value.split(",") if e.strip()]
    if not entries:
        raise InvalidInput("--forwarded-allow-ips needs at least one address, network or '*'")
    if entries == ["*"]:
        return entries
    for entry in entries:
        try:
            if "/" in entry:
                ipaddress.ip_network(entry, strict=False)
            else:
                ipaddress.ip_address(entry)
        except ValueError:
            raise InvalidInput(
                f"--forwarded-allow-ips: {entry!r} is not an IP address or network "
                "(give addresses like 127.0.0.1 or 10.0.0.0/8, comma-separated, or '*')"
            ) from None
    return entries


def _write_ready(path: Path, host: str, port: int) -> None:
    _write_json(path, {"host": host, "port": port, "pid": os.getpid()})


def _write_server_file(data_dir: Path, url: str, mcp: bool) -> Path | None:
    """Say where this server listens, in the data directory it holds (see
    :func:`~memoryos_actors.operations.server_info`): a command refused by the lock names
    it. Advice only: a failure to write it is no reason not to serve."""
    from ..operations import server_info

    path = server_info(data_dir)
    try:
        _write_json(path, {"url": url, "pid": os.getpid(), "mcp": mcp})
    except OSError:
        return None
    return path


def _write_json(path: Path, doc: dict[str, Any]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(doc), encoding="utf-8")
    os.replace(tmp, path)


def serve(
    settings: ServerSettings,
    *,
    shutdown_timeout: float = DEFAULT_SHUTDOWN_TIMEOUT_S,
    ray: bool | str = False,
    shards: int | None = None,
) -> None:
    """Serve the HTTP API until SIGTERM or SIGINT, then stop gracefully.

    ``ray``: ``False`` serves a sharded data directory with its shards in this process;
    ``True`` (a local Ray, or the one this process is connected to) or a Ray address
    (``"auto"``, ``"host:port"``) serves it as a front door of shared Ray shards: several
    servers over one data directory and one Ray cluster serve the same users (see
    :mod:`memoryos_actors.cluster.doors`). ``shards``: an empty data directory becomes a
    sharded one with this many shards; a sharded one with another count is refused
    (``memoryos rebalance`` changes it).

    The first signal closes the listening socket and the idle connections; requests in
    flight get up to ``shutdown_timeout`` seconds to finish (then they are cancelled).
    Then the memory system is closed, given ``shutdown_timeout`` seconds for its background
    work (snapshots and the WAL sync happen in any case), and this returns. A second signal
    stops waiting for the requests in flight; it never skips closing the memory system.
    """
    from ..cluster import open_data_dir

    signalled: list[HTTPServer] = []  # the server, once made, for the signal handler

    def on_signal(count: int) -> None:
        for server in signalled:
            server.on_signal(count)

    proxies = _trusted_proxies(settings.forwarded_allow_ips)
    with StopSignals(
        f"finishing the requests in flight (at most {shutdown_timeout:g} s), "
        "then closing the memory system",
        on_signal,
        shutdown_timeout=shutdown_timeout,
    ) as stop:
        sock = _bind(settings.host, settings.port)
        try:
            # Opened here, not in the app's lifespan, so a locked or damaged data directory
            # is the typed error the CLI reports (exit code 2), not a log line from uvicorn.
            memory = open_data_dir(
                settings.data_dir, settings.config, ray=ray, shards=shards, shared=ray is not False
            )
        except BaseException:
            sock.close()
            raise
        try:
            server = _http_server(settings, memory, sock, shutdown_timeout, proxies)
            signalled.append(server)
            if stop.requested:  # a signal while the memory system was opening
                on_signal(stop.count)
            _run(server, sock, stop)
        finally:
            sock.close()
            if signalled and signalled[0].server_file is not None:
                signalled[0].server_file.unlink(missing_ok=True)  # before close() drops the lock
            stop.closing()
            memory.close(timeout=shutdown_timeout)
        if not stop.requested and not server.started:
            raise StorageError("the server did not start; the error is logged above")


def _http_server(
    settings: ServerSettings,
    memory: Any,
    sock: socket.socket,
    shutdown_timeout: float,
    proxies: list[str],
) -> HTTPServer:
    """The uvicorn server of the app over the open ``memory``, to listen on ``sock``."""
    import uvicorn

    from .uvicorn_server import HTTPServer

    port = sock.getsockname()[1]
    door = getattr(memory, "door", None)
    if door is not None and settings.door_count is None:
        # A front door: each key's limit is shared with the other live doors.
        from ..cluster import live_doors

        door_dir = door.data_dir
        settings = dataclasses.replace(settings, door_count=lambda: live_doors(door_dir))
    app = create_app(settings, memory=memory)
    # uvicorn takes whole seconds here: rounded up, a request in flight gets at least the
    # time asked for.
    config = uvicorn.Config(
        app,
        lifespan="on",
        log_level="warning",
        access_log=False,
        timeout_graceful_shutdown=math.ceil(shutdown_timeout),
        server_header=False,
        # X-Forwarded-For names the client only when a proxy the operator named sent it:
        # believed from any local peer (uvicorn's default), a client on this machine
        # could pick a new address for each guess at the memory page's login. An
        # explicit list, so $FORWARDED_ALLOW_IPS is not read.
        proxy_headers=bool(proxies),
        forwarded_allow_ips=proxies,
    )
    return HTTPServer(config, settings, port, memory, app)


def _run(server: HTTPServer, sock: socket.socket, stop: StopSignals) -> None:
    """Serve on ``sock`` until ``server`` stops, without uvicorn's noise after a forced
    stop."""
    from .uvicorn_server import QuietCancellations

    uvicorn_log = logging.getLogger("uvicorn.error")
    quiet = QuietCancellations(stop)
    uvicorn_log.addFilter(quiet)
    try:
        server.run(sockets=[sock])
    finally:
        uvicorn_log.removeFilter(quiet)


def serve_mcp_stdio(
    data_dir: Path,
    config: MemoryConfig,
    tenant: str,
    *,
    shutdown_timeout: float = DEFAULT_SHUTDOWN_TIMEOUT_S,
    ray: bool = False,
) -> None:
    """Serve MCP over stdin/stdout for ``tenant``'s users until stdin closes or a stop signal.

    On SIGTERM or SIGINT no new request is run (each gets an error answer); the requests in
    flight get up to ``shutdown_timeout`` seconds for their answers; then the input ends,
    the memory system is closed (``shutdown_timeout`` seconds for its background work) and
    this returns. A second signal ends the input at once: requests still in flight are
    answered with the SDK's "connection closed" error. A sharded data directory is served
    with its shards in this process, or on Ray with ``ray``.
    """
    from ..cluster import open_data_dir
    from .mcp_server import build_mcp
    from .stdio_relay import StdioRelay

    check_tenant(tenant)
    relay = (
        StdioRelay(shutdown_timeout, "the server is stopping; this request was not run")
        if os.name == "posix"
        else None
    )

    def on_signal(count: int) -> None:
        if relay is not None:
            if count == 1:
                relay.stop_input()
            else:
                relay.end_input()

    with StopSignals(
        f"answering the requests in flight (at most {shutdown_timeout:g} s), "
        "then closing the memory system",
        on_signal,
        shutdown_timeout=shutdown_timeout,
    ) as stop:
        # Opened before the MCP server starts, so a locked or damaged data directory is the
        # typed error the CLI reports at once (exit code 2), not an error inside the SDK's
        # task group, which would wait for the client to close stdin first.
        memory = AsyncMemoryOS(open_data_dir(data_dir, config, ray=ray))

        @asynccontextmanager
        async def lifespan(_server: Any) -> AsyncIterator[None]:
            try:
                yield
            finally:
                stop.closing()
                await memory.close(timeout=shutdown_timeout)
                if relay is not None:
                    relay.end_input()  # whatever ended the server, its stdin reader too

        server = build_mcp(
            lambda: memory, lambda _request: None, fixed_tenant=tenant, lifespan=lifespan
        )
        try:
            if relay is not None:
                relay.start()
                if stop.requested:  # a signal before the relay was listening
                    on_signal(stop.count)
            asyncio.run(server.run_stdio_async())
        finally:
            if relay is not None:
                relay.finish()
            stop.closing()
            memory.sync.close(timeout=shutdown_timeout)  # a no-op after the lifespan's
