"""Shards as Ray actors: one process per shard, restarted by Ray when it dies.

``ray`` is imported only when a :class:`RayCluster` is opened; it is the ``ray`` extra
(``pip install ".[ray]"`` in the source checkout, see :func:`~memoryos_actors.prerequisites.install_hint`).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memoryos_actors.clock import Clock
from memoryos_actors.config import MemoryConfig
from memoryos_actors.errors import ActorCrashed, ClusterUnreachable, InvalidInput, MemoryOSError
from memoryos_actors.prerequisites import install_hint

from ._backend import ShardDown, ShardHost
from ._facade import ClusterMemoryOS, open_cluster
from ._placement import MAX_SHARDS, read_layout, shard_namespace
from ._routing import ClusterSettings
from ._shard import ShardServer

__all__ = [
    "CONNECT_TIMEOUT_S",
    "RayCluster",
    "RayShardHost",
    "check_reachable",
    "join_ray",
    "shard_actor_name",
    "started_ray_head",
]

CONNECT_TIMEOUT_S = 5.0
"""How long joining a Ray cluster waits for its address to answer a TCP connection before
:class:`~memoryos_actors.errors.ClusterUnreachable` (seconds)."""


@contextlib.contextmanager
def _keep_sigterm_handler() -> Iterator[None]:
    """Put back the SIGTERM handler ``ray.init`` replaces with its own (which exits at
    once): a server's stop signal must close the memory system first."""
    main = threading.current_thread() is threading.main_thread()
    before = signal.getsignal(signal.SIGTERM) if main else None
    try:
        yield
    finally:
        if main and before is not None:
            signal.signal(signal.SIGTERM, before)


def shard_actor_name(shard: int, generation: int) -> str:
    """The Ray actor name of shared shard number ``shard`` of layout ``generation`` (in
    its namespace, which names the generation too)."""
    return f"shard-{shard:04d}-g{generation}"


def started_ray_head(ray: Any) -> bool:
    """Whether this process started the Ray it is connected to (rather than joined one)."""
    try:
        node = ray._private.worker._global_node
        return bool(node is not None and node.head)
    except AttributeError:
        return False


def _import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise InvalidInput(
            f"RayCluster needs Ray (the 'ray' extra): {install_hint('ray')}"
        ) from None
    return ray


def _gcs_address(address: str | None) -> tuple[str, int] | None:
    """The ``(host, port)`` that ``ray.init(address=address)`` joins, or None when it starts
    a Ray of its own, uses Ray Client (``ray://``), or the address cannot be worked out here
    (Ray then reports it itself). ``RAY_ADDRESS`` wins, as in Ray; ``"auto"`` is the
    cluster Ray recorded as the latest one started on this machine."""
    if address is None and not os.environ.get("RAY_ADDRESS"):
        return None  # a Ray of this process's own
    try:
        from ray._private.services import get_ray_address_from_environment

        found = get_ray_address_from_environment(address or "auto", None)
    except (ImportError, ValueError, OSError):  # nothing recorded, another Ray: Ray says
        return None
    if not isinstance(found, str) or found.startswith("ray://") or ":" not in found:
        return None
    host, _, port = found.rpartition(":")
    try:
        return host.strip("[]"), int(port)
    except ValueError:
        return None


def check_reachable(address: str | None, timeout: float = CONNECT_TIMEOUT_S) -> None:
    """Raise :class:`~memoryos_actors.errors.ClusterUnreachable` unless the Ray cluster
    ``address`` names (``"auto"`` or ``"host:port"``; ``RAY_ADDRESS`` when set) accepts a
    TCP connection within ``timeout`` seconds. ``ray.init`` on an address nothing answers
    at keeps retrying for minutes (more than five with Ray 2.60) before it fails: a server
    started with a wrong address must say so at once, not hang. Nothing is checked when
    Ray would start a cluster of its own."""
    target = _gcs_address(address)
    if target is None:
        return
    host, port = target
    try:
        with socket.create_connection((host, port), timeout=timeout):
            pass
    except OSError as exc:
        reason = "timed out" if isinstance(exc, TimeoutError) else exc.strerror or str(exc)
        raise ClusterUnreachable(
            f"cannot reach the Ray cluster at {address or f'{host}:{port}'}: nothing "
            f"answered at {host}:{port} within {timeout:g} s ({reason}); is a Ray head "
            "running there (ray start --head)?"
        ) from None


