"""The memory system's in-process facade: :class:`MemoryOS`.

A user's group is started on the first call for that user (its state loaded from the data
directory) and stopped after a snapshot when idle for ``idle_timeout_seconds`` or when more
than ``max_active_users`` groups are live (least recently used first). Callers notice only
latency. Every call is bounded: at most ``max_inflight_per_user`` calls per user and
``max_inflight_total`` overall are in flight; beyond that a call waits up to
``overload_timeout_seconds`` and then raises :class:`~memoryos_actors.errors.Overloaded`.

The facade is composed, not mixed in: it builds one :class:`~memoryos_actors.core.SystemCore`
(configuration, registry, gateway, user directory, supervision tree of
:mod:`~memoryos_actors.tree`) and hands it to the objects each public method delegates to:
:class:`~memoryos_actors.activation.Lifecycle` (activation, passivation, the per-user call),
:class:`~memoryos_actors.barrier.Barriers` (``flush``),
:class:`~memoryos_actors.conversation.Conversation` (turns, retrieval, chat, profiles),
:class:`~memoryos_actors.inspection.Inspection` (read-only views, ``kill_actor``),
:class:`~memoryos_actors.portability.Portability` (export, import, forget, repair) and
:class:`~memoryos_actors.editing.MemoryEditing` (single memories). The methods and their
contracts are declared once, in :class:`~memoryos_actors.api.MemoryAPI`; the asyncio facade
is :mod:`~memoryos_actors.aio`, the sharded one :mod:`~memoryos_actors.cluster`.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, overload

import structlog

from .activation import Lifecycle
from .api import document
from .barrier import Barriers
from .clock import Clock, SystemClock
from .config import MemoryConfig
from .conversation import Conversation
from .core import SystemCore
from .directory import UserPhase
from .editing import MemoryEditing
from .errors import InvalidInput, MemoryOSError, StorageError
from .gateway.service import CLOSE_GRACE_S
from .inspection import Inspection
from .logs import configure_logging
from .portability import Portability
from .store.lock import DataDirLock
from .validation import check_path as _check_path

if TYPE_CHECKING:
    from .chat_streams import ChatStream
    from .cluster import ClusterMemoryOS
    from .memories import ArchivedMemories, Memory, MemoryEvent, MemoryList
    from .messages import AgentProfile, MemoryContext, UserProfile
    from .reports import ChatReply, ForgetReport, RepairReport, UserState

__all__ = ["MemoryOS"]

log = structlog.get_logger("memoryos.system")


class ClusterEngine(Protocol):
    """What ``MemoryOS.open(cluster=)`` takes: an engine that starts the shards over a data
    directory and answers their facade (:class:`~memoryos_actors.cluster.RayCluster`, or
    the in-process one the CLI and tests use)."""

    def open_facade(self, data_dir: Path, config: MemoryConfig, clock: Clock) -> ClusterMemoryOS:
        """Start the shards over ``data_dir`` and return the facade."""
        ...


@document
class MemoryOS:
    """A running memory system over one data directory (synchronous API).

    Use :meth:`open` as a context manager. Every method is thread-safe; many threads may
    call for many users at once. Expected failures raise a subclass of
    :class:`~memoryos_actors.errors.MemoryOSError`. The methods are those of
    :class:`~memoryos_actors.api.MemoryAPI` (documented there).

    Attributes:
        data_dir: the data directory.
        config: the configuration.
        clock: stamps turns and retrievals given no timestamp.
        read_only: opened with ``read_only=True``: nothing in ``data_dir`` is ever changed.
        registry: the actors' registry (stable names across restarts).
        metrics: counters and latency samples, as :meth:`stats` reports them.
        gateway_service: the LLM and embedding gateway.
        conversation: turns, retrieval and chat (:class:`~memoryos_actors.conversation.
            Conversation`), for a caller that needs a reply without its turn stored.
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
        core = SystemCore(data_dir, config, clock, read_only=read_only)
        self._core = core
        self._dir_lock = _lock
        self._closed = False
        self._close_lock = threading.Lock()
        self._barriers = Barriers(core)
        self._lifecycle = Lifecycle(core, self._barriers)
        self._conversation = Conversation(core, self._lifecycle)
        self._inspection = Inspection(core, self._lifecycle)
        self._portability = Portability(core, self._lifecycle, self._barriers)
        self._editing = MemoryEditing(core, self._lifecycle, self._barriers)
        self.conversation = self._conversation
        self.data_dir = core.data_dir
        self.config = core.config
        self.clock = core.clock
        self.read_only = core.read_only
        self.registry = core.registry
        self.metrics = core.metrics
        self.gateway_service = core.gateway_service
        core.start_tree(self._lifecycle.sweep_idle)

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
        cluster: ClusterEngine,
        read_only: bool = False,
    ) -> ClusterMemoryOS: ...

    @classmethod
    def open(
        cls,
        data_dir: str | os.PathLike[str],
        config: MemoryConfig | None = None,
        *,
        clock: Clock | None = None,
        cluster: ClusterEngine | None = None,
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

    def __enter__(self) -> MemoryOS:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- turns, retrieval, chat, profiles (conversation.py) --------------------------------

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
        return self._conversation.add_turn(
            user_id, query, response, timestamp, assistant_id, turn_key=turn_key
        )

    def retrieve(
        self,
        user_id: str,
        query: str,
        assistant_id: str = "default",
        timestamp: float | None = None,
    ) -> MemoryContext:
        return self._conversation.retrieve(user_id, query, assistant_id, timestamp)

    def chat(
        self, user_id: str, query: str, assistant_id: str = "default", *, fallback: bool = True
    ) -> str:
        return self._conversation.chat_reply(user_id, query, assistant_id, fallback=fallback).text

    def chat_reply(
        self, user_id: str, query: str, assistant_id: str = "default", *, fallback: bool = True
    ) -> ChatReply:
        return self._conversation.chat_reply(user_id, query, assistant_id, fallback=fallback)

    def chat_stream(
        self, user_id: str, query: str, assistant_id: str = "default", *, fallback: bool = True
    ) -> ChatStream:
        return self._conversation.chat_stream(user_id, query, assistant_id, fallback=fallback)

    def set_user_profile(self, user_id: str, profile: UserProfile) -> None:
        self._conversation.set_user_profile(user_id, profile)

    def set_agent_profile(
        self, user_id: str, profile: AgentProfile, assistant_id: str = "default"
    ) -> None:
        self._conversation.set_agent_profile(user_id, profile, assistant_id)

    # -- inspection (inspection.py) --------------------------------------------------------

    def stats(self, user_id: str | None = None) -> dict[str, Any]:
        return self._inspection.stats(user_id)

    def users(self) -> list[str]:
        return self._inspection.users()

    def active_users(self) -> list[str]:
        return self._lifecycle.active_users()

    def user_state(self, user_id: str) -> UserState:
        return self._inspection.user_state(user_id)

    def tree(self) -> str:
        return self._inspection.tree()

    def archive(
        self, user_id: str, query: str | None = None, limit: int | None = None
    ) -> list[dict[str, Any]]:
        return self._inspection.archive(user_id, query, limit)

    def stored_page_ids(self, user_id: str) -> list[str]:
        return self._inspection.stored_page_ids(user_id)

    def kill_actor(
        self, user_id: str, tier: str, reason: str = "kill_actor", timeout: float = 10.0
    ) -> bool:
        return self._inspection.kill_actor(user_id, tier, reason, timeout)

    # -- background work (barrier.py) ------------------------------------------------------

    def flush(self, timeout: float = 300.0, *, user_id: str | None = None) -> None:
        self._barriers.flush(timeout, user_id=user_id)

    # -- data lifecycle (portability.py) ---------------------------------------------------

    def export_user(self, user_id: str, path: str | os.PathLike[str]) -> Path:
        return self._portability.export_user(user_id, path)

    def import_user(self, path: str | os.PathLike[str], user_id: str | None = None) -> str:
        return self._portability.import_user(path, user_id)

    def forget_user(self, user_id: str) -> ForgetReport:
        report = self._portability.forget_user(user_id)
        self._conversation.forgot(report.user_id)
        return report

    def repair_user(self, user_id: str) -> RepairReport:
        return self._portability.repair_user(user_id)

    # -- activation (activation.py) --------------------------------------------------------

    def passivate(self, user_id: str) -> bool:
        return self._lifecycle.passivate(user_id)

    def user_phase(self, user_id: str) -> UserPhase:
        return self._lifecycle.user_phase(user_id)

    def user_epoch(self, user_id: str) -> int:
        return self._lifecycle.user_epoch(user_id)

    # -- single memories (editing.py) ------------------------------------------------------

    def memories(
        self,
        user_id: str,
        kinds: Iterable[str] | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> MemoryList:
        return self._editing.memories(user_id, kinds, limit, cursor)

    def archived_memories(
        self,
        user_id: str,
        kind: str = "page",
        query: str | None = None,
        offset: int = 0,
        limit: int = 50,
        per_day: bool = False,
    ) -> ArchivedMemories:
        return self._editing.archived_memories(user_id, kind, query, offset, limit, per_day)

    def get_memory(self, user_id: str, memory_id: str) -> Memory:
        return self._editing.get_memory(user_id, memory_id)

    def remember(
        self, user_id: str, text: str, *, metadata: Mapping[str, Any] | None = None
    ) -> str:
        return self._editing.remember(user_id, text, metadata=metadata)

    def delete_memory(self, user_id: str, memory_id: str) -> MemoryEvent:
        return self._editing.delete_memory(user_id, memory_id)

    def correct_memory(
        self, user_id: str, memory_id: str, value: str, evidence: str = ""
    ) -> MemoryEvent:
        return self._editing.correct_memory(user_id, memory_id, value, evidence)

    def memory_history(self, user_id: str, memory_id: str) -> list[MemoryEvent]:
        return self._editing.memory_history(user_id, memory_id)

    # -- shutdown --------------------------------------------------------------------------

    def close(self, timeout: float = 60.0) -> None:
        core = self._core
        with self._close_lock:
            if self._closed:
                return
            self._closed = True
        deadline = time.monotonic() + timeout
        try:
            core.directory.close()  # no new call or lifecycle operation from now on
            if not core.directory.wait_settled(deadline):
                log.warning("close.transitions_pending")
            try:
                self._barriers.flush(timeout=max(0.001, deadline - time.monotonic()))
            except MemoryOSError as exc:
                log.warning("close.flush_failed", error=repr(exc))
            self._lifecycle.passivate_all(deadline)
        finally:
            core.tree.stop_timers()
            self._lifecycle.shutdown()
            core.tree.stop(timeout)
            for entry in core.directory.entries():
                if entry.store is not None:
                    entry.store.close()
            # Completions still running get what is left of the caller's timeout (at most
            # the gateway's own grace); the work they owe is asked for again after a reopen.
            left = max(0.0, deadline - time.monotonic())
            core.gateway_service.close(grace=min(CLOSE_GRACE_S, left))
            if self._dir_lock is not None:
                self._dir_lock.release()
