"""One shard: the in-process memory system over the shard's data directory.

A :class:`ShardServer` runs inside a shard process (a Ray actor, for instance). It opens
:class:`~memoryos_actors.MemoryOS` on its own data directory, so everything inside a shard
is the in-process system: its supervision tree, lazy activation of users from their WAL and
snapshot, passivation, backpressure. The engine that hosts the shard restarts the process
when it dies; the new process opens the same directory again and recovers each user on
their first call.

Typed errors cross the process boundary as values (``("err", class name, message)``), not
as exceptions, so no engine gets to wrap them: the facade raises the same
:class:`~memoryos_actors.errors.MemoryOSError` subclass the in-process system would.
"""

from __future__ import annotations

import os
import sys
import time
import uuid
import warnings
from pathlib import Path
from typing import Any

from memoryos_actors import errors as _errors
from memoryos_actors.config import MemoryConfig
from memoryos_actors.errors import DataDirLocked, InvalidInput, MemoryOSError

__all__ = ["ShardServer", "error_from_reply", "error_reply"]

#: Facade methods a shard serves as they are (the arguments were checked by the facade
#: only as far as routing needs; the shard's MemoryOS checks the rest).
_PLAIN = frozenset(
    {
        "add_turn",
        "retrieve",
        "set_user_profile",
        "set_agent_profile",
        "stats",
        "users",
        "user_state",
        "archive",
        "archived_memories",
        "stored_page_ids",
        "flush",
        "forget_user",
        "repair_user",
        "passivate",
        "active_users",
        "tree",
        "user_phase",
        "user_epoch",
        "kill_actor",
        "memories",
        "get_memory",
        "delete_memory",
        "correct_memory",
        "memory_history",
    }
)


def error_reply(exc: MemoryOSError) -> tuple[str, str, str]:
    """``exc`` as a reply value: the nearest public error class's name and the message."""
    name = "MemoryOSError"
    for cls in type(exc).__mro__:
        if cls.__module__ == _errors.__name__ and issubclass(cls, MemoryOSError):
            name = cls.__name__
            break
    return ("err", name, str(exc))


def error_from_reply(reply: tuple[str, str, str]) -> MemoryOSError:
    """The typed error a shard sent with :func:`error_reply`."""
    _tag, name, message = reply
    cls = getattr(_errors, name, None)
    if not (isinstance(cls, type) and issubclass(cls, MemoryOSError)):
        cls = MemoryOSError
    return cls(message)


class ShardServer:
    """The memory system of one shard (constructed by the engine, in the shard process).

    Args:
        shard: the shard number.
        data_dir: the shard's data directory (reachable from every node that may host it).
        config: the memory configuration (the same for every shard).
        lock_wait_seconds: how long to wait for the data directory's lock when a previous
            incarnation of this shard is still exiting, seconds.
    """

    def __init__(
        self, shard: int, data_dir: str, config: MemoryConfig, lock_wait_seconds: float = 30.0
    ) -> None:
        from memoryos_actors.system import MemoryOS

        self.shard = shard
        self.data_dir = data_dir
        self.started_at = time.time()
        self.open_error: MemoryOSError | None = None
        self.mem: MemoryOS | None = None
        deadline = time.monotonic() + lock_wait_seconds
        while True:
            try:
                self.mem = MemoryOS.open(data_dir, config)
                break
            except DataDirLocked as exc:
                # The process this one replaces may still be dying (a removed node's worker):
                # its lock goes away with it.
                if time.monotonic() > deadline:
                    self.open_error = exc
                    break
                time.sleep(0.1)
            except MemoryOSError as exc:
                self.open_error = exc  # reported on every call, never a crash loop
                break

    def info(self) -> dict[str, Any]:
        """Where this shard runs: pid, node, data directory, start time, open error."""
        node_id, restarted = "", False
        # Inside a Ray actor Ray is loaded already; anywhere else (shards in this process)
        # there is no actor to ask, and importing Ray would cost seconds and memory.
        ray = sys.modules.get("ray")
        # Only inside a Ray actor: a driver (or a process without Ray) has no actor.
        if (
            ray is not None
            and ray.is_initialized()
            and ray.get_runtime_context().get_actor_id() is not None
        ):
            ctx = ray.get_runtime_context()
            node_id = ctx.get_node_id()
            with warnings.catch_warnings():
                # The property is current API; Ray's implementation of it calls a
                # deprecated one of its own.
                warnings.simplefilter("ignore", DeprecationWarning)
                restarted = bool(ctx.was_current_actor_reconstructed)
        return {
            "shard": self.shard,
            "pid": os.getpid(),
            "node_id": node_id,
            "data_dir": self.data_dir,
            "started_at": self.started_at,
            "restarted": restarted,
            "open_error": None if self.open_error is None else error_reply(self.open_error),
        }

    def call(self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, ...]:
        """Run facade method ``method``; ``("ok", value)`` or ``("err", class, message)``."""
        try:
            if self.open_error is not None:
                raise self.open_error
            assert self.mem is not None
            if method in _PLAIN:
                return ("ok", getattr(self.mem, method)(*args, **kwargs))
            handler = getattr(self, f"_do_{method}", None)
            if handler is None:
                raise InvalidInput(f"a shard has no method {method!r}")
            return ("ok", handler(*args, **kwargs))
        except MemoryOSError as exc:
            return error_reply(exc)

    # -- calls that need more than forwarding ----------------------------------------------

    def _do_ping(self) -> int:
        return self.shard

    def _do_reply(
        self, user_id: str, query: str, assistant_id: str, fallback: bool = True
    ) -> tuple[str, bool, str | None, str]:
        """The reply ``chat_reply`` would give, as ``(text, degraded, reason, backend)``,
        without storing the turn (the facade stores it with a turn key, so a retry after a
        shard death stores it once). Raises as :meth:`MemoryOS.chat_reply` does. A user with
        no data yet is answered from an empty memory, as ``MemoryOS.chat`` does."""
        assert self.mem is not None
        ctx = self.mem._chat_context(user_id, query, assistant_id)
        result = self.mem.gateway_service.complete(
            "chat_reply",
            {"context": ctx.render(), "query": query},
            user_id=user_id,
            fallback=fallback,
            raise_config_errors=True,
        )
        return (str(result.data["reply"]), result.degraded, result.reason, result.backend)

    def _scratch(self, suffix: str) -> Path:
        if suffix not in (".json", ".msgpack", ".bin", ""):
            suffix = ".bin"
        return Path(self.data_dir) / f".transfer-{uuid.uuid4().hex}{suffix}"

    def _do_export_bytes(self, user_id: str, suffix: str) -> bytes:
        """Export ``user_id`` as :meth:`MemoryOS.export_user` would write it, as bytes (the
        caller's file may be on another machine)."""
        assert self.mem is not None
        tmp = self._scratch(suffix)
        try:
            self.mem.export_user(user_id, tmp)
            return tmp.read_bytes()
        finally:
            tmp.unlink(missing_ok=True)

    def _do_import_bytes(self, data: bytes, suffix: str, user_id: str | None) -> str:
        """Import an export file's bytes (see :meth:`MemoryOS.import_user`)."""
        assert self.mem is not None
        tmp = self._scratch(suffix)
        try:
            tmp.write_bytes(data)
            return self.mem.import_user(tmp, user_id)
        finally:
            tmp.unlink(missing_ok=True)

    def _do_close(self) -> None:
        """Snapshot every active user and release the data directory."""
        if self.mem is not None:
            self.mem.close()
