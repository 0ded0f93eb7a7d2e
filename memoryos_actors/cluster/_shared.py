"""Shared Ray shards seen from outside any front door: list them, stop them.

Shared shards (:class:`~memoryos_actors.cluster.RayCluster` ``(shared=True)``, started by
``memoryos serve --ray``) are detached Ray actors: they outlive the front doors that
started them, so that doors come and go while the shards keep their users. This module
finds them by name (the data directory's layout gives the namespace) and closes them
gracefully: each shard closes its memory system (snapshots, WAL synced), then it is
killed without restart.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from memoryos_actors.errors import ConfigError, DataDirLocked, InvalidInput, StorageError

from ._backend import ShardInfo
from ._placement import read_layout, shard_namespace
from ._ray import _import_ray, join_ray, shard_actor_name
from .doors import describe_doors, read_doors

__all__ = ["shared_shards", "stop_shards"]


def _connect(address: str | None) -> tuple[Any, bool]:
    ray = _import_ray()
    if ray.is_initialized():
        return ray, False
    try:
        join_ray(ray, address or "auto", log_to_driver=False)
    except ConnectionError as exc:
        raise StorageError(f"cannot reach the Ray cluster at {address or 'auto'}: {exc}") from None
    return ray, True


def _names(data_dir: str | os.PathLike[str]) -> tuple[str, list[str]]:
    """The Ray namespace and actor names of ``data_dir``'s shared shards (read before
    connecting to Ray: a directory that is not sharded fails at once)."""
    root = Path(data_dir).resolve()
    layout = read_layout(root)
    if layout is None:
        raise ConfigError(f"{root} is not a sharded data directory (it has no shards.json)")
    names = [shard_actor_name(n, layout.generation) for n in range(layout.shards)]
    return shard_namespace(root, layout), names


def _actors(ray: Any, namespace: str, names: list[str]) -> list[tuple[int, Any]]:
    found = []
    for n, name in enumerate(names):
        try:
            found.append((n, ray.get_actor(name, namespace=namespace)))
        except ValueError:
            continue  # not running
    return found


def shared_shards(
    data_dir: str | os.PathLike[str], address: str | None = None, timeout: float = 30.0
) -> list[ShardInfo]:
    """Where the shared shards of ``data_dir``'s current generation run now, one
    :class:`~memoryos_actors.cluster.ShardInfo` per running shard (none: no shard runs).

    ``address``: the Ray cluster (default: the one this process is connected to, else
    ``"auto"``). ``timeout``: seconds to wait for each shard's answer.
    """
    namespace, names = _names(data_dir)
    ray, connected = _connect(address)
    try:
        out = []
        for n, actor in _actors(ray, namespace, names):
            try:
                info = ray.get(actor.info.remote(), timeout=timeout)
            except Exception as exc:  # noqa: BLE001 - any Ray failure: the shard is not up
                raise StorageError(f"shard {n} did not answer: {type(exc).__name__}") from None
            out.append(ShardInfo.from_info(n, info))
        return out
    finally:
        if connected:
            ray.shutdown()


def stop_shards(
    data_dir: str | os.PathLike[str], address: str | None = None, timeout: float = 60.0
) -> list[int]:
    """Close the shared shards of ``data_dir`` gracefully and return the numbers of the
    shards stopped (empty: none was running).

    Each shard closes its memory system (every active user snapshotted, the WAL synced;
    up to ``timeout`` seconds), then its actor is killed without restart. Refused with
    :class:`~memoryos_actors.errors.DataDirLocked` naming them while any front door of
    ``data_dir`` is alive: stop the doors first. ``address`` as in :func:`shared_shards`.
    """
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
        raise InvalidInput(f"timeout must be a positive number of seconds, got {timeout!r}")
    doors = read_doors(data_dir)
    if doors:
        raise DataDirLocked(
            f"{data_dir} is served by {describe_doors(doors)}; stop them before the shards"
        )
    namespace, names = _names(data_dir)
    ray, connected = _connect(address)
    try:
        stopped = []
        for n, actor in _actors(ray, namespace, names):
            try:
                ray.get(actor.call.remote("close", (), {}), timeout=timeout)
            except Exception:  # noqa: BLE001, S110 - killed below all the same; the WAL has every turn
                pass
            ray.kill(actor, no_restart=True)
            stopped.append(n)
        return stopped
    finally:
        if connected:
            ray.shutdown()
