"""Readiness of a server over shards: is every shard answering?

A front door over shards (:class:`~memoryos_actors.cluster.ClusterMemoryOS`) is ready when
each of its shards answers a cheap ``info`` call. ``/readyz`` is polled often (load
balancers, orchestrators), so the answer is cached for :data:`CACHE_SECONDS` and one probe
runs at a time, in a worker thread, never waiting longer than :data:`PROBE_TIMEOUT_S`: a
dead shard makes the door unready within about a second, and a burst of probes costs the
shards one call each per second at most.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

__all__ = ["CACHE_SECONDS", "PROBE_TIMEOUT_S", "ShardReadiness"]

#: How long a probe's answer is reused, seconds.
CACHE_SECONDS = 1.0
#: How long a probe waits for the shards' answers in all, seconds.
PROBE_TIMEOUT_S = 1.0


class ShardReadiness:
    """The cached states of a sharded memory system's shards (one per server).

    Args:
        cache_seconds: how long an answer is reused, seconds.
        timeout: how long one probe waits for the shards, seconds.
    """

    def __init__(
        self, cache_seconds: float = CACHE_SECONDS, timeout: float = PROBE_TIMEOUT_S
    ) -> None:
        self.cache_seconds = cache_seconds
        self.timeout = timeout
        self._states: list[dict[str, Any]] = []
        self._at = -float("inf")
        self._lock: asyncio.Lock | None = None  # made in the server's event loop

    async def states(self, memory: Any) -> list[dict[str, Any]] | None:
        """Each shard's state (see :meth:`ClusterMemoryOS.shard_states
        <memoryos_actors.cluster.ClusterMemoryOS.shard_states>`), at most
        ``cache_seconds`` old; None when ``memory`` is not sharded."""
        from ..cluster import ClusterMemoryOS

        if not isinstance(memory, ClusterMemoryOS):
            return None
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:  # a probe running already: wait for its answer
            if time.monotonic() - self._at >= self.cache_seconds:
                self._states = await asyncio.to_thread(memory.shard_states, self.timeout)
                self._at = time.monotonic()
            return self._states

    @staticmethod
    def unready(states: list[dict[str, Any]]) -> list[int]:
        """The numbers of the shards in ``states`` that are not up."""
        return [row["shard"] for row in states if row["state"] != "up"]