def join_ray(ray: Any, address: str | None, **init_kwargs: Any) -> None:
    """``ray.init(address=address, ...)`` (no dashboard unless asked), after
    :func:`check_reachable` and keeping this process's SIGTERM handler: the one way this
    package starts or joins Ray."""
    check_reachable(address)
    with _keep_sigterm_handler():
        ray.init(address=address, **{"include_dashboard": False, **init_kwargs})


def _positive(value: object, what: str) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise InvalidInput(f"{what} must be a positive number, got {value!r}")


@dataclass(frozen=True)
class RayCluster:
    """Run the memory system as ``shards`` Ray actors (pass to ``MemoryOS.open(cluster=)``).

    Each shard is one Ray actor, that is one process, running the in-process memory system
    for the users :func:`~memoryos_actors.cluster.shard_of` places on it, over
    ``<data_dir>/shard-NNNN/``. Every node that may host a shard must reach the data
    directory at the same path (a shared file system), and so must the process that opens
    the facade (it keeps the layout file and the lock there).

    Attributes:
        address: the Ray cluster to join (``"auto"``, ``"host:port"``, ``"ray://..."``).
            ``None``: use the Ray this process is already connected to, else start a
            local one (stopped again by ``close``).
        shards: the number of shards (processes); fixed for a data directory until
            :func:`~memoryos_actors.cluster.rebalance_shards` changes it.
        namespace: the Ray namespace for :func:`ray.init` when this object starts or joins
            Ray.
        max_restarts: how often Ray restarts a shard that died (-1: always).
        max_concurrency: calls one shard runs at once (threads of the Ray actor).
        num_cpus: CPUs Ray reserves for each shard; ``None`` keeps Ray's default for
            actors (none reserved while running, so more shards than CPUs still start).
        scheduling_strategy: Ray's scheduling strategy for the shards; ``"SPREAD"`` puts
            them on as many nodes as there are.
        actor_options: more ``.options()`` for the shard actors, or a function of the shard
            number returning them (to pin shards to nodes, say).
        init_kwargs: more keyword arguments for :func:`ray.init`.
        retry_seconds: how long a call that is safe to repeat is sent again while Ray
            restarts a dead shard, seconds.
        call_timeout_seconds: how long a call waits for its shard, seconds.
        lock_wait_seconds: how long a restarted shard waits for the lock of its data
            directory while the process it replaces is still exiting, seconds.
        shared: open the facade as one of several front doors of the same shards: each
            shard is a named, detached Ray actor in a namespace derived from the data
            directory's identity and layout generation
            (:func:`~memoryos_actors.cluster.shard_namespace`), started by the first door
            and found by the others; the facade takes no exclusive lock (see
            :mod:`~memoryos_actors.cluster.doors`) and its ``close`` leaves the shards
            running, unless this process started Ray itself (then they close with it).
            :func:`~memoryos_actors.cluster.stop_shards` closes them.
    """

    address: str | None = None
    shards: int = 2
    namespace: str | None = None
    max_restarts: int = -1
    max_concurrency: int = 32
    num_cpus: float | None = None
    scheduling_strategy: Any = "SPREAD"
    actor_options: Mapping[str, Any] | Callable[[int], Mapping[str, Any]] | None = None
    init_kwargs: Mapping[str, Any] = field(default_factory=dict)
    retry_seconds: float = 60.0
    call_timeout_seconds: float = 120.0
    lock_wait_seconds: float = 30.0
    shared: bool = False

    def __post_init__(self) -> None:
        if (
            isinstance(self.shards, bool)
            or not isinstance(self.shards, int)
            or not 1 <= self.shards <= MAX_SHARDS
        ):
            raise InvalidInput(f"shards must be an int in [1, {MAX_SHARDS}], got {self.shards!r}")
        if (
            isinstance(self.max_restarts, bool)
            or not isinstance(self.max_restarts, int)
            or (self.max_restarts < -1)
        ):
            raise InvalidInput(f"max_restarts must be an int >= -1, got {self.max_restarts!r}")
        if (
            isinstance(self.max_concurrency, bool)
            or not isinstance(self.max_concurrency, int)
            or self.max_concurrency < 1
        ):
            raise InvalidInput(f"max_concurrency must be an int >= 1, got {self.max_concurrency!r}")
        for name in ("retry_seconds", "call_timeout_seconds", "lock_wait_seconds"):
            _positive(getattr(self, name), name)
        if self.num_cpus is not None and (
            isinstance(self.num_cpus, bool)
            or not isinstance(self.num_cpus, (int, float))
            or self.num_cpus < 0
        ):
            raise InvalidInput(f"num_cpus must be None or >= 0, got {self.num_cpus!r}")

    def open_facade(self, data_dir: Path, config: MemoryConfig, clock: Clock) -> ClusterMemoryOS:
        """Start the shards over ``data_dir`` and return the facade (used by
        ``MemoryOS.open``)."""
        settings = ClusterSettings(self.retry_seconds, self.call_timeout_seconds)

        def make_host(dirs: list[str]) -> RayShardHost:
            namespace, generation = None, 1
            if self.shared:
                layout = read_layout(data_dir)
                assert layout is not None  # checked by open_cluster before this runs
                namespace, generation = shard_namespace(data_dir, layout), layout.generation
            return RayShardHost(self, dirs, config, namespace, generation)

        return open_cluster(
            data_dir, config, clock, self.shards, settings, make_host, shared=self.shared
        )


