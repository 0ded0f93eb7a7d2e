"""Scale-out: the same memory system spread over shard processes (and machines).

::

    from memoryos_actors import MemoryOS
    from memoryos_actors.cluster import RayCluster

    with MemoryOS.open("data", cluster=RayCluster(address="auto", shards=4)) as mem:
        mem.add_turn("alice", "hi", "hello")  # the same API as the in-process system

Users are placed on shards by a stable hash of their id (:func:`shard_of`); each shard is
one process running the in-process system over its own data directory under the data
directory; :func:`rebalance_shards` changes the shard count. Names are loaded on first
use: importing this package does not import Ray.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_getattr

_EXPORTS: dict[str, str] = {
    "ClusterMemoryOS": "memoryos_actors.cluster._facade",
    "RayCluster": "memoryos_actors.cluster._ray",
    "RebalanceReport": "memoryos_actors.cluster._placement",
    "ShardInfo": "memoryos_actors.cluster._backend",
    "rebalance_shards": "memoryos_actors.cluster._placement",
    "read_layout": "memoryos_actors.cluster._placement",
    "shard_dir": "memoryos_actors.cluster._placement",
    "shard_of": "memoryos_actors.cluster._placement",
}

__all__ = sorted(_EXPORTS)

if TYPE_CHECKING:
    from ._backend import ShardInfo
    from ._facade import ClusterMemoryOS
    from ._placement import RebalanceReport, read_layout, rebalance_shards, shard_dir, shard_of
    from ._ray import RayCluster


__getattr__ = lazy_getattr(__name__, _EXPORTS, globals())


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])
