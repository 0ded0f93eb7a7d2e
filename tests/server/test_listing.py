"""The server's memory listing shows every stored turn once, even right after adding, and
never waits: it reads the user's state once, whatever was deleted."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration"))

from sysutil import SMALL, turn_text

from memoryos_actors import AsyncMemoryOS, MemoryConfig
from memoryos_actors.server.listing import page_count, read_memories


class _CountingReads:
    """The two calls a listing makes, passed on to ``mem`` and counted."""

    def __init__(self, mem: AsyncMemoryOS) -> None:
        self.mem = mem
        self.state_reads = 0

    async def user_state(self, uid: str) -> Any:
        self.state_reads += 1
        return await self.mem.user_state(uid)

    async def archive(self, uid: str) -> Any:
        return await self.mem.archive(uid)


def _listed_ids(state: Any, archived: list[dict[str, Any]]) -> list[str]:
    ids = list(state.page_ids())
    for rec in archived:
        if rec["t"] == "segment":
            ids.extend(str(p["page_id"]) for p in rec["segment"]["pages"])
        elif rec["t"] == "page":
            ids.append(str(rec["page"]["page_id"]))
    return ids


def test_listing_right_after_adding_shows_every_turn_once(tmp_path: Path) -> None:
    async def main() -> None:
        async with await AsyncMemoryOS.open(tmp_path, MemoryConfig(**SMALL)) as mem:
            for n in range(40):
                await mem.add_turn("ann", f"turn {n} about rivers", "ok")
                reads = _CountingReads(mem)
                state, archived = await read_memories(reads, "ann")  # type: ignore[arg-type]
                assert page_count(state, archived) == state.turns == n + 1
                assert sorted(_listed_ids(state, archived)) == sorted(
                    f"p{i}" for i in range(1, n + 2)
                )
                assert reads.state_reads == 1  # complete at the first read, no settling

    asyncio.run(main())


def test_a_listing_after_a_delete_reads_once_and_lists_every_other_turn(tmp_path: Path) -> None:
    # Deleted turns still count in `turns`: a listing that waits until it sees `turns`
    # pages re-read the state until its deadline after any delete.
    async def main() -> None:
        async with await AsyncMemoryOS.open(tmp_path, MemoryConfig(**SMALL)) as mem:
            for n in range(1, 121):
                await mem.add_turn("ann", *turn_text("ann", n))
            await mem.flush()
            tiers = {"p2": "archive", "p60": "mtm", "p119": "stm"}  # one delete in each
            for page, tier in tiers.items():
                assert (await mem.get_memory("ann", f"page:{page}")).tier == tier
                await mem.delete_memory("ann", f"page:{page}")
            reads = _CountingReads(mem)
            state, archived = await read_memories(reads, "ann")  # type: ignore[arg-type]
            assert reads.state_reads == 1
            assert state.turns == 120
            assert sorted(_listed_ids(state, archived)) == sorted(
                f"p{i}" for i in range(1, 121) if i not in (2, 60, 119)
            )

    asyncio.run(main())