class RayShardHost(ShardHost):
    """Starts one Ray actor per shard and carries calls to them."""

    def __init__(
        self,
        cluster: RayCluster,
        dirs: list[str],
        config: MemoryConfig,
        shared_namespace: str | None = None,
        generation: int = 1,
    ) -> None:
        ray = _import_ray()
        self._ray = ray
        self._started_ray = False
        if not ray.is_initialized():
            join_ray(ray, cluster.address, namespace=cluster.namespace, **cluster.init_kwargs)
            self._started_ray = True
        self.shards = len(dirs)
        # Shared shards outlive this facade, unless the Ray they run on is this process's
        # own (it stops with the facade: close them properly first).
        self.owns_shards = shared_namespace is None or (self._started_ray and started_ray_head(ray))
        remote = ray.remote(ShardServer)
        self._actors: list[Any] = []
        try:
            for n, path in enumerate(dirs):
                opts: dict[str, Any] = {
                    "max_restarts": cluster.max_restarts,
                    # Never let Ray repeat a call on its own: the facade decides what is
                    # safe to send again (add_turn with its turn key, reads).
                    "max_task_retries": 0,
                    "max_concurrency": cluster.max_concurrency,
                    "scheduling_strategy": cluster.scheduling_strategy,
                }
                if cluster.num_cpus is not None:
                    opts["num_cpus"] = cluster.num_cpus
                if shared_namespace is not None:
                    # The first front door starts the shard; the others find it.
                    opts.update(
                        name=shard_actor_name(n, generation),
                        namespace=shared_namespace,
                        lifetime="detached",
                        get_if_exists=True,
                    )
                extra = cluster.actor_options
                if callable(extra):
                    extra = extra(n)
                opts.update(extra or {})
                self._actors.append(
                    remote.options(**opts).remote(n, path, config, cluster.lock_wait_seconds)
                )
        except BaseException:
            self.close()
            raise

    def submit(self, shard: int, method: str, *args: Any) -> Any:
        try:
            return getattr(self._actors[shard], method).remote(*args)
        except self._ray.exceptions.RayActorError as exc:
            raise ShardDown(type(exc).__name__) from None

    def result(self, handle: Any, timeout: float) -> Any:
        exc_mod = self._ray.exceptions
        try:
            return self._ray.get(handle, timeout=timeout)
        except exc_mod.GetTimeoutError:
            raise TimeoutError(f"no answer within {timeout} s") from None
        except (
            exc_mod.RayActorError,
            exc_mod.WorkerCrashedError,
            exc_mod.ObjectLostError,
            exc_mod.LocalRayletDiedError,
            exc_mod.NodeDiedError,
        ) as exc:
            raise ShardDown(type(exc).__name__) from None
        except exc_mod.RayTaskError as exc:
            cause = getattr(exc, "cause", None)
            if isinstance(cause, MemoryOSError):
                raise cause from None
            raise ActorCrashed(f"a shard failed unexpectedly: {cause!r}") from None
        except exc_mod.RayError as exc:
            # Any other failure of Ray itself (its system, object store or memory monitor)
            # is the shard's being out of reach: retried where safe, else 503, never a 500.
            raise ShardDown(type(exc).__name__) from None

    def close(self) -> None:
        ray = self._ray
        for actor in self._actors if self.owns_shards else ():
            try:
                ray.kill(actor, no_restart=True)
            except Exception:  # noqa: BLE001, S110 - already gone
                pass
        self._actors = []
        if self._started_ray:
            self._started_ray = False
            ray.shutdown()
