"""The uvicorn server ``memoryos serve`` runs (imported only when it serves): stop
signals left to :class:`~memoryos_actors.stopping.StopSignals`, bodies still arriving
refused before the shutdown waits, and where it listens written once it does."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import uvicorn

if TYPE_CHECKING:
    from ..stopping import StopSignals
    from .app import ServerSettings
    from .gate import Gate

__all__ = ["HTTPServer", "QuietCancellations", "startup_line"]


class HTTPServer(uvicorn.Server):
    """uvicorn's server for ``app`` (the gate over the app) on ``port``, over the open
    ``memory`` system; ``server_file`` is the file it wrote saying where it listens (None
    until it listens, and for a front door, whose door file says it)."""

    def __init__(
        self, config: uvicorn.Config, settings: ServerSettings, port: int, memory: Any, app: Gate
    ) -> None:
        super().__init__(config)
        self.settings = settings
        self.port = port
        self.memory = memory
        self.gate = app
        self.server_file: Path | None = None

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        # The signals are StopSignals' (see .run.serve): uvicorn's own handling restores
        # the default handlers after its shutdown and raises the signal again, which ends
        # the process before the memory system is closed.
        yield

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        # Before uvicorn waits for the requests in flight: one still waiting for its
        # body is answered 503 now, not dropped when the shutdown timeout ends.
        self.gate.stop_reading()
        await super().shutdown(sockets=sockets)

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        from .run import _write_ready, _write_server_file

        await super().startup(sockets=sockets)
        if self.should_exit:
            return
        settings = self.settings
        if settings.ready_file is not None:
            _write_ready(settings.ready_file, settings.host, self.port)
        url = f"http://{settings.host}:{self.port}"
        door = getattr(self.memory, "door", None)
        if door is not None:
            # One of several front doors: each says where it listens in its own door
            # file (the SERVER file names one server holding the directory alone).
            door.set_url(url)
        else:
            self.server_file = _write_server_file(settings.data_dir, url, settings.mcp)
        print(startup_line(url, mcp=settings.mcp), file=sys.stderr, flush=True)

    def on_signal(self, count: int) -> None:
        """A stop signal (the ``count``-th): stop serving; from the second on, stop
        waiting for the requests in flight."""
        self.should_exit = True
        if count > 1:
            # uvicorn stops waiting for the requests in flight and skips the app's
            # shutdown; asyncio cancels what is left when uvicorn's loop ends.
            self.force_exit = True


class QuietCancellations(logging.Filter):
    """After a forced stop uvicorn logs every request it dropped, and the app's lifespan,
    as a CancelledError with its traceback: the stop notice already says so."""

    def __init__(self, stop: StopSignals) -> None:
        super().__init__()
        self.stop = stop

    def filter(self, record: logging.LogRecord) -> bool:
        if self.stop.hurry and record.levelno >= logging.ERROR:
            exc = record.exc_info[1] if record.exc_info else None
            if isinstance(exc, asyncio.CancelledError) or (
                exc is None and "CancelledError" in record.getMessage()
            ):
                return False
        return True


def startup_line(url: str, *, mcp: bool) -> str:
    """What ``serve`` prints once it listens: where the API, its documentation, the memory
    page and (when served) MCP are."""
    parts = [f"API {url}/v1", f"docs {url}/docs", f"memory page {url}/ui"]
    if mcp:
        parts.append(f"MCP {url}/mcp")
    return f"memoryos: serving {url} ({', '.join(parts)})"
