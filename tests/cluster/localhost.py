"""A shard host that keeps its shards in the test's own process, with injectable deaths.

It runs the same :class:`ShardServer` the Ray actors run, so the sharded facade's routing,
merging, error translation and retry rules are tested without starting processes. A death
is simulated by stopping the shard's memory system and starting a new one over the same
directory, as an engine restarting the shard process would.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from memoryos_actors.clock import Clock
from memoryos_actors.cluster._backend import ShardDown, ShardHost
from memoryos_actors.cluster._facade import ClusterMemoryOS, open_cluster
from memoryos_actors.cluster._routing import ClusterSettings
from memoryos_actors.cluster._shard import ShardServer
from memoryos_actors.config import MemoryConfig


class LocalShardHost(ShardHost):
    """Shards as :class:`ShardServer` objects in this process."""

    def __init__(self, dirs: list[str], config: MemoryConfig) -> None:
        self.shards = len(dirs)
        self.dirs = dirs
        self.config = config
        self.servers = [ShardServer(n, d, config) for n, d in enumerate(dirs)]
        #: shard -> "before" or "after": the shard's next ``call`` dies before running
        #: (nothing happened) or after running (the work is done, the answer is lost).
        self.deaths: dict[int, list[str]] = {}
        self.restarts = [0] * self.shards
        #: shard -> remaining restarts before it stays dead (None: always restarted).
        self.down_for: dict[int, int] = {}

    def die(self, shard: int, when: str, times: int = 1) -> None:
        """Make shard ``shard``'s next ``times`` calls die ``when`` ("before"/"after")."""
        self.deaths.setdefault(shard, []).extend([when] * times)

    def _restart(self, shard: int) -> None:
        self.servers[shard]._do_close()
        self.restarts[shard] += 1
        self.servers[shard] = ShardServer(shard, self.dirs[shard], self.config)

    def submit(self, shard: int, method: str, *args: Any) -> Any:
        return (shard, method, args)

    def result(self, handle: Any, timeout: float) -> Any:
        shard, method, args = handle
        pending = self.deaths.get(shard) or []
        when = pending.pop(0) if (pending and method == "call") else None
        if when == "before":
            self._restart(shard)
            raise ShardDown("injected: the shard died before running the call")
        value = getattr(self.servers[shard], method)(*args)
        if when == "after":
            self._restart(shard)
            raise ShardDown("injected: the shard died before answering")
        return value

    def close(self) -> None:
        for server in self.servers:
            server._do_close()


class LocalCluster:
    """Passed as ``MemoryOS.open(cluster=...)``: shards in this process (tests only)."""

    def __init__(self, shards: int = 2, retry_seconds: float = 5.0, shared: bool = False) -> None:
        self.shards = shards
        #: Open as a front door (no exclusive lock on the data directory), as Ray's
        #: shared shards do; the shards still live in this process.
        self.shared = shared
        self.settings = ClusterSettings(retry_seconds=retry_seconds, call_timeout_seconds=60.0)
        self.host: LocalShardHost | None = None

    def open_facade(self, data_dir: Path, config: MemoryConfig, clock: Clock) -> ClusterMemoryOS:
        def make(dirs: list[str]) -> LocalShardHost:
            self.host = LocalShardHost(dirs, config)
            return self.host

        return open_cluster(
            data_dir, config, clock, self.shards, self.settings, make, shared=self.shared
        )
