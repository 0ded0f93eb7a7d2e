"""Scale-out: the same memory system spread over shard processes (and machines).

::

    from memoryos_actors import MemoryOS
    from memoryos_actors.cluster import RayCluster

    with MemoryOS.open("data", cluster=RayCluster(address="auto", shards=4)) as mem:
        mem.add_turn("alice", "hi", "hello")  # the same API as the in-process system

Users are placed on shards by a stable hash of their id (:func:`shard_of`); each shard is
one process running the in-process system over its own data directory under the data
directory; :func:`rebalance_shards` changes the shard count and :func:`unshard` makes it
an in-process data directory again. :class:`InProcessCluster` opens a sharded data
directory with its shards in the calling process. ``RayCluster(shared=True)`` opens one
of several front doors over the same detached Ray shards (:mod:`.doors`;
:func:`live_doors` counts them, :func:`stop_shards` closes the shards). Names are loaded
on first use: importing this package does not import Ray.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_getattr

_EXPORTS: dict[str, str] = {
    "ClusterMemoryOS": "memoryos_actors.cluster._facade",
    "InProcessCluster": "memoryos_actors.cluster._local",
    "RayCluster": "memoryos_actors.cluster._ray",
    "open_data_dir": "memoryos_actors.cluster._local",
    "RebalanceReport": "memoryos_actors.cluster._placement",
    "ShardInfo": "memoryos_actors.cluster._backend",
    "live_doors": "memoryos_actors.cluster.doors",
    "shard_namespace": "memoryos_actors.cluster._placement",
    "shared_shards": "memoryos_actors.cluster._shared",
    "stop_shards": "memoryos_actors.cluster._shared",
    "rebalance_shards": "memoryos_actors.cluster._placement",
    "read_layout": "memoryos_actors.cluster._placement",
    "shard_dir": "memoryos_actors.cluster._placement",
    "shard_of": "memoryos_actors.cluster._placement",
    "unshard": "memoryos_actors.cluster._placement",
}

# Written out (tools read it without importing the package); a test checks it names
# exactly the lazily loaded names above.
__all__ = [
    "ClusterMemoryOS",
    "InProcessCluster",
    "RayCluster",
    "RebalanceReport",
    "ShardInfo",
    "live_doors",
    "open_data_dir",
    "read_layout",
    "rebalance_shards",
    "shard_dir",
    "shard_namespace",
    "shard_of",
    "shared_shards",
    "stop_shards",
    "unshard",
]

if TYPE_CHECKING:
    from ._backend import ShardInfo
    from ._facade import ClusterMemoryOS
    from ._local import InProcessCluster, open_data_dir
    from ._placement import (
        RebalanceReport,
        read_layout,
        rebalance_shards,
        shard_dir,
        shard_namespace,
        shard_of,
        unshard,
    )
    from ._ray import RayCluster
    from ._shared import shared_shards, stop_shards
    from .doors import live_doors


__getattr__ = lazy_getattr(__name__, _EXPORTS, globals())


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])
