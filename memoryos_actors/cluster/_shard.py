"""One shard: the in-process memory system over the shard's data directory.

A :class:`ShardServer` runs inside a shard process (a Ray actor, for instance). It opens
:class:`~memoryos_actors.MemoryOS` on its own data directory, so everything inside a shard
is the in-process system: its supervision tree, lazy activation of users from their WAL and
snapshot, passivation, backpressure. The engine that hosts the shard restarts the process
when it dies; the new process opens the same directory again and recovers each user on
their first call.

A call arrives as a :class:`~memoryos_actors.cluster._call.ShardCall`: a ``MemoryAPI``
method is run on the shard's system as it is (the routing policy in
:mod:`memoryos_actors.api` says which ones), a method that needs more than forwarding
(``chat_reply``, ``export_user``, ``import_user``) by the handler that :func:`serves` it.

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
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from memoryos_actors import errors as _errors
from memoryos_actors.api import MemoryAPI, Policy, Route, policy_of
from memoryos_actors.config import MemoryConfig
from memoryos_actors.errors import DataDirLocked, InvalidInput, MemoryOSError
from memoryos_actors.reports import ChatReply

from ._call import ShardCall

if TYPE_CHECKING:
    from memoryos_actors.system import MemoryOS

__all__ = ["HANDLED", "ShardServer", "error_from_reply", "error_reply", "policy_of_call", "serves"]

_F = TypeVar("_F", bound=Callable[..., Any])

#: Each handler of :class:`ShardServer` (its function) -> the ``MemoryAPI`` method it serves.
HANDLED: dict[Callable[..., Any], Callable[..., Any]] = {}


def serves(method: Callable[..., Any]) -> Callable[[_F], _F]:
    """Decorator: this :class:`ShardServer` method is the shard's part of ``method`` (a
    ``MemoryAPI`` method whose policy says ``handler=True``); the facade sends a
    :class:`~memoryos_actors.cluster._call.ShardCall` of the handler, routed and resent
    as ``method``'s policy says."""

    def mark(handler: _F) -> _F:
        HANDLED[handler] = method
        return handler

    return mark


def policy_of_call(call: ShardCall[..., Any]) -> Policy:
    """The policy a call to a shard is routed and resent by: its ``MemoryAPI`` method's,
    or for a handler the policy of the method it serves."""
    rule = policy_of(HANDLED.get(call.method, call.method))
    if rule is None or rule.route is Route.LOCAL:
        raise InvalidInput(f"a shard has no method {call.name!r}")
    return rule


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

    def call(self, call: ShardCall[..., Any]) -> tuple[Any, ...]:
        """Run ``call``; ``("ok", value)`` or ``("err", class, message)``."""
        try:
            if self.open_error is not None:
                raise self.open_error
            assert self.mem is not None
            rule = policy_of_call(call)
            if call.method in HANDLED:
                return ("ok", call.run(self))
            if rule.handler:  # served by a handler only
                raise InvalidInput(f"a shard has no method {call.name!r}")
            return ("ok", call.run(self.mem))
        except MemoryOSError as exc:
            return error_reply(exc)

    # -- calls that need more than forwarding ----------------------------------------------

    def _system(self) -> MemoryOS:
        assert self.mem is not None  # call() answers the open error before any handler
        return self.mem

    @serves(MemoryAPI.chat_reply)
    def reply(
        self, user_id: str, query: str, assistant_id: str, fallback: bool = True
    ) -> ChatReply:
        """The reply ``chat_reply`` would give, without storing the turn (the facade
        stores it with a turn key, so a retry after a shard death stores it once). Raises
        as :meth:`MemoryOS.chat_reply` does. A user with no data yet is answered from an
        empty memory, as ``MemoryOS.chat`` does."""
        return self._system().conversation.reply(user_id, query, assistant_id, fallback=fallback)

    def _scratch(self, suffix: str) -> Path:
        if suffix not in (".json", ".msgpack", ".bin", ""):
            suffix = ".bin"
        return Path(self.data_dir) / f".transfer-{uuid.uuid4().hex}{suffix}"

    @serves(MemoryAPI.export_user)
    def export_bytes(self, user_id: str, suffix: str) -> bytes:
        """Export ``user_id`` as :meth:`MemoryOS.export_user` would write it, as bytes (the
        caller's file may be on another machine)."""
        tmp = self._scratch(suffix)
        try:
            self._system().export_user(user_id, tmp)
            return tmp.read_bytes()
        finally:
            tmp.unlink(missing_ok=True)

    @serves(MemoryAPI.import_user)
    def import_bytes(self, data: bytes, suffix: str, user_id: str | None) -> str:
        """Import an export file's bytes (see :meth:`MemoryOS.import_user`)."""
        tmp = self._scratch(suffix)
        try:
            tmp.write_bytes(data)
            return self._system().import_user(tmp, user_id)
        finally:
            tmp.unlink(missing_ok=True)

    def _do_close(self) -> None:
        """Snapshot every active user and release the data directory (the engine's, when it
        stops the shard; the facade's ``close`` reaches the system as ``MemoryAPI.close``)."""
        if self.mem is not None:
            self.mem.close()
