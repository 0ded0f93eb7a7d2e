"""The memory page: a web UI at ``/ui`` of ``memoryos serve`` to browse, search, correct and
prune what the memory system holds about each user.

Server-rendered HTML (Jinja2 templates shipped in this package, autoescaped) with one
small script file; no CDN, no build step. Behind the server's API keys: a key is entered
once on a login form, and the browser then holds only an opaque session id (see
:mod:`.sessions`). Every page reads, and every form writes, through the same library calls
as the JSON API. :func:`mount_ui` adds it to the server's FastAPI app; jinja2 is imported
only then.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable

    from ...aio import AsyncMemoryOS
    from ...config import MemoryConfig
    from ..keys import KeyStore
    from ..ratelimit import RateLimiter

__all__ = ["mount_ui"]


def mount_ui(
    app: Any,
    *,
    memory: Callable[[], AsyncMemoryOS],
    keys: KeyStore,
    limiter: RateLimiter,
    data_dir: Path,
    config: MemoryConfig,
) -> None:
    """Serve the memory page at ``/ui`` of the FastAPI ``app``: ``memory()`` is the open
    memory system, ``keys`` the server's key file, ``limiter`` its per-key request limit."""
    from .routes import build_router

    app.include_router(build_router(memory, keys, limiter, data_dir, config))
