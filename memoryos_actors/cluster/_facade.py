"""The sharded facade: the :class:`~memoryos_actors.MemoryOS` API over shard processes.

Every call for a user goes to the shard :func:`~memoryos_actors.cluster.shard_of` names;
calls about every user (``users``, ``flush``, ``stats()``...) go to every shard at once and
their answers are merged. Arguments, return types and typed errors are those of
:class:`~memoryos_actors.MemoryOS`. Where each call goes, whether it is sent again after a
shard death and how the answers merge is not decided here: each method's policy in
:mod:`memoryos_actors.api` (:data:`~memoryos_actors.api.POLICIES`) says it, and every
method hands a typed :class:`~memoryos_actors.cluster._call.ShardCall` to ``_send``, which
follows it.

Two supervision layers::

    engine (Ray): restarts a dead shard process (max_restarts)
    └── shard-N process: ShardServer -> MemoryOS over <data dir>/shard-N/
        └── root supervisor (one_for_one) ... user:<id> (rest_for_one): stm, mtm, lpm

When a shard process dies with calls in flight, the engine starts it again and the new
process recovers each user from their WAL and snapshot on first use. Calls that are safe
to repeat (``resend`` in their policy) are sent again until the shard answers (up to
``retry_seconds``; the calls themselves are :mod:`~memoryos_actors.cluster._routing`'s):
reads, profile setters (they set a value), ``flush``, and ``add_turn``, which carries a
turn key the shard's STM recognises, so a turn written just before the death is answered,
not stored again. The other calls (``forget_user``, ``import_user``, ``repair_user``,
``passivate``, ``kill_actor``, ``delete_memory``, ``correct_memory``) raise
:class:`~memoryos_actors.errors.ActorCrashed`; they are safe to call again by hand.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable, Generator, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

import structlog

from memoryos_actors.api import MemoryAPI, Route
from memoryos_actors.chat_streams import ChatStream, text_pieces
from memoryos_actors.clock import Clock
from memoryos_actors.config import MemoryConfig
from memoryos_actors.directory import UserPhase
from memoryos_actors.errors import InvalidInput, MemoryOSError, StorageError
from memoryos_actors.messages import AgentProfile, MemoryContext, UserProfile
from memoryos_actors.reports import ChatReply
from memoryos_actors.store.export import read_export
from memoryos_actors.store.lock import DataDirLock
from memoryos_actors.validation import MAX_ID_BYTES
from memoryos_actors.validation import check_new_id as _check_new_id
from memoryos_actors.validation import check_text as _check_text
from memoryos_actors.validation import check_user_id as _check_user_id

from ._backend import ShardDown, ShardHost, ShardInfo
from ._call import ShardCall
from ._placement import shard_dir, shard_of
from ._routing import ClusterSettings, ShardCalls, merge_answers
from ._shard import ShardServer, error_from_reply, policy_of_call
from .doors import FrontDoor, LayoutWatch

if TYPE_CHECKING:
    from memoryos_actors.memories import ArchivedMemories, Memory, MemoryEvent, MemoryList
    from memoryos_actors.reports import ForgetReport, RepairReport, UserState

__all__ = ["ClusterMemoryOS", "open_cluster"]

log = structlog.get_logger("memoryos.cluster")

R = TypeVar("R")


class ClusterMemoryOS:
    """A memory system whose users are spread over shard processes (synchronous API).

    Built by :meth:`MemoryOS.open(..., cluster=...) <memoryos_actors.MemoryOS.open>`; the
    methods, their arguments, return types and errors are those of
    :class:`~memoryos_actors.MemoryOS`. Thread-safe. ``clock`` stamps turns and retrievals
    given no timestamp (the shards' background timing uses their own system clock).
    """

    def __init__(
        self,
        data_dir: Path,
        config: MemoryConfig,
        clock: Clock,
        host: ShardHost,
        settings: ClusterSettings,
        *,
        _lock: DataDirLock | None,
        _door: FrontDoor | None = None,
        _watch: LayoutWatch | None = None,
    ) -> None:
        self.data_dir = data_dir
        self.config = config
        self.clock = clock
        self.shards = host.shards
        self._host = host
        self._lock = _lock
        #: This process's front door registration when opened shared (else ``None``).
        self.door = _door
        #: The layout generation this facade routes by.
        self.generation = _watch.generation if _watch is not None else 1
        #: Every call to the shards goes through here (retries, fan-out, in-flight count).
        self._calls = ShardCalls(host, settings, guard=None if _watch is None else _watch.check)

    def __enter__(self) -> ClusterMemoryOS:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- routing ---------------------------------------------------------------------------

    def shard_for(self, user_id: str) -> int:
        """The shard number that holds ``user_id``."""
        return shard_of(_check_user_id(user_id), self.shards)

    def _send(
        self, call: ShardCall[..., R], user_id: str | None = None, *, timeout: float | None = None
    ) -> R:
        """``call`` sent as its method's policy says (:data:`~memoryos_actors.api.POLICIES`):
        to ``user_id``'s shard, or to every shard with the answers merged; sent again after
        a shard death if the policy allows it."""
        rule = policy_of_call(call)
        if rule.route is Route.USER or (rule.route is Route.USER_OR_ALL and user_id is not None):
            shard = shard_of(_check_user_id(user_id), self.shards)  # InvalidInput for None
            return self._calls.call(shard, call, retry=rule.resend, timeout=timeout)
        assert rule.merge is not None  # a policy that fans out says how to merge
        parts = self._calls.call_all(call, retry=rule.resend, timeout=timeout)
        return cast("R", merge_answers(rule.merge, parts))

    # -- the API of MemoryOS ---------------------------------------------------------------

    # The methods that are forwarded as they are, generated from their policies
    # (`cog -r memoryos_actors/cluster/_facade.py`; a test fails when this is not what that
    # generates now). Those written below need more than forwarding (a turn key, the
    # facade's clock and counters, a merge with the facade's own stats, a file written
    # here) or say more about the cluster (`by_hand`).
    # [[[cog
    # import cog, textwrap
    # from memoryos_actors.api import POLICIES, Route, twin_methods
    # by_hand = {"add_turn", "retrieve", "memories", "user_epoch", "kill_actor", "close"}
    # def forwarded(name):
    #     rule = POLICIES[name]
    #     plain = rule.route in (Route.USER, Route.ALL) and not rule.handler
    #     return plain and name not in by_hand
    # def body(name, call):
    #     rule = POLICIES[name]
    #     where = "on the user's shard" if rule.route is Route.USER else (
    #         f"on every shard at once, the answers merged ({rule.merge.value})")
    #     again = "sent again" if rule.resend else "not sent again (ActorCrashed)"
    #     doc = f"See :meth:`MemoryOS.{name}`: {where}; {again} after a shard death."
    #     doc = textwrap.fill(f'"""{doc}"""', 92, subsequent_indent=" " * 8)
    #     user = ", user_id" if rule.route is Route.USER else ""
    #     return f"{doc}\n        return self._send(ShardCall(MemoryAPI.{name}{call}){user})"
    # cog.out(twin_methods(body, filter(forwarded, POLICIES), coroutines=False))
    # ]]]
    def remember(
        self, user_id: str, text: str, *, metadata: Mapping[str, Any] | None = None
    ) -> str:
        """See :meth:`MemoryOS.remember`: on the user's shard; not sent again (ActorCrashed) after a
        shard death."""
        return self._send(ShardCall(MemoryAPI.remember, user_id, text, metadata=metadata), user_id)

    def set_user_profile(self, user_id: str, profile: UserProfile) -> None:
        """See :meth:`MemoryOS.set_user_profile`: on the user's shard; sent again after a shard
        death."""
        return self._send(ShardCall(MemoryAPI.set_user_profile, user_id, profile), user_id)

    def set_agent_profile(
        self, user_id: str, profile: AgentProfile, assistant_id: str = "default"
    ) -> None:
        """See :meth:`MemoryOS.set_agent_profile`: on the user's shard; sent again after a shard
        death."""
        return self._send(
            ShardCall(MemoryAPI.set_agent_profile, user_id, profile, assistant_id), user_id
        )

    def users(self) -> list[str]:
        """See :meth:`MemoryOS.users`: on every shard at once, the answers merged (sorted union);
        sent again after a shard death."""
        return self._send(ShardCall(MemoryAPI.users))

    def active_users(self) -> list[str]:
        """See :meth:`MemoryOS.active_users`: on every shard at once, the answers merged (joined in
        shard order); sent again after a shard death."""
        return self._send(ShardCall(MemoryAPI.active_users))

    def user_state(self, user_id: str) -> UserState:
        """See :meth:`MemoryOS.user_state`: on the user's shard; sent again after a shard death."""
        return self._send(ShardCall(MemoryAPI.user_state, user_id), user_id)

    def tree(self) -> str:
        """See :meth:`MemoryOS.tree`: on every shard at once, the answers merged (one section per
        shard); sent again after a shard death."""
        return self._send(ShardCall(MemoryAPI.tree))

    def archive(
        self, user_id: str, query: str | None = None, limit: int | None = None
    ) -> list[dict[str, Any]]:
        """See :meth:`MemoryOS.archive`: on the user's shard; sent again after a shard death."""
        return self._send(ShardCall(MemoryAPI.archive, user_id, query, limit), user_id)

    def stored_page_ids(self, user_id: str) -> list[str]:
        """See :meth:`MemoryOS.stored_page_ids`: on the user's shard; sent again after a shard
        death."""
        return self._send(ShardCall(MemoryAPI.stored_page_ids, user_id), user_id)

    def forget_user(self, user_id: str) -> ForgetReport:
        """See :meth:`MemoryOS.forget_user`: on the user's shard; not sent again (ActorCrashed)
        after a shard death."""
        return self._send(ShardCall(MemoryAPI.forget_user, user_id), user_id)

    def repair_user(self, user_id: str) -> RepairReport:
        """See :meth:`MemoryOS.repair_user`: on the user's shard; not sent again (ActorCrashed)
        after a shard death."""
        return self._send(ShardCall(MemoryAPI.repair_user, user_id), user_id)

    def passivate(self, user_id: str) -> bool:
        """See :meth:`MemoryOS.passivate`: on the user's shard; not sent again (ActorCrashed) after
        a shard death."""
        return self._send(ShardCall(MemoryAPI.passivate, user_id), user_id)

    def user_phase(self, user_id: str) -> UserPhase:
        """See :meth:`MemoryOS.user_phase`: on the user's shard; sent again after a shard death."""
        return self._send(ShardCall(MemoryAPI.user_phase, user_id), user_id)

    def archived_memories(
        self,
        user_id: str,
        kind: str = "page",
        query: str | None = None,
        offset: int = 0,
        limit: int = 50,
        per_day: bool = False,
    ) -> ArchivedMemories:
        """See :meth:`MemoryOS.archived_memories`: on the user's shard; sent again after a shard
        death."""
        return self._send(
            ShardCall(MemoryAPI.archived_memories, user_id, kind, query, offset, limit, per_day),
            user_id,
        )

    def get_memory(self, user_id: str, memory_id: str) -> Memory:
        """See :meth:`MemoryOS.get_memory`: on the user's shard; sent again after a shard death."""
        return self._send(ShardCall(MemoryAPI.get_memory, user_id, memory_id), user_id)

    def delete_memory(self, user_id: str, memory_id: str) -> MemoryEvent:
        """See :meth:`MemoryOS.delete_memory`: on the user's shard; not sent again (ActorCrashed)
        after a shard death."""
        return self._send(ShardCall(MemoryAPI.delete_memory, user_id, memory_id), user_id)

    def correct_memory(
        self, user_id: str, memory_id: str, value: str, evidence: str = ""
    ) -> MemoryEvent:
        """See :meth:`MemoryOS.correct_memory`: on the user's shard; not sent again (ActorCrashed)
        after a shard death."""
        return self._send(
            ShardCall(MemoryAPI.correct_memory, user_id, memory_id, value, evidence), user_id
        )

    def memory_history(self, user_id: str, memory_id: str) -> list[MemoryEvent]:
        """See :meth:`MemoryOS.memory_history`: on the user's shard; sent again after a shard
        death."""
        return self._send(ShardCall(MemoryAPI.memory_history, user_id, memory_id), user_id)

    # [[[end]]]

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
        """See :meth:`MemoryOS.add_turn <memoryos_actors.MemoryOS.add_turn>`.

        Without ``turn_key`` one is made here, before the first attempt, so that sending
        the turn again after a shard death stores it once.
        """
        key = uuid.uuid4().hex if turn_key is None else turn_key
        started = time.perf_counter()
        stamp = self.clock.now() if timestamp is None else timestamp
        call = ShardCall(
            MemoryAPI.add_turn, user_id, query, response, stamp, assistant_id, turn_key=key
        )
        page_id = self._send(call, user_id)
        self._calls.observe("add_turn_ms", started)
        self._calls.count("turns")
        return page_id

    def retrieve(
        self,
        user_id: str,
        query: str,
        assistant_id: str = "default",
        timestamp: float | None = None,
    ) -> MemoryContext:
        """See :meth:`MemoryOS.retrieve <memoryos_actors.MemoryOS.retrieve>`."""
        started = time.perf_counter()
        stamp = self.clock.now() if timestamp is None else timestamp
        ctx = self._send(
            ShardCall(MemoryAPI.retrieve, user_id, query, assistant_id, stamp), user_id
        )
        self._calls.observe("retrieve_ms", started)
        self._calls.count("retrievals")
        return ctx

    def chat(
        self, user_id: str, query: str, assistant_id: str = "default", *, fallback: bool = True
    ) -> str:
        """See :meth:`MemoryOS.chat <memoryos_actors.MemoryOS.chat>`."""
        return self.chat_reply(user_id, query, assistant_id, fallback=fallback).text

    def chat_reply(
        self, user_id: str, query: str, assistant_id: str = "default", *, fallback: bool = True
    ) -> ChatReply:
        """See :meth:`MemoryOS.chat_reply <memoryos_actors.MemoryOS.chat_reply>`."""
        # Refused before the LLM is asked: the turn could not be stored under these ids.
        _check_new_id(_check_user_id(user_id))
        _check_new_id(_check_text(assistant_id, "assistant_id", MAX_ID_BYTES), "assistant_id")
        call = ShardCall(ShardServer.reply, user_id, query, assistant_id, bool(fallback))
        reply = self._send(call, user_id)
        self.add_turn(user_id, query, reply.text, assistant_id=assistant_id)
        self._calls.count("chats", *(("degraded_chats",) if reply.degraded else ()))
        if reply.degraded:
            log.warning("chat.degraded", reason=reply.reason)
        return reply

    def chat_stream(
        self, user_id: str, query: str, assistant_id: str = "default", *, fallback: bool = True
    ) -> ChatStream:
        """See :meth:`MemoryOS.chat_stream <memoryos_actors.MemoryOS.chat_stream>`. On a
        cluster the reply is made whole on the user's shard (no streaming across
        processes), then given out in pieces; the turn is stored at the end, with a turn
        key, as :meth:`chat_reply` stores it."""
        _check_user_id(user_id)  # bad arguments raise at the call, as in-process
        _check_text(query, "query", self.config.max_text_bytes, setting="max_text_bytes")
        return ChatStream(self._streamed(user_id, query, assistant_id, bool(fallback)))

    def _streamed(
        self, user_id: str, query: str, assistant_id: str, fallback: bool
    ) -> Generator[str, None, ChatReply]:
        call = ShardCall(ShardServer.reply, user_id, query, assistant_id, fallback)
        reply = self._send(call, user_id)
        yield from text_pieces(reply.text)
        self.add_turn(user_id, query, reply.text, assistant_id=assistant_id)
        self._calls.count("chats", *(("degraded_chats",) if reply.degraded else ()))
        if reply.degraded:
            log.warning("chat.degraded", reason=reply.reason)
        return reply

    def user_epoch(self, user_id: str) -> int:
        """See :meth:`MemoryOS.user_epoch <memoryos_actors.MemoryOS.user_epoch>`: epochs are
        unique within the user's shard process (a restarted shard starts them again)."""
        return self._send(ShardCall(MemoryAPI.user_epoch, user_id), user_id)

    def memories(
        self,
        user_id: str,
        kinds: Iterable[str] | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> MemoryList:
        """See :meth:`MemoryOS.memories <memoryos_actors.MemoryOS.memories>`."""
        listed = None if kinds is None else list(kinds)  # a generator does not travel
        return self._send(ShardCall(MemoryAPI.memories, user_id, listed, limit, cursor), user_id)

    def kill_actor(
        self, user_id: str, tier: str, reason: str = "kill_actor", timeout: float = 10.0
    ) -> bool:
        """See :meth:`MemoryOS.kill_actor <memoryos_actors.MemoryOS.kill_actor>` (fault
        injection inside the user's shard; the shard process itself stays up)."""
        call = ShardCall(MemoryAPI.kill_actor, user_id, tier, reason, timeout)
        return self._send(call, user_id)

    def flush(self, timeout: float = 300.0, *, user_id: str | None = None) -> None:
        """See :meth:`MemoryOS.flush <memoryos_actors.MemoryOS.flush>`: every shard at
        once, or with ``user_id`` only the shard holding that user."""
        from memoryos_actors.validation import check_timeout as _check_timeout

        seconds = _check_timeout(timeout)
        call = (
            ShardCall(MemoryAPI.flush, seconds)
            if user_id is None
            else ShardCall(MemoryAPI.flush, seconds, user_id=user_id)
        )
        self._send(call, user_id, timeout=seconds + 30.0)

    def stats(self, user_id: str | None = None) -> dict[str, Any]:
        """See :meth:`MemoryOS.stats <memoryos_actors.MemoryOS.stats>`.

        For the whole system: the shards' integer counters added up, their latency
        percentiles as the worst shard's, the facade's own ``add_turn_ms_*`` and
        ``retrieve_ms_*`` (measured here, so they include the trip to the shard), and each
        shard's full stats under ``"shards"``.
        """
        merged = self._send(ShardCall(MemoryAPI.stats, user_id), user_id)
        if user_id is not None:
            return merged
        parts, damaged = merged.pop("shards"), merged.pop("damaged")
        merged.update(self._calls.measured())
        merged["damaged"] = damaged
        merged["backend"] = type(self._host).__name__
        merged["shard_count"] = self.shards
        merged["shards"] = parts
        return merged

    def shard_info(self) -> list[ShardInfo]:
        """Where each shard runs now (pid, node, data directory, incarnation)."""
        return [ShardInfo.from_info(n, self._calls.info(n)) for n in range(self.shards)]

    def shard_states(self, timeout: float = 1.0) -> list[dict[str, Any]]:
        """Each shard's state now, for readiness checks: every shard is asked at once and
        none waited for past ``timeout`` seconds in all (no retry, unlike the other calls).

        One dict per shard, in shard order: ``shard``, ``state`` and, when it answered,
        ``pid`` and ``incarnation`` (as in :meth:`shard_info`). ``state`` is ``"up"``,
        ``"down"`` (its process died or is not running; the engine may be restarting it),
        ``"not answering"`` (no answer within ``timeout``: starting, restarting or too
        busy) or ``"failed"`` (it runs but cannot open its data directory; ``error`` says
        why).

        Raises:
            LayoutChanged: the data directory was rebalanced since this facade opened it
                (its shards are not the ones it routes to).
        """
        if self._calls.guard is not None:
            self._calls.guard()
        deadline = time.monotonic() + timeout
        handles: list[Any] = []
        for n in range(self.shards):
            try:
                handles.append(self._host.submit(n, "info"))
            except ShardDown:
                handles.append(None)
        out: list[dict[str, Any]] = []
        for n, handle in enumerate(handles):
            row: dict[str, Any] = {"shard": n, "state": "down"}
            out.append(row)
            if handle is None:
                continue
            try:
                info = self._host.result(handle, max(0.0, deadline - time.monotonic()))
            except ShardDown:
                continue
            except (TimeoutError, MemoryOSError):
                row["state"] = "not answering"
                continue
            row.update(pid=int(info["pid"]), incarnation=int(bool(info["restarted"])))
            if info["open_error"] is not None:
                row.update(state="failed", error=str(info["open_error"][2]))
            else:
                row["state"] = "up"
        return out

    # -- data lifecycle --------------------------------------------------------------------

    def export_user(self, user_id: str, path: str | os.PathLike[str]) -> Path:
        """See :meth:`MemoryOS.export_user <memoryos_actors.MemoryOS.export_user>`.

        The shard sends the file's bytes; it is written here, on the facade's machine.
        """
        from memoryos_actors.validation import check_path as _check_path

        out = _check_path(path, "path")
        suffix = ".json" if out.suffix.lower() == ".json" else ""
        data = self._send(ShardCall(ShardServer.export_bytes, user_id, suffix), user_id)
        tmp = out.with_name(f".{out.name}.{uuid.uuid4().hex}.tmp")
        try:
            tmp.write_bytes(data)
            os.replace(tmp, out)
        except OSError as exc:
            tmp.unlink(missing_ok=True)
            raise StorageError(f"{out}: cannot write the export: {exc}") from exc
        return out

    def import_user(self, path: str | os.PathLike[str], user_id: str | None = None) -> str:
        """See :meth:`MemoryOS.import_user <memoryos_actors.MemoryOS.import_user>`.

        The file is read here and its bytes sent to the user's shard.
        """
        from memoryos_actors.validation import check_path as _check_path

        src = _check_path(path, "path")
        payload = read_export(src)  # typed errors for a damaged file, before any routing
        target = user_id if user_id is not None else payload.get("user_id")
        uid = _check_user_id(target)
        suffix = ".json" if src.suffix.lower() == ".json" else ""
        # Routed by the user it is stored as: ``user_id``, else the file's (the shard reads
        # that from the file again).
        call = ShardCall(ShardServer.import_bytes, src.read_bytes(), suffix, user_id)
        return self._send(call, uid)

    # -- shutdown --------------------------------------------------------------------------

    def close(self, timeout: float = 60.0) -> None:
        """Snapshot every active user on every shard, stop the shards, release the data
        directory. Idempotent."""
        if not self._calls.drain(timeout):
            return  # closed before
        # Closing is not routing: it goes to this facade's own shards whatever the layout.
        self._calls.guard = None
        try:
            # Shared shards outlive their front doors (`memoryos shards stop` closes them).
            if self._host.owns_shards:
                try:
                    self._send(ShardCall(MemoryAPI.close), timeout=timeout)
                except MemoryOSError as exc:
                    # A shard that cannot snapshot loses nothing: its WAL has every turn.
                    log.warning("close.shard_failed", error=repr(exc))
        finally:
            self._calls.mark_closed()
            try:
                self._host.close()
            finally:
                if self._lock is not None:
                    self._lock.release()
                if self.door is not None:
                    self.door.close()


def open_cluster(
    data_dir: Path,
    config: MemoryConfig,
    clock: Clock,
    shards: int,
    settings: ClusterSettings,
    make_host: Callable[[list[str]], ShardHost],
    *,
    shared: bool = False,
) -> ClusterMemoryOS:
    """Lock ``data_dir``, check its shard layout, start the shards, return the facade.

    ``make_host`` gets the shards' data directories and starts one shard on each (it may
    read the layout: it is checked by then). With ``shared`` the facade is a front door:
    it registers as one (:class:`~memoryos_actors.cluster.doors.FrontDoor`) instead of
    taking the data directory's exclusive lock.
    """
    from ._placement import check_layout

    if config.shared_agent_persona:
        raise InvalidInput(
            "shared_agent_persona is not available with a cluster yet: each shard would hold "
            "its own copy of an assistant's persona"
        )
    # Shard processes have their own working directory (and maybe another machine): give
    # them absolute paths.
    data_dir = data_dir.resolve()
    lock: DataDirLock | None = None
    door: FrontDoor | None = None
    if shared:
        door = FrontDoor(data_dir)
    else:
        lock = DataDirLock(data_dir)
    host: ShardHost | None = None
    try:
        layout = check_layout(data_dir, shards)
        watch = LayoutWatch(data_dir, layout.generation)
        if door is not None:
            door.opened(layout.generation)
        dirs = []
        for n in range(shards):
            d = shard_dir(data_dir, n)
            d.mkdir(exist_ok=True)
            dirs.append(str(d))
        host = make_host(dirs)
        mem = ClusterMemoryOS(
            data_dir, config, clock, host, settings, _lock=lock, _door=door, _watch=watch
        )
        for n in range(shards):
            try:
                info = host.result(host.submit(n, "info"), settings.call_timeout_seconds)
            except (ShardDown, TimeoutError) as exc:
                raise StorageError(f"shard {n} ({dirs[n]}) did not start: {exc}") from None
            if info["open_error"] is not None:
                raise error_from_reply(info["open_error"])
        return mem
    except BaseException:
        if host is not None:
            host.close()
        if lock is not None:
            lock.release()
        if door is not None:
            door.close()
        raise
