"""One way for an adapter's coroutines to call either facade: a
:class:`~memoryos_actors.api.MemoryAPI` (its blocking calls run in a worker thread, so the
event loop of the agent runtime keeps running) or an
:class:`~memoryos_actors.api.AsyncMemoryAPI` (awaited)."""

from __future__ import annotations

import asyncio
import inspect
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..api import AsyncMemoryAPI, MemoryAPI

__all__ = ["call"]


async def call(mem: MemoryAPI | AsyncMemoryAPI, method: str, *args: Any, **kwargs: Any) -> Any:
    """``mem.<method>(*args, **kwargs)``, awaited whichever facade ``mem`` is."""
    fn = getattr(mem, method)
    if inspect.iscoroutinefunction(fn):
        return await fn(*args, **kwargs)
    return await asyncio.to_thread(fn, *args, **kwargs)
