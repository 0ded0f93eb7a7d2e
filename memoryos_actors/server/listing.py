"""Reading a user's memories for listing: state and archive, complete when settled."""

from __future__ import annotations

import asyncio
from typing import Any

from ..system import AsyncMemoryOS, UserState

__all__ = ["page_count", "read_memories"]

#: How long a listing waits for pages moving from STM to MTM to land, seconds.
_SETTLE_S = 2.0


def page_count(state: UserState, archived: list[dict[str, Any]]) -> int:
    """Pages held in STM, MTM and the archive."""
    n = len(state.page_ids())
    for rec in archived:
        if rec.get("t") == "segment":
            n += len(rec["segment"]["pages"])
        elif rec.get("t") == "page":
            n += 1
    return n


async def read_memories(mem: AsyncMemoryOS, uid: str) -> tuple[UserState, list[dict[str, Any]]]:
    """The user's state and archive records.

    A page leaving STM is in neither STM nor MTM until MTM has placed it (a few ms); the
    listing is read again until every stored turn shows, for up to two seconds, so a
    client that lists right after adding sees all its turns.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + _SETTLE_S
    while True:
        state = await mem.user_state(uid)
        archived = await mem.archive(uid)
        if page_count(state, archived) >= state.turns or loop.time() > deadline:
            return state, archived
        await asyncio.sleep(0.02)
