"""The asyncio facade: :class:`AsyncMemoryOS`, the methods of
:class:`~memoryos_actors.api.MemoryAPI` as coroutines (:class:`~memoryos_actors.api.
AsyncMemoryAPI`), run on a thread pool so no call blocks the event loop. The coroutines
are generated from the protocol (``cog -r memoryos_actors/aio.py``), ``close`` and the
streaming ``chat_stream`` (an async iterator, not a coroutine) excepted.
"""

from __future__ import annotations

import asyncio
import functools
import os
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

from .chat_streams import AsyncChatStream
from .clock import Clock
from .config import MemoryConfig
from .directory import UserPhase
from .memories import ArchivedMemories, Memory, MemoryEvent, MemoryList
from .messages import AgentProfile, MemoryContext, UserProfile
from .reports import ChatReply, ForgetReport, RepairReport, UserState

if TYPE_CHECKING:
    from .cluster import ClusterMemoryOS, RayCluster
    from .system import MemoryOS

T = TypeVar("T")
P = ParamSpec("P")

__all__ = ["AsyncMemoryOS"]


class AsyncMemoryOS:
    """The same API as :class:`MemoryOS`, as coroutines that never block the event loop
    (:class:`~memoryos_actors.api.AsyncMemoryAPI`).

    Every call runs the synchronous method in a bounded thread pool
    (``asyncio.to_thread``-style, with its own executor sized by ``max_inflight_total``,
    at most 64 threads). ``AsyncMemoryOS(sync)`` wraps a system opened elsewhere: then
    :meth:`detach` (not :meth:`close`) stops the wrapper and leaves ``sync`` open.
    """

    def __init__(self, sync: MemoryOS | ClusterMemoryOS) -> None:
        self.sync = sync
        self._pool = ThreadPoolExecutor(
            max_workers=min(64, sync.config.max_inflight_total), thread_name_prefix="memoryos-aio"
        )

    @classmethod
    async def open(
        cls,
        data_dir: str | os.PathLike[str],
        config: MemoryConfig | None = None,
        *,
        clock: Clock | None = None,
        cluster: RayCluster | None = None,
        read_only: bool = False,
    ) -> AsyncMemoryOS:
        """Start a memory system (see :meth:`MemoryOS.open`) without blocking the loop."""
        from .system import MemoryOS  # loaded on first open: importing aio stays light

        loop = asyncio.get_running_loop()
        sync = await loop.run_in_executor(
            None,
            functools.partial(
                MemoryOS.open, data_dir, config, clock=clock, cluster=cluster, read_only=read_only
            ),
        )
        return cls(sync)

    async def _run(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, functools.partial(fn, *args, **kwargs))

    async def __aenter__(self) -> AsyncMemoryOS:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # The methods of MemoryAPI as coroutines, generated (`cog -r memoryos_actors/aio.py`;
    # a test fails when this is not what that generates now).
    # [[[cog
    # import cog
    # from memoryos_actors.api import API_METHODS, twin_methods
    # cog.out(twin_methods(lambda name, call: (
    #     f'"""See :meth:`MemoryOS.{name}`."""\n'
    #     f"        return await self._run(self.sync.{name}{call})"
    # ), [name for name in API_METHODS if name != "close"]))
    # ]]]
    async def add_turn(
        self,
        user_id: str,
        query: str,
        response: str,
        timestamp: float | None = None,
        assistant_id: str = "default",
        *,
        turn_key: str | None = None,
    ) -> str:
        """See :meth:`MemoryOS.add_turn`."""
        return await self._run(
            self.sync.add_turn, user_id, query, response, timestamp, assistant_id, turn_key=turn_key
        )

    async def remember(
        self, user_id: str, text: str, *, metadata: Mapping[str, Any] | None = None
    ) -> str:
        """See :meth:`MemoryOS.remember`."""
        return await self._run(self.sync.remember, user_id, text, metadata=metadata)

    async def retrieve(
        self,
        user_id: str,
        query: str,
        assistant_id: str = "default",
        timestamp: float | None = None,
    ) -> MemoryContext:
        """See :meth:`MemoryOS.retrieve`."""
        return await self._run(self.sync.retrieve, user_id, query, assistant_id, timestamp)

    async def chat(
        self, user_id: str, query: str, assistant_id: str = "default", *, fallback: bool = True
    ) -> str:
        """See :meth:`MemoryOS.chat`."""
        return await self._run(self.sync.chat, user_id, query, assistant_id, fallback=fallback)

    async def chat_reply(
        self, user_id: str, query: str, assistant_id: str = "default", *, fallback: bool = True
    ) -> ChatReply:
        """See :meth:`MemoryOS.chat_reply`."""
        return await self._run(
            self.sync.chat_reply, user_id, query, assistant_id, fallback=fallback
        )

    async def set_user_profile(self, user_id: str, profile: UserProfile) -> None:
        """See :meth:`MemoryOS.set_user_profile`."""
        return await self._run(self.sync.set_user_profile, user_id, profile)

    async def set_agent_profile(
        self, user_id: str, profile: AgentProfile, assistant_id: str = "default"
    ) -> None:
        """See :meth:`MemoryOS.set_agent_profile`."""
        return await self._run(self.sync.set_agent_profile, user_id, profile, assistant_id)

    async def stats(self, user_id: str | None = None) -> dict[str, Any]:
        """See :meth:`MemoryOS.stats`."""
        return await self._run(self.sync.stats, user_id)

    async def users(self) -> list[str]:
        """See :meth:`MemoryOS.users`."""
        return await self._run(self.sync.users)

    async def active_users(self) -> list[str]:
        """See :meth:`MemoryOS.active_users`."""
        return await self._run(self.sync.active_users)

    async def user_state(self, user_id: str) -> UserState:
        """See :meth:`MemoryOS.user_state`."""
        return await self._run(self.sync.user_state, user_id)

    async def tree(self) -> str:
        """See :meth:`MemoryOS.tree`."""
        return await self._run(self.sync.tree)

    async def archive(
        self, user_id: str, query: str | None = None, limit: int | None = None
    ) -> list[dict[str, Any]]:
        """See :meth:`MemoryOS.archive`."""
        return await self._run(self.sync.archive, user_id, query, limit)

    async def stored_page_ids(self, user_id: str) -> list[str]:
        """See :meth:`MemoryOS.stored_page_ids`."""
        return await self._run(self.sync.stored_page_ids, user_id)

    async def flush(self, timeout: float = 300.0, *, user_id: str | None = None) -> None:
        """See :meth:`MemoryOS.flush`."""
        return await self._run(self.sync.flush, timeout, user_id=user_id)

    async def export_user(self, user_id: str, path: str | os.PathLike[str]) -> Path:
        """See :meth:`MemoryOS.export_user`."""
        return await self._run(self.sync.export_user, user_id, path)

    async def import_user(self, path: str | os.PathLike[str], user_id: str | None = None) -> str:
        """See :meth:`MemoryOS.import_user`."""
        return await self._run(self.sync.import_user, path, user_id)

    async def forget_user(self, user_id: str) -> ForgetReport:
        """See :meth:`MemoryOS.forget_user`."""
        return await self._run(self.sync.forget_user, user_id)

    async def repair_user(self, user_id: str) -> RepairReport:
        """See :meth:`MemoryOS.repair_user`."""
        return await self._run(self.sync.repair_user, user_id)

    async def passivate(self, user_id: str) -> bool:
        """See :meth:`MemoryOS.passivate`."""
        return await self._run(self.sync.passivate, user_id)

    async def user_phase(self, user_id: str) -> UserPhase:
        """See :meth:`MemoryOS.user_phase`."""
        return await self._run(self.sync.user_phase, user_id)

    async def user_epoch(self, user_id: str) -> int:
        """See :meth:`MemoryOS.user_epoch`."""
        return await self._run(self.sync.user_epoch, user_id)

    async def kill_actor(
        self, user_id: str, tier: str, reason: str = "kill_actor", timeout: float = 10.0
    ) -> bool:
        """See :meth:`MemoryOS.kill_actor`."""
        return await self._run(self.sync.kill_actor, user_id, tier, reason, timeout)

    async def memories(
        self,
        user_id: str,
        kinds: Iterable[str] | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> MemoryList:
        """See :meth:`MemoryOS.memories`."""
        return await self._run(self.sync.memories, user_id, kinds, limit, cursor)

    async def archived_memories(
        self,
        user_id: str,
        kind: str = "page",
        query: str | None = None,
        offset: int = 0,
        limit: int = 50,
        per_day: bool = False,
    ) -> ArchivedMemories:
        """See :meth:`MemoryOS.archived_memories`."""
        return await self._run(
            self.sync.archived_memories, user_id, kind, query, offset, limit, per_day
        )

    async def get_memory(self, user_id: str, memory_id: str) -> Memory:
        """See :meth:`MemoryOS.get_memory`."""
        return await self._run(self.sync.get_memory, user_id, memory_id)

    async def delete_memory(self, user_id: str, memory_id: str) -> MemoryEvent:
        """See :meth:`MemoryOS.delete_memory`."""
        return await self._run(self.sync.delete_memory, user_id, memory_id)

    async def correct_memory(
        self, user_id: str, memory_id: str, value: str, evidence: str = ""
    ) -> MemoryEvent:
        """See :meth:`MemoryOS.correct_memory`."""
        return await self._run(self.sync.correct_memory, user_id, memory_id, value, evidence)

    async def memory_history(self, user_id: str, memory_id: str) -> list[MemoryEvent]:
        """See :meth:`MemoryOS.memory_history`."""
        return await self._run(self.sync.memory_history, user_id, memory_id)

    # [[[end]]]

    def chat_stream(
        self, user_id: str, query: str, assistant_id: str = "default", *, fallback: bool = True
    ) -> AsyncChatStream:
        """See :meth:`MemoryOS.chat_stream`: the same pieces as an async iterator, each
        waited for on this wrapper's thread pool (``aclose()`` abandons it)."""
        stream = self.sync.chat_stream(user_id, query, assistant_id, fallback=fallback)
        return AsyncChatStream(stream, self._run)

    async def close(self, timeout: float = 60.0) -> None:
        """See :meth:`MemoryOS.close`."""
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, self.sync.close, timeout)
        self._pool.shutdown(wait=True)

    async def detach(self) -> None:
        """Stop this wrapper's threads (waiting for the calls in flight) and leave the
        wrapped synchronous system open, for its owner to close. For a wrapper made with
        ``AsyncMemoryOS(sync)`` around a system its caller keeps; after it, calls of this
        wrapper raise ``RuntimeError``."""
        await asyncio.to_thread(self._pool.shutdown, True)
