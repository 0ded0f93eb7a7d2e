"""``AsyncMemoryOS(mem)`` around a system its caller keeps: ``detach()`` stops the wrapper
and leaves the system open (what the HTTP server does with a ``MemoryOS`` handed to it)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from memoryos_actors import AsyncMemoryOS, MemoryOS


def test_detach_stops_the_wrapper_and_leaves_the_system_open(
    open_mem: Callable[..., MemoryOS],
) -> None:
    mem = open_mem()

    async def use_then_detach() -> AsyncMemoryOS:
        wrapper = AsyncMemoryOS(mem)
        await wrapper.add_turn("ann", "I keep bees.", "Noted.")
        await wrapper.detach()
        return wrapper

    wrapper = asyncio.run(use_then_detach())
    # The owner's system still serves, and has the turn made through the wrapper.
    mem.add_turn("ann", "The hives are on the roof.", "Nice.")
    mem.flush(user_id="ann")
    assert mem.user_state("ann").turns == 2
    # The wrapper is done: its calls are refused, not queued on a stopped pool.
    with pytest.raises(RuntimeError):
        asyncio.run(wrapper.users())
