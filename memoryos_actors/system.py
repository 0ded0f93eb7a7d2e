"""The memory system: the supervision tree, user activation, and the public facade.

::

    root (one_for_one)
    ├── gateway (one_for_one pool of GatewayWorker)
    ├── retrieval (one_for_one pool of RetrievalWorker)
    ├── heat-ticker
    ├── janitor (passivates idle users)
    └── users (DynamicSupervisor)
        └── user:<id> (rest_for_one): stm, mtm, lpm

A user's group is started on the first call for that user (its state loaded from the data
directory) and stopped after a snapshot when idle for ``idle_timeout_seconds`` or when more
than ``max_active_users`` groups are live (least recently used first). Callers notice only
latency. Every call is bounded: at most ``max_inflight_per_user`` calls per user and
``max_inflight_total`` overall are in flight; beyond that a call waits up to
``overload_timeout_seconds`` and then raises :class:`~memoryos_actors.errors.Overloaded`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import math
import os
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, overload

import pykka
import structlog

import supervisor
from supervisor import ChildKind, ChildSpec, Registry, Restart, Strategy, Supervisor

from .actors import persist
from .actors.base import (
    ASSISTANT_PREFIX,
    Backlog,
    GatewayClient,
    Metrics,
    Preload,
    UserEnv,
    actor_names,
    persona_owner,
)
from .actors.lpm import LPMActor
from .actors.mtm import MTMActor
from .actors.protocol import FlushSummaries, GetState, HeatTick, Inspect, Ping, Snapshot
from .actors.stm import STMActor
from .actors.workers import GatewayWorker, HeatTicker, RetrievalWorker
from .clock import Clock, SystemClock
from .config import MemoryConfig
from .directory import UserDirectory, UserEntry, UserPhase
from .errors import (
    ActorCrashed,
    InvalidInput,
    MemoryOSError,
    Overloaded,
    StorageError,
    UnknownUser,
)
from .gateway.service import GatewayService
from .logs import configure_logging
from .messages import (
    AddTurn,
    AgentProfile,
    KBEntry,
    MemoryContext,
    Page,
    Retrieve,
    SegmentRecord,
    SetAgentProfile,
    SetUserProfile,
    TraitLevel,
    UserProfile,
)
from .store.export import read_export, write_export
from .store.lock import DataDirLock
from .store.userstore import UserStore, list_users, user_exists
from .text import keywords

if TYPE_CHECKING:
    from .cluster import ClusterMemoryOS, RayCluster

__all__ = ["AsyncMemoryOS", "ForgetReport", "MemoryOS", "UserState"]

log = structlog.get_logger("memoryos.system")

T = TypeVar("T")

#: Times add_turn asks again, with the same turn key, after the STM actor crashed.
_ADD_TURN_ATTEMPTS = 3

#: Background passivations at once (see ``MemoryOS._keep_headroom``).
_BG_PASSIVATIONS = 2

#: Seconds a single actor request may take before the facade gives up on it.
_ASK_TIMEOUT_S = 120.0
_EXPORT_FORMAT = "memoryos-actors/user-export"
_EXPORT_VERSION = 1


@dataclass(frozen=True, slots=True)
class UserState:
    """A picture of one user's memory (see :meth:`MemoryOS.user_state`).

    Attributes:
        user_id: whose memory.
        turns: turns stored so far.
        stm: STM pages, oldest first.
        segments: MTM segments with their pages, hottest first.
        profile: the user's static profile.
        traits: user traits that have a level.
        kb: user facts (knowledge base), oldest first.
        agents: per assistant id, its ``profile`` and agent ``traits``.
        persona_updates: persona updates applied since the LPM actor started.
    """

    user_id: str
    turns: int
    stm: tuple[Page, ...]
    segments: tuple[SegmentRecord, ...]
    profile: UserProfile
    traits: tuple[TraitLevel, ...]
    kb: tuple[KBEntry, ...]
    agents: dict[str, dict[str, Any]]
    persona_updates: int

    def page_ids(self) -> list[str]:
        """Ids of every page held in STM and MTM (not the archive)."""
        ids = [p.page_id for p in self.stm]
        for seg in self.segments:
            ids.extend(p.page_id for p in seg.pages)
        return ids


@dataclass(frozen=True, slots=True)
class ForgetReport:
    """What :meth:`MemoryOS.forget_user` removed."""

    user_id: str
    removed_files: tuple[str, ...]
    was_active: bool
    #: Gateway entries removed: ``gateway_cache`` (cached answers and embeddings),
    #: ``redo_queue`` (degraded requests waiting to be redone) and ``degraded_records``
    #: (who asked for those).
    purged: dict[str, int] = dataclasses.field(default_factory=dict)


class _Sweep:
    """Janitor message: passivate idle users."""


class _Janitor(supervisor.SupervisedActor):
    """Runs the idle sweep of the user directory on a timer."""

    def __init__(self, sweep: Callable[[], int]) -> None:
        super().__init__()
        self._sweep = sweep

    def on_receive(self, message: object) -> object:
        if isinstance(message, _Sweep):
            return self._sweep()
        raise TypeError(f"janitor got an unknown message: {type(message).__name__}")


class _StartOnce:
    """A child start function that adopts an already running group the first time.

    The user's group is started in the activating caller's thread (so its recovery does
    not hold up the ``users`` supervisor); the supervisor's first call returns it, and any
    later call (a restart after the group itself failed) starts a fresh one.
    """

    def __init__(self, ref: pykka.ActorRef[Any], start: Callable[[], pykka.ActorRef[Any]]) -> None:
        self._ref: pykka.ActorRef[Any] | None = ref
        self._start = start
        self._lock = threading.Lock()

    def __call__(self) -> pykka.ActorRef[Any]:
        with self._lock:
            ref, self._ref = self._ref, None
        return ref if ref is not None else self._start()


def _check_text(value: object, what: str, limit: int, *, allow_empty: bool = False) -> str:
    if not isinstance(value, str):
        raise InvalidInput(f"{what} must be a str, got {type(value).__name__}")
    if not value and not allow_empty:
        raise InvalidInput(f"{what} must not be empty")
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError:
        raise InvalidInput(f"{what} is not valid Unicode text (lone surrogate)") from None
    if size > limit:
        raise InvalidInput(f"{what} is {size} bytes; the limit is {limit} (max_text_bytes)")
    if "\x00" in value:
        raise InvalidInput(f"{what} contains a NUL character")
    return value


def _check_user_id(user_id: object) -> str:
    uid = _check_text(user_id, "user_id", 1024)
    if uid.strip() != uid or not uid.strip():
        raise InvalidInput("user_id must not be blank or have leading/trailing white space")
    if uid.startswith(ASSISTANT_PREFIX):
        raise InvalidInput(f"user ids starting with {ASSISTANT_PREFIX!r} are reserved")
    return uid


def _check_timestamp(ts: object) -> float:
    if isinstance(ts, bool) or not isinstance(ts, (int, float)):
        raise InvalidInput(f"timestamp must be a number of seconds, got {type(ts).__name__}")
    value = float(ts)
    if not math.isfinite(value) or value < 0 or value > 32503680000.0:  # year 3000
        raise InvalidInput(f"timestamp {ts!r} is not a plausible Unix time in seconds")
    return value


def _typed_cause(exc: BaseException) -> MemoryOSError:
    """The first :class:`MemoryOSError` in ``exc``'s cause chain, else a ``StorageError``."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, MemoryOSError):
            return seen
        seen = seen.__cause__ or seen.__context__
    return StorageError(f"starting the user's actors failed: {exc}")


