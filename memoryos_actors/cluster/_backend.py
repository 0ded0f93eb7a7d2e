"""The interface between the sharded facade and an engine that runs shard processes.

The facade (:class:`~memoryos_actors.cluster.ClusterMemoryOS`) knows users, routing,
retries and typed errors; a :class:`ShardHost` knows only how to start ``shards`` copies of
:class:`~memoryos_actors.cluster._shard.ShardServer`, send one of them a call, and wait for
the answer. Ray is one such engine (:mod:`memoryos_actors.cluster._ray`); the tests run the
same facade over shards held in the test's own process.
"""

from __future__ import annotations

import abc
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["ShardDown", "ShardHost", "ShardInfo"]


class ShardDown(Exception):
    """The shard process died or is restarting; the call may or may not have run.

    Internal to the cluster package: the facade retries calls that are safe to repeat and
    turns the rest into :class:`~memoryos_actors.errors.ActorCrashed`.
    """


@dataclass(frozen=True, slots=True)
class ShardInfo:
    """Where a shard runs now.

    Attributes:
        shard: the shard number.
        pid: the process id of the shard process (on its node).
        node_id: the engine's id of the node hosting it ("" when there is no such notion).
        data_dir: the shard's data directory, as the shard process sees it.
        started_at: Unix time (seconds) the current incarnation of the shard started.
        incarnation: 0 for the first start, then counting restarts seen by this facade's
            engine (Ray: the actor was reconstructed).
    """

    shard: int
    pid: int
    node_id: str
    data_dir: str
    started_at: float
    incarnation: int

    @classmethod
    def from_info(cls, shard: int, info: Mapping[str, Any]) -> ShardInfo:
        """From the answer of a shard's ``info`` call (:class:`ShardServer.info
        <memoryos_actors.cluster._shard.ShardServer>`)."""
        return cls(
            shard,
            int(info["pid"]),
            str(info["node_id"]),
            str(info["data_dir"]),
            float(info["started_at"]),
            int(bool(info["restarted"])),
        )


class ShardHost(abc.ABC):
    """Runs ``shards`` shard servers and carries calls to them.

    A call is a method name of :class:`~memoryos_actors.cluster._shard.ShardServer`
    (``"call"`` or ``"info"``) with its arguments. :meth:`submit` must not block on the
    shard's work; :meth:`result` waits for it.
    """

    shards: int

    #: Whether closing the facade closes the shards (``False`` for shared shards, which
    #: outlive their front doors).
    owns_shards: bool = True

    @abc.abstractmethod
    def submit(self, shard: int, method: str, *args: Any) -> Any:
        """Send ``method(*args)`` to shard ``shard``; return a handle for :meth:`result`."""

    @abc.abstractmethod
    def result(self, handle: Any, timeout: float) -> Any:
        """The value the shard returned for ``handle``.

        Raises :class:`ShardDown` when the shard died before answering or is not running
        now, :class:`TimeoutError` after ``timeout`` seconds, and
        :class:`~memoryos_actors.errors.ActorCrashed` for an unexpected error inside the
        shard (a bug: it does not reach the caller as a typed error).
        """

    @abc.abstractmethod
    def close(self) -> None:
        """Stop every shard process (without restarting it) and release the engine."""
