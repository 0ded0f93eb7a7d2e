"""The server's memory listing (HTTP and MCP) is the library's: it shows every stored turn
once, even right after adding, and whatever was deleted, with one call of ``memories()``."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration"))

from sysutil import SMALL, turn_text

from memoryos_actors import AsyncMemoryOS, MemoryConfig
from memoryos_actors.server.listing import Listing, read_listing

PAGES = frozenset({"page"})


class _CountingReads:
    """The calls a listing makes, passed on to ``mem`` and counted."""

    def __init__(self, mem: AsyncMemoryOS) -> None:
        self.mem = mem
        self.listings = 0

    async def memories(self, uid: str, kinds: Any = None) -> Any:
        self.listings += 1
        return await self.mem.memories(uid, kinds)

    async def user_state(self, uid: str) -> Any:
        return await self.mem.user_state(uid)


def _listed_ids(listing: Listing) -> list[str]:
    return [m.memory_id.split(":", 1)[1] for m in listing.memories if m.kind == "page"]


def test_listing_right_after_adding_shows_every_turn_once(tmp_path: Path) -> None:
    async def main() -> None:
        async with await AsyncMemoryOS.open(tmp_path, MemoryConfig(**SMALL)) as mem:
            for n in range(40):
                await mem.add_turn("ann", f"turn {n} about rivers", "ok")
                reads = _CountingReads(mem)
                listing = await read_listing(reads, "ann", PAGES)  # type: ignore[arg-type]
                assert len(_listed_ids(listing)) == listing.turns == n + 1
                assert sorted(_listed_ids(listing)) == sorted(f"p{i}" for i in range(1, n + 2))
                assert reads.listings == 1  # the library's one listing, called once

    asyncio.run(main())


def test_a_listing_after_a_delete_calls_the_library_once_and_lists_every_other_turn(
    tmp_path: Path,
) -> None:
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
            listing = await read_listing(reads, "ann", PAGES)  # type: ignore[arg-type]
            assert reads.listings == 1
            assert listing.turns == 120
            assert sorted(_listed_ids(listing)) == sorted(
                f"p{i}" for i in range(1, 121) if i not in (2, 60, 119)
            )

    asyncio.run(main())


def test_the_server_lists_what_the_library_lists_in_every_tier(tmp_path: Path) -> None:
    """The HTTP listing's memories are ``memories()``'s, in its order, for every kind and
    tier, and a page's query and response come back apart."""

    async def main() -> None:
        async with await AsyncMemoryOS.open(
            tmp_path, MemoryConfig(**{**SMALL, "mtm_capacity": 3})
        ) as mem:
            # Queries of two lines, listed as they were said wherever the page is, the
            # archive included (not split at the first line break).
            said = {}
            for n in range(1, 121):
                query, response = turn_text("ann", n)
                page = await mem.add_turn("ann", f"{query}\nand more", response)
                said[page] = (f"{query}\nand more", response)
            await mem.flush()
            library = list(await mem.memories("ann"))
            listing = await read_listing(mem, "ann", frozenset(m.kind for m in library))
            assert [m.memory_id for m in listing.memories] == [m.memory_id for m in library]
            assert {m.tier for m in listing.memories if m.kind == "page"} == {
                "stm",
                "mtm",
                "archive",
            }
            pages = [m for m in listing.memories if m.kind == "page"]
            assert {m.memory_id.split(":", 1)[1]: (m.query, m.response) for m in pages} == said
            # Segments keep their heat and keywords in MTM and in the archive alike.
            segments = [m for m in listing.memories if m.kind == "segment"]
            assert {m.tier for m in segments} == {"mtm", "archive"}
            assert all(m.keywords for m in segments)
            assert all(m.heat > 0 for m in segments if m.tier == "mtm")
            page = await mem.add_turn("ann", "three\nmore\nlines", "a reply")
            listing = await read_listing(mem, "ann", PAGES)
            latest = next(m for m in listing.memories if m.memory_id == f"page:{page}")
            assert (latest.tier, latest.query, latest.response) == (
                "stm",
                "three\nmore\nlines",
                "a reply",
            )

    asyncio.run(main())
