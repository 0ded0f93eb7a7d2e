"""The memory system: the supervision tree and the public facade (:class:`MemoryOS`).

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

The facade is built from one module per concept: this one starts the tree and serves
turns, retrieval and profiles; :mod:`~memoryos_actors.activation` moves users
between passive and active; :mod:`~memoryos_actors.barrier` is ``flush``; :mod:`~memoryos_actors.inspection` holds the read-only views;
:mod:`~memoryos_actors.portability` exports, imports and forgets users;
:mod:`~memoryos_actors.validation` checks arguments; :mod:`~memoryos_actors.reports`
holds the returned records; :mod:`~memoryos_actors.aio` is the asyncio facade.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, overload

import pykka
import structlog

import supervisor
from supervisor import ChildKind, ChildSpec, Registry, Supervisor

from .actors.base import (
    ASSISTANT_PREFIX,
    CatchUpGate,
    GatewayClient,
    Metrics,
    actor_names,
    persona_owner,
)
from .actors.protocol import FlushSummaries, HeatTick, Pending, Ping
from .actors.workers import GatewayWorker, HeatTicker, RetrievalWorker
from .clock import Clock, SystemClock
from .config import MemoryConfig
from .directory import UserDirectory, UserEntry, UserPhase
from .errors import (
    ActorCrashed,
    CorruptDataError,
    InvalidInput,
    MemoryOSError,
    Overloaded,
    ReadOnlyError,
    StorageError,
    UnknownUser,
)
from .gateway.service import GatewayService
from .logs import configure_logging
from .messages import (
    AddTurn,
    AgentProfile,
    MemoryContext,
    Retrieve,
    SetAgentProfile,
    SetUserProfile,
    UserProfile,
)
from .store.lock import DataDirLock

if TYPE_CHECKING:
    from .cluster import ClusterMemoryOS, RayCluster

from .activation import _ASK_TIMEOUT_S, _BG_PASSIVATIONS, SlotDemand, UserActivation
from .barrier import Barriers
from .inspection import Inspection
from .memories import MemoryEditing
from .portability import Portability
from .reports import ChatReply, ForgetReport, UserState
from .validation import check_path as _check_path
from .validation import check_text as _check_text
from .validation import check_timestamp as _check_timestamp
from .validation import check_user_id as _check_user_id

__all__ = ["AsyncMemoryOS", "ForgetReport", "MemoryOS", "UserState"]

log = structlog.get_logger("memoryos.system")

T = TypeVar("T")

#: Times add_turn asks again, with the same turn key, after the STM actor crashed.
_ADD_TURN_ATTEMPTS = 3


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


class MemoryOS(UserActivation, Barriers, Inspection, Portability, MemoryEditing):
    """A running memory system over one data directory (synchronous API).

    Use :meth:`open` as a context manager. Every method is thread-safe; many threads may
    call for many users at once. Expected failures raise a subclass of
    :class:`~memoryos_actors.errors.MemoryOSError`.
    """

    def __init__(
        self,
        data_dir: Path,
        config: MemoryConfig,
        clock: Clock,
        *,
        _lock: DataDirLock | None,
        read_only: bool = False,
    ) -> None:
        self.data_dir = data_dir
        self.config = config
        self.clock = clock
        self._lock = _lock
        #: Opened with ``read_only=True``: nothing in the data directory is ever changed.
        self.read_only = read_only
        #: Users whose files were refused as damaged (user id -> the error), until a later
        #: activation succeeds or :meth:`repair_user` runs.
        self._damaged: dict[str, str] = {}
        self._closed = False
        self._dir = UserDirectory(
            config.max_inflight_per_user, is_pinned=lambda u: u.startswith(ASSISTANT_PREFIX)
        )
        self._stats_lock = threading.Lock()
        # Passivates least recently used idle users in the background: those activations
        # waiting for a slot hand over, and those keeping some slots free below
        # max_active_users (see activation.py). Threads are started on demand.
        self._passivator = ThreadPoolExecutor(
            _BG_PASSIVATIONS, thread_name_prefix="memoryos-passivate"
        )
        self._bg_passivating = 0
        self._demand = SlotDemand()  # sizes the headroom kept below max_active_users
        # One MTM catch-up at a time in the process (see CatchUpGate).
        self._catch_up_gate = CatchUpGate(1)
        self._total = threading.BoundedSemaphore(config.max_inflight_total)
        self._counters = {
            "turns": 0,
            "retrievals": 0,
            "chats": 0,
            "degraded_chats": 0,
            "activations": 0,
            "passivations": 0,
        }
        self._activation_ms: list[float] = []
        self.registry = Registry()
        self.metrics = Metrics()
        for name in (
            "evicted_segments",
            "evicted_pages",
            "promoted_segments",
            "stale_replies_dropped",
            "archive_writes_deferred",
        ):
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
    def open(
        cls,
        data_dir: str | os.PathLike[str],
        config: MemoryConfig | None = None,
        *,
        clock: Clock | None = None,
        cluster: None = None,
        read_only: bool = False,
    ) -> MemoryOS: ...

    @overload
    @classmethod
    def open(
        cls,
        data_dir: str | os.PathLike[str],
        config: MemoryConfig | None = None,
        *,
        clock: Clock | None = None,
        cluster: RayCluster,
        read_only: bool = False,
    ) -> ClusterMemoryOS: ...

    @classmethod
    def open(
        cls,
        data_dir: str | os.PathLike[str],
        config: MemoryConfig | None = None,
        *,
        clock: Clock | None = None,
        cluster: RayCluster | None = None,
        read_only: bool = False,
    ) -> MemoryOS | ClusterMemoryOS:
        """Start a memory system over ``data_dir`` (created if missing).

        Only one process may have a data directory open: a second one gets
        :class:`~memoryos_actors.errors.DataDirLocked`. ``clock`` defaults to the system
        clock; tests inject a :class:`~memoryos_actors.clock.ManualClock`.

        With ``read_only=True`` nothing in ``data_dir`` is ever created, changed or
        deleted, and no lock is taken (another process may have the directory open; this
        one sees each user's files as they were when it activated that user). The
        directory must exist. Reads work as usual (the tiers' own bookkeeping, such as
        filling in chain meta data, stays in memory); calls that would store something
        (``add_turn``, ``chat``, profile setters, ``import_user``, ``forget_user``,
        ``delete_memory``, ``correct_memory``, ``repair_user``) raise
        :class:`~memoryos_actors.errors.ReadOnlyError`; passivation and ``close`` write no
        snapshot; a torn WAL tail is left where it is and not read.

        With ``cluster`` (a :class:`~memoryos_actors.cluster.RayCluster`), users are spread
        over shard processes and the result is a
        :class:`~memoryos_actors.cluster.ClusterMemoryOS`, with the same methods and errors.
        """
        cfg = config if config is not None else MemoryConfig()
        if not isinstance(cfg, MemoryConfig):
            raise InvalidInput(f"config must be a MemoryConfig, got {type(cfg).__name__}")
        path = _check_path(data_dir, "data_dir")
        if not isinstance(read_only, bool):
            raise InvalidInput(f"read_only must be a bool, got {type(read_only).__name__}")
        if read_only and cluster is not None:
            raise InvalidInput("read_only is not supported with cluster=")
        if read_only:
            if not path.is_dir():
                raise StorageError(f"{path}: no data directory to open read-only")
        else:
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
        if read_only:
            return cls(
                path, cfg, clock if clock is not None else SystemClock(), _lock=None, read_only=True
            )
        lock = DataDirLock(path)
        try:
            return cls(path, cfg, clock if clock is not None else SystemClock(), _lock=lock)
        except BaseException:
            lock.release()
            raise

    def _start_tree(self, worker_names: tuple[str, ...]) -> pykka.ActorRef[Any]:
        cfg = self.config
        reg = self.registry
        gateway_children = [
            ChildSpec(
                id=name,
                start=functools.partial(GatewayWorker.start, name, self._gateway, reg),
                name=name,
            )
            for name in worker_names
        ]
        retrieval_children = [
            ChildSpec(
                id=name,
                start=functools.partial(RetrievalWorker.start, cfg, reg, self._gateway, self.clock),
                name=name,
            )
            for name in self._retrieval_names
        ]
        children = [
            ChildSpec(
                id="gateway",
                start=functools.partial(
                    Supervisor.start,
                    gateway_children,
                    registry=reg,
                    max_restarts=10,
                    max_seconds=5.0,
                ),
                kind=ChildKind.SUPERVISOR,
                name="gateway",
            ),
            ChildSpec(
                id="retrieval",
                start=functools.partial(
                    Supervisor.start,
                    retrieval_children,
                    registry=reg,
                    max_restarts=10,
                    max_seconds=5.0,
                ),
                kind=ChildKind.SUPERVISOR,
                name="retrieval",
            ),
            ChildSpec(
                id="heat-ticker",
                start=functools.partial(HeatTicker.start, reg, self._gateway),
                name="heat-ticker",
            ),
            ChildSpec(
                id="janitor",
                start=functools.partial(_Janitor.start, self._sweep_idle),
                name="janitor",
            ),
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
        return Supervisor.start(
            children, registry=reg, name="root", max_restarts=5, max_seconds=5.0
        )

    def __enter__(self) -> MemoryOS:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

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

    def _check_writable(self, what: str) -> None:
        """Raise :class:`ReadOnlyError` for ``what`` when the system was opened read-only."""
        if self.read_only:
            raise ReadOnlyError(f"{what}: {self.data_dir} was opened read-only")

    def _call(self, user_id: str, fn: Callable[[UserEntry], T], *, create: bool = True) -> T:
        """Run ``fn`` as one call of ``user_id`` (activating the user if needed).

        Reads pass ``create=False``: a user with no data raises ``UnknownUser`` and no file
        is written for it.
        """
        if not self._total.acquire(timeout=self.config.overload_timeout_seconds):
            raise Overloaded(
                f"{self.config.max_inflight_total} calls in flight (max_inflight_total)"
            )
        try:
            try:
                entry = self._enter(user_id, create)
            except CorruptDataError as exc:
                # Remembered for stats() and /metrics: one user's damage stays that user's.
                self._damaged[user_id] = str(exc)
                raise
            self._damaged.pop(user_id, None)
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
        self._check_writable("add_turn")
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
        which tier it came from, its ids and why it was chosen. A read: a user with no data
        raises :class:`~memoryos_actors.errors.UnknownUser` and nothing is written
        (:meth:`chat` answers a new user from an empty memory).
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

        self._require_data(uid)  # before loading a shared persona for nobody
        self._load_shared_persona(msg.assistant_id)
        started = time.perf_counter()
        ctx = self._call(uid, run, create=False)
        self.metrics.observe("retrieve_ms", (time.perf_counter() - started) * 1000.0)
        self._counters["retrievals"] += 1
        return ctx

    def chat(
        self, user_id: str, query: str, assistant_id: str = "default", *, fallback: bool = True
    ) -> str:
        """Answer ``query`` from memory: retrieve, generate a reply, store the turn.

        The reply's text; :meth:`chat_reply` says besides whether it came from the offline
        fallback (a degraded reply is also logged as a warning). Raises as
        :meth:`chat_reply` does.
        """
        return self.chat_reply(user_id, query, assistant_id, fallback=fallback).text

    def chat_reply(
        self, user_id: str, query: str, assistant_id: str = "default", *, fallback: bool = True
    ) -> ChatReply:
        """Answer ``query`` from memory like :meth:`chat`, and say how the reply was made.

        During a provider outage (5xx answers, timeouts, an open circuit breaker) the
        offline fallback writes the reply and the result is ``degraded`` with the
        ``reason``; with ``fallback=False`` the call raises
        :class:`~memoryos_actors.errors.ProviderUnavailable` instead and stores nothing.
        A configuration error is never answered by the fallback: a rejected or missing key
        raises :class:`~memoryos_actors.errors.ProviderAuthError`, an unknown model
        :class:`~memoryos_actors.errors.ProviderModelNotFound`, a base URL that cannot be
        reached :class:`~memoryos_actors.errors.ProviderUnreachable` (all subclasses of
        :class:`~memoryos_actors.errors.ProviderConfigError`), and nothing is stored.
        A user with no data yet is answered from an empty memory; the turn creates it.
        """
        self._check_writable("chat")
        ctx = self._chat_context(user_id, query, assistant_id)
        result = self.gateway_service.complete(
            "chat_reply",
            {"context": ctx.render(), "query": query},
            user_id=user_id,
            fallback=bool(fallback),
            raise_config_errors=True,
        )
        reply = str(result.data["reply"])
        self.add_turn(user_id, query, reply, assistant_id=assistant_id)
        self._counters["chats"] += 1
        if result.degraded:
            self._counters["degraded_chats"] += 1
            log.warning("chat.degraded", reason=result.reason)
        return ChatReply(reply, result.degraded, result.reason, result.backend)

    def _chat_context(self, user_id: str, query: str, assistant_id: str) -> MemoryContext:
        """What :meth:`chat` answers from: :meth:`retrieve`, or an empty context for a user
        with no data yet (a new user's first message; the turn stored after it creates the
        user, so a failed reply leaves nothing behind)."""
        try:
            return self.retrieve(user_id, query, assistant_id=assistant_id)
        except UnknownUser:
            pass
        ctx = MemoryContext(user_id=user_id, assistant_id=assistant_id, query=query)
        if self.config.shared_agent_persona:
            # The assistant's shared persona is not the user's: it answers a new user too.
            # It lives in the persona owner's group, retrieved like any user's memory.
            owner = persona_owner(user_id, assistant_id, True)
            self._load_shared_persona(assistant_id)
            msg = Retrieve(
                user_id=owner, assistant_id=assistant_id, query=query, timestamp=self.clock.now()
            )
            shared = self._call(owner, lambda _e: self._ask(self._retrieval_names[0], msg))
            ctx = dataclasses.replace(
                ctx, agent_profile=shared.agent_profile, agent_traits=shared.agent_traits
            )
        return ctx

    def set_user_profile(self, user_id: str, profile: UserProfile) -> None:
        """Set the user's static profile (name, gender, birth year, extras); durable on return."""
        uid = _check_user_id(user_id)
        self._check_writable("set_user_profile")
        if not isinstance(profile, UserProfile):
            raise InvalidInput(f"profile must be a UserProfile, got {type(profile).__name__}")
        self._call(uid, lambda e: self._ask(actor_names(uid)[2], SetUserProfile(uid, profile)))

    def set_agent_profile(
        self, user_id: str, profile: AgentProfile, assistant_id: str = "default"
    ) -> None:
        """Set the assistant's static persona as this user sees it; durable on return."""
        uid = _check_user_id(user_id)
        self._check_writable("set_agent_profile")
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
        pending = int(self._ask(stm_n, Pending()))
        if summaries:
            self._ask(mtm_n, FlushSummaries())
        pending += int(self._ask(mtm_n, Pending()))  # gateway jobs MTM holds back
        self._ask(lpm_n, Ping())
        return pending

    # -- shutdown --------------------------------------------------------------------------

    def close(self, timeout: float = 60.0) -> None:
        """Snapshot every active user, stop the tree and release the data directory (read-only:
        no snapshot, nothing written)."""
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
                        uid, UserPhase.DRAINING, max(deadline, time.monotonic() + 1.0)
                    )
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
            if self._lock is not None:
                self._lock.release()


# The asyncio facade lives in aio.py; importable from here as before.
from .aio import AsyncMemoryOS  # noqa: E402
