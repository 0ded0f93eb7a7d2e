"""The server's memory listing shows every stored turn, even right after adding."""

from __future__ import annotations

import asyncio
from pathlib import Path

from sysutil import SMALL

from memoryos_actors import AsyncMemoryOS, MemoryConfig
from memoryos_actors.server.listing import page_count, read_memories


def test_listing_right_after_adding_shows_every_turn_once(tmp_path: Path) -> None:
    async def main() -> None:
        async with await AsyncMemoryOS.open(tmp_path, MemoryConfig(**SMALL)) as mem:
            for n in range(40):
                await mem.add_turn("ann", f"turn {n} about rivers", "ok")
                state, archived = await read_memories(mem, "ann")
                assert page_count(state, archived) == state.turns == n + 1

    asyncio.run(main())