def _check_path(value: object, what: str) -> Path:
    """``value`` as a :class:`Path` if it is a usable file-system path, else ``InvalidInput``."""
    if not isinstance(value, (str, os.PathLike)):
        raise InvalidInput(f"{what} must be a path, got {type(value).__name__}")
    raw = os.fspath(value)
    if not isinstance(raw, str):
        raise InvalidInput(f"{what} must be a text path, got {type(raw).__name__}")
    return Path(_check_text(raw, what, 4096))


def _check_timeout(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise InvalidInput(f"timeout must be a positive number of seconds, got {value!r}")
    return float(value)


class MemoryOS:
    """A running memory system over one data directory (synchronous API).

    Use :meth:`open` as a context manager. Every method is thread-safe; many threads may
    call for many users at once. Expected failures raise a subclass of
    :class:`~memoryos_actors.errors.MemoryOSError`.
    """

    def __init__(
        self, data_dir: Path, config: MemoryConfig, clock: Clock, *, _lock: DataDirLock
    ) -> None:
        self.data_dir = data_dir
        self.config = config
        self.clock = clock
        self._lock = _lock
        self._closed = False
        self._dir = UserDirectory(config.max_inflight_per_user,
                                  is_pinned=lambda u: u.startswith(ASSISTANT_PREFIX))
        self._stats_lock = threading.Lock()
        # Passivates least recently used idle users in the background once the live groups
        # come within `headroom` of max_active_users, so activations rarely wait for one.
        self._passivator = ThreadPoolExecutor(_BG_PASSIVATIONS,
                                              thread_name_prefix="memoryos-passivate")
        self._bg_passivating = 0
        self._total = threading.BoundedSemaphore(config.max_inflight_total)
        self._counters = {"turns": 0, "retrievals": 0, "chats": 0, "activations": 0,
                          "passivations": 0}
        self._activation_ms: list[float] = []
        self.registry = Registry()
        self.metrics = Metrics()
        for name in ("evicted_segments", "evicted_pages", "promoted_segments",
                     "stale_replies_dropped"):
            self.metrics.inc(name, 0)  # reported from the start, not only once non-zero
        self.gateway_service = GatewayService(config)
        workers = tuple(f"gateway/{i}" for i in range(config.gateway_workers))
        self._gateway = GatewayClient(
            self.gateway_service, self.registry, workers, config.max_inflight_total
        )
        self.gateway_service.on_redo = self._gateway.deliver_redo
        self._retrieval_names = tuple(f"retrieval/{i}" for i in range(config.retrieval_workers))
        self._rr = 0
        self._root = self._start_tree(workers)
        self._users_sup = self.registry.require("users")
        self._ticker_timer = supervisor.send_interval(
            self.registry.require("heat-ticker"), config.heat_tick_seconds, HeatTick()
        )
        sweep_every = max(0.05, min(config.idle_timeout_seconds / 4.0, 30.0))
        self._sweep_timer = supervisor.send_interval(
            self.registry.require("janitor"), sweep_every, _Sweep()
        )

    # -- construction ----------------------------------------------------------------------

    @overload
    @classmethod
    def open(cls, data_dir: str | os.PathLike[str], config: MemoryConfig | None = None, *,
             clock: Clock | None = None, cluster: None = None) -> MemoryOS: ...

    @overload
    @classmethod
    def open(cls, data_dir: str | os.PathLike[str], config: MemoryConfig | None = None, *,
             clock: Clock | None = None, cluster: RayCluster) -> ClusterMemoryOS: ...

    @classmethod
    def open(
        cls,
        data_dir: str | os.PathLike[str],
        config: MemoryConfig | None = None,
        *,
        clock: Clock | None = None,
        cluster: RayCluster | None = None,
    ) -> MemoryOS | ClusterMemoryOS:
        """Start a memory system over ``data_dir`` (created if missing).

        Only one process may have a data directory open: a second one gets
        :class:`~memoryos_actors.errors.DataDirLocked`. ``clock`` defaults to the system
        clock; tests inject a :class:`~memoryos_actors.clock.ManualClock`.

        With ``cluster`` (a :class:`~memoryos_actors.cluster.RayCluster`), users are spread
        over shard processes and the result is a
        :class:`~memoryos_actors.cluster.ClusterMemoryOS`, with the same methods and errors.
        """
        cfg = config if config is not None else MemoryConfig()
        if not isinstance(cfg, MemoryConfig):
            raise InvalidInput(f"config must be a MemoryConfig, got {type(cfg).__name__}")
        path = _check_path(data_dir, "data_dir")
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StorageError(f"{path}: cannot create the data directory: {exc}") from exc
        configure_logging(cfg.log_level, cfg.log_format)
        if cluster is not None:
            if not callable(getattr(cluster, "open_facade", None)):
                raise InvalidInput(f"cluster must be a RayCluster, got {type(cluster).__name__}")
            return cluster.open_facade(path, cfg, clock if clock is not None else SystemClock())
        if (path / "shards.json").exists():
            raise InvalidInput(f"{path} is a sharded data directory: open it with cluster=")
        lock = DataDirLock(path)
        try:
            return cls(path, cfg, clock if clock is not None else SystemClock(), _lock=lock)
        except BaseException:
            lock.release()
            raise

    def _start_tree(self, worker_names: tuple[str, ...]) -> pykka.ActorRef[Any]:
        cfg = self.config
        reg = self.registry
        service = self.gateway_service
        gateway_children = [
            ChildSpec(id=name,
                      start=functools.partial(GatewayWorker.start, name, self._gateway, reg),
                      name=name)
            for name in worker_names
        ]
        retrieval_children = [
            ChildSpec(
                id=name,
                start=functools.partial(RetrievalWorker.start, cfg, reg, self._gateway,
                                        self.clock),
                name=name,
            )
            for name in self._retrieval_names
        ]
        children = [
            ChildSpec(
                id="gateway",
                start=functools.partial(Supervisor.start, gateway_children, registry=reg,
                                        max_restarts=10, max_seconds=5.0),
                kind=ChildKind.SUPERVISOR,
                name="gateway",
            ),
            ChildSpec(
                id="retrieval",
                start=functools.partial(Supervisor.start, retrieval_children, registry=reg,
                                        max_restarts=10, max_seconds=5.0),
                kind=ChildKind.SUPERVISOR,
                name="retrieval",
            ),
            ChildSpec(id="heat-ticker",
                      start=functools.partial(HeatTicker.start, reg, self._gateway),
                      name="heat-ticker"),
            ChildSpec(id="janitor", start=functools.partial(_Janitor.start, self._sweep_idle),
                      name="janitor"),
            ChildSpec(
                id="users",
                start=functools.partial(
                    supervisor.DynamicSupervisor.start,
                    max_children=cfg.max_active_users,
                    # One user's crash loop restarts that user's group; only a storm across
                    # many users at once escalates to the root.
                    max_restarts=max(100, cfg.max_active_users),
                    max_seconds=5.0,
                    registry=reg,
                ),
                kind=ChildKind.SUPERVISOR,
                name="users",
            ),
        ]
        return Supervisor.start(children, registry=reg, name="root", max_restarts=5,
                                max_seconds=5.0)

    def __enter__(self) -> MemoryOS:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- user directory --------------------------------------------------------------------

    def _enter(self, user_id: str) -> UserEntry:
        """Count a call in flight for ``user_id``, activating the user's group if needed."""
        deadline = time.monotonic() + self.config.overload_timeout_seconds
        entry, must_activate = self._dir.enter(user_id, deadline)
        if not must_activate:
            return entry
        try:
            self._activate(entry, deadline)
        except BaseException:
            store, entry.store = entry.store, None
            try:
                if store is not None:
                    store.close()
            finally:
                self._dir.activation_failed(entry)
            raise
        return entry

    def _leave(self, entry: UserEntry) -> None:
        self._dir.leave(entry)

    def _new_store(self, user_id: str) -> UserStore:
        cfg = self.config
        return UserStore(
            self.data_dir,
            user_id,
            fsync=cfg.fsync,
            fsync_interval=cfg.fsync_interval_seconds,
            archive=cfg.archive_enabled,
            config_fingerprint=cfg.fingerprint(),
        )

    def _activate(self, entry: UserEntry, deadline: float) -> None:
        """Load the user's state once and start its group (the entry is ``ACTIVATING``).

        The snapshot and the WAL tail are read once, here, in the caller's thread, and handed
        to the three tier actors; the user's group supervisor is started here too, so its
        tiers recover in their own threads. The ``users`` supervisor only adopts the
        running group: activations of different users proceed in parallel.
        """
        started = time.perf_counter()
        self._make_room(entry, deadline)
        cfg = self.config
        store = self._new_store(entry.user_id)
        entry.store = store
        name, dim = self.gateway_service.embedder_info()
        store.check_embedder(name, dim, cfg.fingerprint())
        env = UserEnv(
            user_id=entry.user_id,
            config=cfg,
            store=store,
            gateway=self._gateway,
            registry=self.registry,
            clock=self.clock,
            insert_backlog=Backlog(max(64, cfg.max_inflight_per_user * 4),
                                   f"user {entry.user_id!r} MTM backlog"),
            metrics=self.metrics,
            epoch=entry.epoch,
            preload=Preload(persist.recover(store)),
        )
        entry.env = env
        stm_n, mtm_n, lpm_n = actor_names(entry.user_id)
        children = [
            ChildSpec(id="stm", start=functools.partial(STMActor.start, env), name=stm_n),
            ChildSpec(id="mtm", start=functools.partial(MTMActor.start, env), name=mtm_n),
            ChildSpec(id="lpm", start=functools.partial(LPMActor.start, env), name=lpm_n),
        ]
        start_group = functools.partial(
            Supervisor.start,
            children,
            strategy=Strategy.REST_FOR_ONE,
            registry=self.registry,
            max_restarts=3,
            max_seconds=5.0,
        )
        try:
            group = start_group()
        except supervisor.SupervisorError as exc:
            # A tier that cannot load the user's files fails in on_start; the supervisor
            # wraps that error. Callers get the typed error that names the file.
            raise _typed_cause(exc) from None
        spec = ChildSpec(
            id=f"user:{entry.user_id}",
            start=_StartOnce(group, start_group),
            kind=ChildKind.SUPERVISOR,
            restart=Restart.PERMANENT,
        )
        try:
            supervisor.start_child(self._users_sup, spec)
        except BaseException as exc:
            supervisor.stop(group, timeout=_ASK_TIMEOUT_S)
            if isinstance(exc, supervisor.SupervisorError):
                raise _typed_cause(exc) from None
            raise
        try:
            # Wait until STM is up: its first answer comes after on_start.
            self._ask(stm_n, Ping())
        except BaseException:
            self._stop_group(entry, snapshot=False)  # never leave an adopted group behind
            raise
        elapsed = (time.perf_counter() - started) * 1000.0
        with self._stats_lock:
            self._counters["activations"] += 1
            self._activation_ms.append(elapsed)
            if len(self._activation_ms) > 10000:
                del self._activation_ms[:5000]
        self._dir.activated(entry)
        log.debug("user.activated", user=entry.user_id, epoch=entry.epoch, ms=round(elapsed, 3))

    def _make_room(self, me: UserEntry, deadline: float) -> None:
        """Passivate least-recently-used idle users until a group slot is free for ``me``.

        Every entry other than ``me`` holds (or is about to hold, or is releasing) a live
        group, so they all count against ``max_active_users``. If every one of them is
        busy, wait for one to go idle, until ``deadline``.
        """
        cap = self.config.max_active_users
        while True:
            victim = self._dir.wait_for_room(me, cap, deadline)
            if victim is None:
                break
            self._passivate(victim)
        self._keep_headroom()

    def _keep_headroom(self) -> None:
        """Start passivating the least recently used idle user in the background when the
        live groups are within ``max_active_users // 20`` (at least 1) of the cap."""
        cap = self.config.max_active_users
        with self._stats_lock:
            if self._bg_passivating >= _BG_PASSIVATIONS:
                return
            self._bg_passivating += 1
        victim = self._dir.pick_above(cap - max(1, cap // 20))
        if victim is None:
            with self._stats_lock:
                self._bg_passivating -= 1
            return

        def run() -> None:
            try:
                self._passivate(victim)
            finally:
                with self._stats_lock:
                    self._bg_passivating -= 1

        try:
            self._passivator.submit(run)
        except RuntimeError:  # shutting down: do it here
            run()

    def _stop_group(self, entry: UserEntry, *, snapshot: bool) -> None:
        """Stop the user's actors (after a snapshot if asked) and close its store.

        Never raises: a failure is logged and the group is stopped anyway, so the user's
        next call starts from the files (the WAL has every acknowledged turn).
        """
        if snapshot:
            try:
                stm = self.registry.lookup(actor_names(entry.user_id)[0])
                if stm is not None:
                    self._drain_user(entry.user_id)
                    stm.ask(Snapshot(), timeout=_ASK_TIMEOUT_S)
            except Exception as exc:  # the snapshot is an optimisation; the WAL has everything
                log.warning("user.passivate_snapshot_failed", user=entry.user_id,
                            error=repr(exc))
        try:
            # Taken back from the users supervisor and stopped here, in the caller's
            # thread: groups of different users stop in parallel.
            group = supervisor.detach_child(self._users_sup, f"user:{entry.user_id}",
                                            timeout=_ASK_TIMEOUT_S)
            if group is not None:
                supervisor.stop(group, timeout=_ASK_TIMEOUT_S)
        except supervisor.SupervisorError:
            pass  # the group was never adopted or already gone
        except Exception as exc:
            log.warning("user.passivate_stop_failed", user=entry.user_id, error=repr(exc))
        store, entry.store = entry.store, None
        if store is not None:
            try:
                store.close()
            except Exception as exc:
                log.warning("user.store_close_failed", user=entry.user_id, error=repr(exc))

    def _passivate(self, entry: UserEntry) -> None:
        """Snapshot and stop a user's group (the entry is already ``DRAINING``)."""
        try:
            self._stop_group(entry, snapshot=True)
        finally:
            with self._stats_lock:
                self._counters["passivations"] += 1
            self._dir.finish(entry, UserPhase.PASSIVE)
        log.debug("user.passivated", user=entry.user_id)

    def _sweep_idle(self) -> int:
        """Passivate users idle for longer than ``idle_timeout_seconds``; return how many.

        One user at a time: each is picked (and marked ``DRAINING``) only when the previous
        one is passive, so a sweep never holds back users it has not reached yet.
        """
        cutoff = time.monotonic() - self.config.idle_timeout_seconds
        done = 0
        while not self._dir.closed:
            entry = self._dir.pick_idle(idle_before=cutoff)
            if entry is None:
                break
            self._passivate(entry)
            done += 1
        return done

    def passivate(self, user_id: str) -> bool:
        """Snapshot and stop ``user_id``'s actors now; False if the user was not active.

        Waits for a transition in progress and for the user's calls in flight (new calls
        wait meanwhile), at most ``overload_timeout_seconds``; then raises ``Overloaded``
        and the user stays active.
        """
        user_id = _check_user_id(user_id)
        deadline = time.monotonic() + self.config.overload_timeout_seconds
        entry = self._dir.claim_active(user_id, UserPhase.DRAINING, deadline)
        if entry is None:
            return False
        self._passivate(entry)
        return True

    def active_users(self) -> list[str]:
        """Users whose actor groups are live now, least recently used first."""
        return self._dir.active()

    def user_epoch(self, user_id: str) -> int:
        """The incarnation epoch of ``user_id``'s live actors (0 when it is not live).

        Each activation gets a new epoch, unique in the process; replies addressed to
        another epoch are dropped (counted as ``stale_replies_dropped`` in :meth:`stats`).
        """
        entry = self._dir.get(_check_user_id(user_id))
        return entry.epoch if entry is not None else 0

    def user_phase(self, user_id: str) -> UserPhase:
        """Where ``user_id`` is in its lifecycle now (see :class:`UserPhase`)."""
        return self._dir.phase(_check_user_id(user_id))

    # -- calls -----------------------------------------------------------------------------

    def _ask(self, name: str, message: object, timeout: float = _ASK_TIMEOUT_S) -> Any:
        """Ask the actor registered as ``name``, following it across one restart."""
        deadline = time.monotonic() + min(timeout, 10.0)
        while True:
            ref = self.registry.lookup(name)
            if ref is None:
                if time.monotonic() > deadline:
                    raise MemoryOSError(f"actor {name!r} is not running")
                time.sleep(0.002)
                continue
            try:
                return ref.ask(message, timeout=timeout)
            except pykka.ActorDeadError:
                # The message never ran (the actor was stopping): safe to send again.
                if time.monotonic() > deadline:
                    raise MemoryOSError(f"actor {name!r} is not running") from None
                time.sleep(0.002)
            except MemoryOSError:
                raise
            except pykka.Timeout:
                # The request may still run: a caller retrying add_turn should pass the
                # same turn_key so the turn is stored once.
                raise Overloaded(
                    f"actor {name!r} did not answer within {timeout} s; the request may "
                    "still complete (retry add_turn with the same turn_key)"
                ) from None
            except Exception as exc:
                # The actor crashed handling the message; its supervisor restarts it.
                raise ActorCrashed(
                    f"actor {name!r} crashed while handling {type(message).__name__}: {exc!r}"
                ) from exc

    def _call(self, user_id: str, fn: Callable[[UserEntry], T]) -> T:
        if not self._total.acquire(timeout=self.config.overload_timeout_seconds):
            raise Overloaded(
                f"{self.config.max_inflight_total} calls in flight (max_inflight_total)"
            )
        try:
            entry = self._enter(user_id)
            try:
                return fn(entry)
            finally:
                self._leave(entry)
        finally:
            self._total.release()

    def _load_shared_persona(self, assistant_id: str) -> None:
        """With ``shared_agent_persona``, make sure the assistant's persona group is live.

        Such groups are pinned: never passivated while the system runs, since every user
        of the assistant reads and feeds them.
        """
        if self.config.shared_agent_persona:
            owner = ASSISTANT_PREFIX + assistant_id
            if self._dir.phase(owner) is UserPhase.ACTIVE:
                return
            self._call(owner, lambda e: None)

    def add_turn(
        self,
        user_id: str,
        query: str,
        response: str,
        timestamp: float | None = None,
        assistant_id: str = "default",
        *,
        turn_key: str | None = None,
    ) -> str:
        """Store one turn (the user's ``query`` and the assistant's ``response``).

        Returns the new page's id once the turn is in the user's write-ahead log (on disk
        per the ``fsync`` policy). Chain meta data, segment placement, eviction and promotion
        happen afterwards in the background; :meth:`flush` waits for them.

        ``turn_key`` is an optional idempotency key chosen by the caller (at most 200 bytes
        of UTF-8, unique per turn of this user): calling again with the same key (after
        ``Overloaded``, a timeout or a crash, when it is unknown whether the turn was
        stored) stores the turn at most once and returns the same page id. Keys are
        remembered for the user's last 1,024 turns, across passivation and restarts.
        """
        uid = _check_user_id(user_id)
        if turn_key is not None:
            _check_text(turn_key, "turn_key", 200)
        limit = self.config.max_text_bytes
        msg = AddTurn(
            user_id=uid,
            assistant_id=_check_text(assistant_id, "assistant_id", 1024),
            query=_check_text(query, "query", limit, allow_empty=True),
            response=_check_text(response, "response", limit, allow_empty=True),
            timestamp=self.clock.now() if timestamp is None else _check_timestamp(timestamp),
            # Caller keys and generated ones never collide: generated ones start with "~".
            turn_key=("u:" + turn_key) if turn_key is not None else "~" + uuid.uuid4().hex,
        )
        if not msg.query and not msg.response:
            raise InvalidInput("a turn needs a query or a response")
        def run(entry: UserEntry) -> str:
            # Backpressure happens here, in the caller's thread: wait for room in the
            # user's placement queue and the gateway before the turn is written, so a
            # flood gets Overloaded and a retry never duplicates a stored turn.
            timeout = self.config.overload_timeout_seconds
            assert entry.env is not None
            entry.env.insert_backlog.wait_below_limit(timeout)
            self._gateway.wait_capacity(timeout)
            for attempt in range(_ADD_TURN_ATTEMPTS):
                try:
                    return self._ask(actor_names(uid)[0], msg)
                except ActorCrashed:
                    # The restarted STM recovers from the WAL and knows the turn key if the
                    # turn was written: asking again stores it exactly once either way.
                    if attempt == _ADD_TURN_ATTEMPTS - 1:
                        raise
            raise AssertionError("unreachable")

        self._load_shared_persona(msg.assistant_id)
        started = time.perf_counter()
        page_id = self._call(uid, run)
        self.metrics.observe("add_turn_ms", (time.perf_counter() - started) * 1000.0)
        self._counters["turns"] += 1
        return page_id

    def retrieve(
        self,
        user_id: str,
        query: str,
        assistant_id: str = "default",
        timestamp: float | None = None,
    ) -> MemoryContext:
        """Retrieve what the user's memory holds about ``query``, with provenance.

        STM, MTM and LPM are asked in parallel; the result is immutable and every item says
        which tier it came from, its ids and why it was chosen.
        """
        uid = _check_user_id(user_id)
        msg = Retrieve(
            user_id=uid,
            assistant_id=_check_text(assistant_id, "assistant_id", 1024),
            query=_check_text(query, "query", self.config.max_text_bytes),
            timestamp=self.clock.now() if timestamp is None else _check_timestamp(timestamp),
        )

        def run(_entry: UserEntry) -> MemoryContext:
            self._rr = (self._rr + 1) % len(self._retrieval_names)
            return self._ask(self._retrieval_names[self._rr], msg)

        self._load_shared_persona(msg.assistant_id)
        started = time.perf_counter()
        ctx = self._call(uid, run)
        self.metrics.observe("retrieve_ms", (time.perf_counter() - started) * 1000.0)
        self._counters["retrievals"] += 1
        return ctx

    def chat(self, user_id: str, query: str, assistant_id: str = "default") -> str:
        """Answer ``query`` from memory: retrieve, generate a reply, store the turn."""
        ctx = self.retrieve(user_id, query, assistant_id=assistant_id)
        result = self.gateway_service.complete(
            "chat_reply", {"context": ctx.render(), "query": query}, user_id=user_id
        )
        reply = str(result.data["reply"])
        self.add_turn(user_id, query, reply, assistant_id=assistant_id)
        self._counters["chats"] += 1
        return reply

    def set_user_profile(self, user_id: str, profile: UserProfile) -> None:
        """Set the user's static profile (name, gender, birth year, extras); durable on return."""
        uid = _check_user_id(user_id)
        if not isinstance(profile, UserProfile):
            raise InvalidInput(f"profile must be a UserProfile, got {type(profile).__name__}")
        self._call(uid, lambda e: self._ask(actor_names(uid)[2], SetUserProfile(uid, profile)))

    def set_agent_profile(
        self, user_id: str, profile: AgentProfile, assistant_id: str = "default"
    ) -> None:
        """Set the assistant's static persona as this user sees it; durable on return."""
        uid = _check_user_id(user_id)
        if not isinstance(profile, AgentProfile):
            raise InvalidInput(f"profile must be an AgentProfile, got {type(profile).__name__}")
        aid = _check_text(assistant_id, "assistant_id", 1024)
        owner = persona_owner(uid, aid, self.config.shared_agent_persona)
        self._call(
            owner,
            lambda e: self._ask(actor_names(owner)[2], SetAgentProfile(owner, aid, profile)),
        )

    # -- background work -------------------------------------------------------------------

    def _drain_user(self, user_id: str, summaries: bool = True) -> int:
        """One barrier round over the user's tiers; returns the user's pending pages.

        With ``summaries``, MTM is first told to ask for every summary it still owes.
        """
        stm_n, mtm_n, lpm_n = actor_names(user_id)
        pending = int(self._ask(stm_n, Ping()))
        if summaries:
            self._ask(mtm_n, FlushSummaries())
        pending += int(self._ask(mtm_n, Ping()))  # gateway jobs MTM holds back
        self._ask(lpm_n, Ping())
        return pending

    def flush(self, timeout: float = 300.0) -> None:
        """Wait until background work (chains, placement, summaries, promotions) has settled.

        Repeats mailbox barriers over every active user's tiers until a round finds no page
        waiting, no gateway job queued or in flight, and starts no new gateway work. Only
        then are the segment summaries still owed (segments with new pages since their last
        summary) asked for, once, and waited for: a flush during ingest waits for the work,
        it does not add summary calls while pages are still arriving.
        """
        deadline = time.monotonic() + _check_timeout(timeout)
        idle_wait = 0.002
        while True:
            before = self._gateway.submitted
            # Idle when the round starts: every answer of a finished job was told to its
            # tier before this round's barriers, so they come after it in each mailbox.
            # (Checked only at the end, a job that ends between a tier's barrier and the
            # check would look settled while its answer still waits in that tier.)
            idle_before = self._gateway.pending == 0
            pending = 0
            users = self.active_users()
            for user in users:
                try:
                    pending += self._drain_user(user, summaries=False)
                except MemoryOSError:
                    pass  # the user was passivated meanwhile: its work is in its snapshot
            for name in self._gateway.worker_names:
                self._ask(name, Ping())
            settled = idle_before and pending == 0 and self._gateway.pending == 0
            if settled and self._gateway.submitted == before:
                asked = 0
                for user in users:
                    try:
                        asked += int(self._ask(actor_names(user)[1], FlushSummaries()) or 0)
                    except MemoryOSError:
                        pass
                if asked == 0:
                    return
                continue
            if time.monotonic() > deadline:
                raise Overloaded(f"background work did not settle within {timeout} s")
            if self._gateway.submitted == before:
                # Waiting on the provider or on a retry timer: back off, barrier rounds
                # over every user are not free.
                time.sleep(idle_wait)
                idle_wait = min(0.05, idle_wait * 2)
            else:
                idle_wait = 0.002

    # -- inspection ------------------------------------------------------------------------

    def users(self) -> list[str]:
        """Every user with data in this data directory (active or not), sorted.

        Shared assistant personas (``shared_agent_persona``) are not users and not listed.
        """
        return sorted(u for u in list_users(self.data_dir) if not u.startswith(ASSISTANT_PREFIX))

    def tree(self) -> str:
        """The supervision tree as text, with each child's status and restart count."""
        return supervisor.format_tree(self._root)

    def user_state(self, user_id: str) -> UserState:
        """A typed picture of the user's three tiers, for tools and tests."""
        uid = _check_user_id(user_id)
        if uid not in self.active_users() and not user_exists(self.data_dir, uid):
            raise UnknownUser(f"no data for user {uid!r}")

        def run(_e: UserEntry) -> UserState:
            stm_n, mtm_n, lpm_n = actor_names(uid)
            seq, pages = self._ask(stm_n, Inspect())
            segments = self._ask(mtm_n, Inspect())
            lpm = self._ask(lpm_n, Inspect())
            return UserState(
                user_id=uid,
                turns=seq,
                stm=pages,
                segments=tuple(sorted(segments, key=lambda r: -r.heat)),
                profile=lpm["profile"],
                traits=lpm["traits"],
                kb=lpm["kb"],
                agents=lpm["agents"],
                persona_updates=lpm["updates"],
            )

        return self._call(uid, run)

    def archive(
        self, user_id: str, query: str | None = None, limit: int | None = None
    ) -> list[dict[str, Any]]:
        """Segments and pages MTM evicted for ``user_id``, oldest first.

        With ``query``, only records matching its keywords, best first (at most ``limit``,
        default 10). Eviction is a tier decision, not data loss: everything is here.
        """
        uid = _check_user_id(user_id)
        if query is not None:
            _check_text(query, "query", self.config.max_text_bytes)
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int)
                                  or limit < 0):
            raise InvalidInput(f"limit must be None or an int >= 0, got {limit!r}")

        def run(entry: UserEntry) -> list[dict[str, Any]]:
            assert entry.store is not None
            archive = entry.store.archive
            if query is None:
                records = [rec for _seq, rec in archive.iter()]
                return records if limit is None else records[:limit]
            hits = archive.search(keywords(query), limit=10 if limit is None else limit)
            return [hit.record for hit in hits]

        return self._call(uid, run)

    def stored_page_ids(self, user_id: str) -> list[str]:
        """Every page id stored for ``user_id``: STM, then MTM, then the archive.

        An audit helper: each acknowledged turn appears exactly once (after :meth:`flush`;
        before it, a page may still be on its way from STM to MTM and not be listed).
        """
        ids = self.user_state(user_id).page_ids()
        for rec in self.archive(user_id):
            if rec.get("t") == "segment":
                ids.extend(str(p["page_id"]) for p in rec["segment"]["pages"])
            elif rec.get("t") == "page":
                ids.append(str(rec["page"]["page_id"]))
        return ids

    def kill_actor(self, user_id: str, tier: str, reason: str = "kill_actor",
                   timeout: float = 10.0) -> bool:
        """Fault injection: crash one of ``user_id``'s tier actors (``"stm"``, ``"mtm"`` or
        ``"lpm"``) as an unexpected exception in it would, for drills and demos.

        The user's group supervisor (``rest_for_one``) restarts it and the tiers started
        after it; each rebuilds its state from its snapshot plus the WAL, so no acknowledged
        turn is lost. Activates the user if needed. Returns True once a new actor is
        registered under the same name, False if none appeared within ``timeout`` seconds.
        The restart shows in :meth:`tree` (``restarts=N``).
        """
        uid = _check_user_id(user_id)
        names = dict(zip(("stm", "mtm", "lpm"), actor_names(uid), strict=True))
        if tier not in names:
            raise InvalidInput(f"tier must be 'stm', 'mtm' or 'lpm', got {tier!r}")
        if not isinstance(reason, str):
            raise InvalidInput(f"reason must be a str, got {type(reason).__name__}")
        wait_s = _check_timeout(timeout)
        name = names[tier]

        def run(_e: _UserEntry) -> bool:
            old = self.registry.require(name)
            supervisor.kill(old, reason)
            deadline = time.monotonic() + wait_s
            while time.monotonic() < deadline:
                if self.registry.lookup(name) not in (None, old):
                    return True
                time.sleep(0.005)
            return False

        return self._call(uid, run)

    def stats(self, user_id: str | None = None) -> dict[str, Any]:
        """Counters of the whole system, or of one user when ``user_id`` is given."""
        if user_id is not None:
            st = self.user_state(user_id)
            return {
                "user_id": st.user_id,
                "turns": st.turns,
                "stm_pages": len(st.stm),
                "mtm_segments": len(st.segments),
                "mtm_pages": sum(len(seg.pages) for seg in st.segments),
                "kb_facts": len(st.kb),
                "traits_set": len(st.traits),
                "persona_updates": st.persona_updates,
                "archived_records": len(self.archive(user_id)),
                "gateway": self.gateway_service.stats().get("by_user", {}).get(user_id, {}),
            }
        acts = sorted(self._activation_ms)

        def pct(p: float) -> float:
            return acts[min(len(acts) - 1, int(p * len(acts)))] if acts else 0.0

        entries = self._dir.entries()
        active = sum(1 for e in entries if e.phase is UserPhase.ACTIVE)
        inflight = sum(e.inflight for e in entries)
        restarts = sum(c.restarts for c in supervisor.which_children(self._users_sup))
        return {
            **self._counters,
            "active_users": active,
            "inflight": inflight,
            "gateway_backlog": self._gateway.pending,
            "placement_backlog": sum(
                e.env.insert_backlog.pending for e in entries if e.env is not None
            ),
            **self.metrics.snapshot(),
            "activation_ms_p50": pct(0.5),
            "activation_ms_p99": pct(0.99),
            "user_group_restarts": restarts,
            "threads": threading.active_count(),
            "gateway": self.gateway_service.stats(),
        }

    # -- data lifecycle --------------------------------------------------------------------

    def export_user(self, user_id: str, path: str | os.PathLike[str]) -> Path:
        """Write everything stored for ``user_id`` to a portable file (``.json`` or msgpack).

        One operation on the user: while it runs the user is ``EXPORTING`` (its other calls
        wait, and it cannot be passivated or forgotten), so the hot tiers and the archive
        are read at one consistent cut.
        """
        uid = _check_user_id(user_id)
        out = _check_path(path, "path")
        self.flush()
        deadline = time.monotonic() + self.config.overload_timeout_seconds
        while True:
            self._call(uid, lambda _e: None)  # make sure the user is live
            entry = self._dir.claim_active(uid, UserPhase.EXPORTING, deadline)
            if entry is not None:
                break
            if time.monotonic() > deadline:
                raise Overloaded(f"user {uid!r} was passivated again and again; export gave up")
        try:
            stm_n, mtm_n, lpm_n = actor_names(uid)
            self._drain_user(uid)
            stm = self._ask(stm_n, GetState())
            state = {"seq": stm["seq"], "stm": stm["stm"], "mtm": self._ask(mtm_n, GetState()),
                     "lpm": self._ask(lpm_n, GetState())}
            assert entry.store is not None
            # Evictions between the MTM state and this read are re-applied on import (the
            # MTM state says which archive record it reflects), so the cut is consistent.
            store_archive = [rec for _seq, rec in entry.store.archive.iter()]
        finally:
            self._dir.finish(entry, UserPhase.ACTIVE)
        payload = {
            "format": _EXPORT_FORMAT,
            "version": _EXPORT_VERSION,
            "user_id": uid,
            "config_fingerprint": self.config.fingerprint(),
            "embedder": list(self.gateway_service.embedder_info()),
            "state": state,
            "archive": store_archive,
        }
        write_export(out, payload)
        return out

    def import_user(self, path: str | os.PathLike[str], user_id: str | None = None) -> str:
        """Load a file written by :meth:`export_user`; returns the user id it was stored as.

        Refuses to overwrite a user that already has data (forget it first). One operation
        on the user: its calls wait until the import is done; a failed import leaves no
        files behind.
        """
        payload = read_export(_check_path(path, "path"))
        if payload.get("format") != _EXPORT_FORMAT:
            raise InvalidInput(f"{path}: not a memoryos-actors user export")
        if int(payload.get("version", 0)) > _EXPORT_VERSION:
            raise InvalidInput(f"{path}: export version {payload.get('version')} is newer "
                               f"than this library reads ({_EXPORT_VERSION})")
        uid = _check_user_id(user_id if user_id is not None else payload["user_id"])
        name, dim = self.gateway_service.embedder_info()
        if list(payload.get("embedder", [])) != [name, dim]:
            raise InvalidInput(
                f"{path}: written with embedder {payload.get('embedder')}, this system uses "
                f"{[name, dim]}; import it into a system configured with that embedder"
            )
        deadline = time.monotonic() + self.config.overload_timeout_seconds
        entry = self._dir.claim_passive(uid, UserPhase.IMPORTING, deadline)
        if entry is None:
            raise InvalidInput(f"user {uid!r} already has data; forget_user first")
        try:
            # Only this user's directory decides: another user's damaged files must not
            # block it.
            if user_exists(self.data_dir, uid):
                raise InvalidInput(f"user {uid!r} already has data; forget_user first")
            cfg = self.config
            try:
                store = UserStore(self.data_dir, uid, fsync=cfg.fsync,
                                  fsync_interval=cfg.fsync_interval_seconds,
                                  archive=cfg.archive_enabled)
                try:
                    store.check_embedder(name, dim, cfg.fingerprint())
                    # Stored as another id: the pages and the persona name their new owner.
                    source = str(payload.get("user_id", uid))
                    persist.import_state(store, persist.rebind_user(payload["state"], source,
                                                                    uid))
                    if store.archive is not None:
                        for rec in payload.get("archive", ()):
                            store.archive.append(persist.rebind_user(rec, source, uid))
                finally:
                    store.close()
            except BaseException:
                UserStore.remove(self.data_dir, uid)  # a half-imported user is no user
                raise
        finally:
            self._dir.finish(entry, UserPhase.PASSIVE)
        return uid

    def forget_user(self, user_id: str) -> ForgetReport:
        """Delete every file of ``user_id`` and every trace of it in the gateway (cached
        answers and embeddings, queued redo work, degraded replies waiting for a redo);
        report what was removed. Other users are untouched.

        One operation on the user: new calls wait (then see an empty user); calls in flight
        are waited for, at most ``overload_timeout_seconds``, then ``Overloaded`` is raised
        and nothing is removed. Late replies addressed to the forgotten incarnation are
        dropped (each activation has its own epoch).
        """
        uid = _check_user_id(user_id)
        deadline = time.monotonic() + self.config.overload_timeout_seconds
        while True:
            entry = self._dir.claim_active(uid, UserPhase.FORGETTING, deadline)
            was_active = entry is not None
            if entry is None:
                entry = self._dir.claim_passive(uid, UserPhase.FORGETTING, deadline)
            if entry is not None:
                break
            if time.monotonic() > deadline:
                raise Overloaded(f"user {uid!r} kept changing state; forget_user gave up")
        try:
            if was_active:
                self._stop_group(entry, snapshot=False)
            removed = UserStore.remove(self.data_dir, uid)
            # Jobs told to the gateway before the group stopped finish first (a mailbox
            # barrier), so none of them caches this user's text after the purge.
            for name in self._gateway.worker_names:
                try:
                    self._ask(name, Ping())
                except MemoryOSError as exc:
                    log.warning("forget.gateway_barrier_failed", worker=name, error=repr(exc))
            purged = self.gateway_service.purge_user(uid)
            purged["degraded_records"] = self._gateway.purge_user(uid)
        finally:
            self._dir.finish(entry, UserPhase.PASSIVE)
        return ForgetReport(uid, tuple(removed), was_active, purged)

    # -- shutdown --------------------------------------------------------------------------

    def close(self, timeout: float = 60.0) -> None:
        """Snapshot every active user, stop the tree and release the data directory."""
        with self._stats_lock:
            if self._closed:
                return
            self._closed = True
        deadline = time.monotonic() + timeout
        try:
            self._dir.close()  # no new call or lifecycle operation from now on
            if not self._dir.wait_settled(deadline):
                log.warning("close.transitions_pending")
            try:
                self.flush(timeout=max(0.001, deadline - time.monotonic()))
            except MemoryOSError as exc:
                log.warning("close.flush_failed", error=repr(exc))
            for uid in self._dir.active():
                try:
                    entry = self._dir.claim_active(
                        uid, UserPhase.DRAINING, max(deadline, time.monotonic() + 1.0))
                except Overloaded as exc:
                    log.warning("close.user_busy", user=uid, error=repr(exc))
                    continue
                if entry is not None:
                    self._passivate(entry)
        finally:
            self._ticker_timer.cancel()
            self._sweep_timer.cancel()
            self._passivator.shutdown(wait=True)
            supervisor.stop(self._root, timeout=timeout)
            for entry in self._dir.entries():
                if entry.store is not None:
                    entry.store.close()
            self.gateway_service.close()
            self._lock.release()


class AsyncMemoryOS:
    """The same API as :class:`MemoryOS`, as coroutines that never block the event loop.

    Every call runs the synchronous method in a bounded thread pool
    (``asyncio.to_thread``-style, with its own executor sized by ``max_inflight_total``).
    """

    def __init__(self, sync: MemoryOS | ClusterMemoryOS) -> None:
        from concurrent.futures import ThreadPoolExecutor

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
    ) -> AsyncMemoryOS:
        """Start a memory system (see :meth:`MemoryOS.open`) without blocking the loop."""
        loop = asyncio.get_running_loop()
        sync = await loop.run_in_executor(
            None, functools.partial(MemoryOS.open, data_dir, config, clock=clock,
                                    cluster=cluster)
        )
        return cls(sync)

    async def _run(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, functools.partial(fn, *args, **kwargs))

    async def __aenter__(self) -> AsyncMemoryOS:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def add_turn(self, user_id: str, query: str, response: str,
                       timestamp: float | None = None, assistant_id: str = "default",
                       *, turn_key: str | None = None) -> str:
        """See :meth:`MemoryOS.add_turn`."""
        return await self._run(self.sync.add_turn, user_id, query, response, timestamp,
                               assistant_id, turn_key=turn_key)

    async def retrieve(self, user_id: str, query: str, assistant_id: str = "default",
                       timestamp: float | None = None) -> MemoryContext:
        """See :meth:`MemoryOS.retrieve`."""
        return await self._run(self.sync.retrieve, user_id, query, assistant_id, timestamp)

    async def chat(self, user_id: str, query: str, assistant_id: str = "default") -> str:
        """See :meth:`MemoryOS.chat`."""
        return await self._run(self.sync.chat, user_id, query, assistant_id)

    async def set_user_profile(self, user_id: str, profile: UserProfile) -> None:
        """See :meth:`MemoryOS.set_user_profile`."""
        await self._run(self.sync.set_user_profile, user_id, profile)

    async def set_agent_profile(self, user_id: str, profile: AgentProfile,
                                assistant_id: str = "default") -> None:
        """See :meth:`MemoryOS.set_agent_profile`."""
        await self._run(self.sync.set_agent_profile, user_id, profile, assistant_id)

    async def stats(self, user_id: str | None = None) -> dict[str, Any]:
        """See :meth:`MemoryOS.stats`."""
        return await self._run(self.sync.stats, user_id)

    async def users(self) -> list[str]:
        """See :meth:`MemoryOS.users`."""
        return await self._run(self.sync.users)

    async def flush(self, timeout: float = 300.0) -> None:
        """See :meth:`MemoryOS.flush`."""
        await self._run(self.sync.flush, timeout)

    async def export_user(self, user_id: str, path: str | os.PathLike[str]) -> Path:
        """See :meth:`MemoryOS.export_user`."""
        return await self._run(self.sync.export_user, user_id, path)

    async def import_user(self, path: str | os.PathLike[str], user_id: str | None = None) -> str:
        """See :meth:`MemoryOS.import_user`."""
        return await self._run(self.sync.import_user, path, user_id)

    async def forget_user(self, user_id: str) -> ForgetReport:
        """See :meth:`MemoryOS.forget_user`."""
        return await self._run(self.sync.forget_user, user_id)

    async def user_state(self, user_id: str) -> UserState:
        """See :meth:`MemoryOS.user_state`."""
        return await self._run(self.sync.user_state, user_id)

    async def archive(
        self, user_id: str, query: str | None = None, limit: int | None = None
    ) -> list[dict[str, Any]]:
        """See :meth:`MemoryOS.archive`."""
        return await self._run(self.sync.archive, user_id, query, limit)

    async def stored_page_ids(self, user_id: str) -> list[str]:
        """See :meth:`MemoryOS.stored_page_ids`."""
        return await self._run(self.sync.stored_page_ids, user_id)

    async def kill_actor(self, user_id: str, tier: str, reason: str = "kill_actor",
                         timeout: float = 10.0) -> bool:
        """See :meth:`MemoryOS.kill_actor`."""
        return await self._run(self.sync.kill_actor, user_id, tier, reason, timeout)

    async def tree(self) -> str:
        """See :meth:`MemoryOS.tree`."""
        return await self._run(self.sync.tree)

    async def passivate(self, user_id: str) -> bool:
        """See :meth:`MemoryOS.passivate`."""
        return await self._run(self.sync.passivate, user_id)

    async def user_epoch(self, user_id: str) -> int:
        """See :meth:`MemoryOS.user_epoch`."""
        return await self._run(self.sync.user_epoch, user_id)

    async def user_phase(self, user_id: str) -> UserPhase:
        """See :meth:`MemoryOS.user_phase`."""
        return await self._run(self.sync.user_phase, user_id)

    async def active_users(self) -> list[str]:
        """See :meth:`MemoryOS.active_users`."""
        return await self._run(self.sync.active_users)

    async def close(self, timeout: float = 60.0) -> None:
        """See :meth:`MemoryOS.close`."""
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, self.sync.close, timeout)
        self._pool.shutdown(wait=True)
