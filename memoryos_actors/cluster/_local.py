"""Shards in this process: the sharded facade without an engine.

A sharded data directory (see :mod:`~memoryos_actors.cluster._placement`) can be opened
without Ray: :class:`InProcessCluster` runs one :class:`ShardServer` per shard inside the
calling process, each with its own supervision tree over its own ``shard-NNNN``
directory. The command line uses it by default on a sharded data directory (``--ray``
starts Ray shards instead). Nothing restarts a shard here: the shard's own supervisor
restarts its actors, and a failure of the whole shard is the process's failure.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memoryos_actors.clock import Clock
from memoryos_actors.config import MemoryConfig
from memoryos_actors.errors import ConfigError, InvalidInput

from ._backend import ShardHost
from ._facade import ClusterMemoryOS, open_cluster
from ._placement import MAX_SHARDS, read_layout
from ._routing import ClusterSettings
from ._shard import ShardServer

if TYPE_CHECKING:
    from memoryos_actors.system import ClusterEngine, MemoryOS


__all__ = ["InProcessCluster", "InProcessShardHost", "open_data_dir"]


class InProcessShardHost(ShardHost):
    """Runs each shard as a :class:`ShardServer` object in this process; a call runs in
    the caller's thread when its result is asked for."""

    def __init__(self, dirs: list[str], config: MemoryConfig) -> None:
        self.shards = len(dirs)
        self._servers = [
            ShardServer(n, d, config, lock_wait_seconds=0.0) for n, d in enumerate(dirs)
        ]

    def submit(self, shard: int, method: str, *args: Any) -> Any:
        return (shard, method, args)

    def result(self, handle: Any, timeout: float) -> Any:
        shard, method, args = handle
        return getattr(self._servers[shard], method)(*args)

    def close(self) -> None:
        for server in self._servers:
            server._do_close()


@dataclass(frozen=True)
class InProcessCluster:
    """Open a sharded data directory with its shards in this process (pass to
    ``MemoryOS.open(cluster=)``).

    Attributes:
        shards: the shard count; it must be the data directory's (see
            :func:`~memoryos_actors.cluster.rebalance_shards`).
        call_timeout_seconds: how long one call may take before ``Overloaded``, seconds.
    """

    shards: int = 2
    call_timeout_seconds: float = 120.0

    def __post_init__(self) -> None:
        if (
            isinstance(self.shards, bool)
            or not isinstance(self.shards, int)
            or not 1 <= self.shards <= MAX_SHARDS
        ):
            raise InvalidInput(f"shards must be an int in [1, {MAX_SHARDS}], got {self.shards!r}")

    def open_facade(self, data_dir: Path, config: MemoryConfig, clock: Clock) -> ClusterMemoryOS:
        """Open the shards over ``data_dir`` and return the facade (used by
        ``MemoryOS.open``)."""
        # No engine restarts a shard here, so there is nothing to retry for.
        settings = ClusterSettings(
            retry_seconds=0.001, call_timeout_seconds=self.call_timeout_seconds
        )
        return open_cluster(
            data_dir,
            config,
            clock,
            self.shards,
            settings,
            lambda dirs: InProcessShardHost(dirs, config),
        )


def open_data_dir(
    data_dir: str | os.PathLike[str],
    config: MemoryConfig | None = None,
    *,
    ray: bool | str = False,
    shards: int | None = None,
    shared: bool = False,
) -> MemoryOS | ClusterMemoryOS:
    """Open ``data_dir`` whatever its kind: an in-process data directory as
    :meth:`MemoryOS.open <memoryos_actors.MemoryOS.open>` does, a sharded one (it has
    ``shards.json``) with its recorded shard count, in this process or, with ``ray``, as
    Ray shards (:class:`~memoryos_actors.cluster.RayCluster`).

    Args:
        ray: ``False``: shards in this process; ``True``: Ray shards on the Ray this
            process is connected to, else a local one; a string: the address of the Ray
            cluster to join (``"auto"``, ``"host:port"``).
        shards: the shard count the caller expects: an empty (or missing) data directory
            becomes a sharded one with this many shards; a sharded one with another count
            is refused with :class:`~memoryos_actors.errors.ConfigError` (run
            ``memoryos rebalance``). ``None``: whatever the directory is.
        shared: with ``ray``, open as one of several front doors of the same shards
            (``RayCluster(shared=True)``).
    """
    from memoryos_actors.system import MemoryOS

    layout = read_layout(data_dir) if Path(data_dir).is_dir() else None
    if shards is not None:
        if isinstance(shards, bool) or not isinstance(shards, int) or not 1 <= shards:
            raise InvalidInput(f"shards must be an int >= 1, got {shards!r}")
        if layout is not None and layout.shards != shards:
            raise ConfigError(
                f"{data_dir} holds {layout.shards} shards, not {shards}; run `memoryos "
                f"rebalance --shards {shards}` first (with every server of it stopped)"
            )
        count = shards
    elif layout is None:
        return MemoryOS.open(data_dir, config)
    else:
        count = layout.shards
    if ray is not False:
        from ._ray import RayCluster

        address = None if ray is True else str(ray)
        cluster: ClusterEngine = RayCluster(address=address, shards=count, shared=shared)
    else:
        cluster = InProcessCluster(shards=count)
    return MemoryOS.open(data_dir, config, cluster=cluster)
