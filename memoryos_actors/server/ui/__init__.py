"""The memory page: a web UI at ``/ui`` of ``memoryos serve`` to browse, search, correct and
prune what the memory system holds about each user.

Server-rendered HTML (Jinja2 templates shipped in this package, autoescaped) with one
small script file; no CDN, no build step. Behind the server's API keys: a key is entered
once on a login form, and the browser then holds only an opaque session id (see
:mod:`.sessions`). Every page reads, and every form writes, through the same library calls
as the JSON API, with the same tenant scoping: a session sees the users of its key's
tenant only, and another tenant's user is a 404 page. Lists are paginated so a page costs
the same whatever the length of a history.

One module per page, each adding its routes (module-level functions) to the one ``/ui``
router of :mod:`.state`: :mod:`.login` (``/ui``, log in and out, static files),
:mod:`.users`, :mod:`.overview` (a user), :mod:`.archive`, :mod:`.profile`,
:mod:`.search` and :mod:`.memory` (one memory, its deletion and correction). A route is
handed the page's state (:class:`.state.MemoryPage`) by a FastAPI dependency on the
app's state. :func:`mount_ui` adds the router to the server's FastAPI app; jinja2 is
imported only then.
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

#: The page modules, in the order their routes are added.
_PAGES = ("login", "users", "overview", "archive", "profile", "search", "memory")


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
    # Each page module adds its routes to the router when first imported.
    import importlib

    from .state import MemoryPage, router

    for page in _PAGES:
        importlib.import_module(f"{__name__}.{page}")

    app.state.memory_page = MemoryPage(memory, keys, limiter, data_dir, config)
    app.include_router(router)
