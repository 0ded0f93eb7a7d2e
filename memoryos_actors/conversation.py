"""Serving a conversation: store turns, retrieve, chat, and set the profiles.

:class:`Conversation` holds those calls of the facade; it works on the facade's
:class:`~memoryos_actors.core.SystemCore` and runs each call of a user through
:meth:`~memoryos_actors.activation.Lifecycle.call`. The calls' contracts are documented on
:class:`~memoryos_actors.api.MemoryAPI`.
"""

from __future__ import annotations

import dataclasses
import itertools
import os
import threading
import time
import uuid
from collections.abc import Generator
from contextlib import nullcontext
from typing import TYPE_CHECKING

import structlog

from supervisor import urgent, wait_while_urgent

from .actors.base import ASSISTANT_PREFIX, actor_names, persona_owner
from .chat_streams import ChatStream
from .directory import UserEntry, UserPhase
from .errors import ActorCrashed, InvalidInput, UnknownUser
from .messages import (
    AddTurn,
    AgentProfile,
    MemoryContext,
    Retrieve,
    SetAgentProfile,
    SetUserProfile,
    UserProfile,
)
from .reports import ChatReply
from .validation import MAX_ID_BYTES
from .validation import check_new_id as _check_new_id
from .validation import check_text as _check_text
from .validation import check_timestamp as _check_timestamp
from .validation import check_user_id as _check_user_id

if TYPE_CHECKING:
    from .activation import Lifecycle
    from .core import SystemCore
    from .gateway.streaming import CompletionStream

__all__ = ["Conversation"]

log = structlog.get_logger("memoryos.system")

#: Times add_turn asks again, with the same turn key, after the STM actor crashed.
_ADD_TURN_ATTEMPTS = 3

#: A turn is urgent (``supervisor.urgent``) when its user's previous ``add_turn``
#: returned at least this long ago (seconds): someone writes now and then and waits on
#: the answer. A user written back to back (an import, a flood) is bulk, unless its last
#: turn was urgent and it keeps up (see ``_KEEPS_UP_PAGES``).
_PAUSE_S = 0.005

#: A user whose last turn was urgent stays urgent when it writes again at once, as long as
#: at most this many of its pages wait for placement: a client behind its own schedule
#: (a slow turn made it late), not a flood, whose pages queue up.
_KEEPS_UP_PAGES = 1

#: Longest a bulk turn waits, before it starts, for the urgent calls in progress to
#: finish (seconds; see ``supervisor.wait_while_urgent``).
_BULK_WAIT_S = 0.005

#: How long an urgent turn or retrieval keeps busy actors giving way after it returns
#: (seconds): about how long its pages take to be placed under load, and longer than a
#: chat's pause between two turns of one exchange.
_LINGER_S = 1.0

#: Users whose last return time is kept; past it the oldest half is forgotten (a user
#: forgotten writes a bulk turn next, as a user's first).
_PAUSES_KEPT = 65_536


class _Pauses:
    """When each user's last ``add_turn`` returned (perf_counter s) and whether it was
    urgent, to tell a turn that follows a pause (urgent) from one written right after the
    last (bulk, unless the last was urgent)."""

    __slots__ = ("_last", "_lock")

    def __init__(self) -> None:
        self._last: dict[str, tuple[float, bool]] = {}
        self._lock = threading.Lock()

    def paused(self, user: str, now: float) -> bool:
        """Whether ``user``'s turn starting at ``now`` follows a pause (False for the
        first turn seen: nothing tells a chat from an import yet)."""
        last = self._last.get(user)
        return last is not None and now - last[0] >= _PAUSE_S

    def was_urgent(self, user: str) -> bool:
        """Whether ``user``'s last turn was urgent."""
        last = self._last.get(user)
        return last is not None and last[1]

    def returned(self, user: str, now: float, urgent: bool) -> None:
        """``user``'s ``add_turn`` returned (or failed) at ``now``; ``urgent``: it was."""
        with self._lock:
            last = self._last
            if len(last) >= _PAUSES_KEPT and user not in last:
                for old in list(itertools.islice(last, _PAUSES_KEPT // 2)):
                    del last[old]
            last[user] = (now, urgent)

    def forget(self, user: str) -> None:
        """Keep nothing about ``user`` (its data was forgotten)."""
        with self._lock:
            self._last.pop(user, None)


class _KeySource:
    """Keys for turns added without a caller's key: a random prefix per process and a
    count. A key only has to differ from every other key of the user that STM still
    remembers (a retried write is recognised by it); one random draw per process keeps
    that as true as a random key per turn did, without a system call per turn (which
    lets go of the interpreter lock)."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.prefix = "~" + uuid.uuid4().hex[:24] + "-"
        self.count = itertools.count(1)

    def __call__(self) -> str:
        return self.prefix + format(next(self.count), "x")


_generated_key = _KeySource()
# A forked child must not hand out its parent's keys.
os.register_at_fork(after_in_child=_generated_key.reset)


class Conversation:
    """``add_turn``, ``retrieve``, ``chat``, ``chat_reply``, ``chat_stream`` and the
    profile setters.

    Thread-safe. Counts turns, retrievals and chats in the core's metrics (``turns``,
    ``retrievals``, ``chats``, ``degraded_chats``) and samples ``add_turn_ms`` and
    ``retrieve_ms`` (milliseconds).
    """

    def __init__(self, core: SystemCore, lifecycle: Lifecycle) -> None:
        self._core = core
        self._lifecycle = lifecycle
        self._pauses = _Pauses()

    def forgot(self, user_id: str) -> None:
        """``user_id``'s data was forgotten: keep no trace of its writes either."""
        self._pauses.forget(user_id)

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
        """Store one turn; see :meth:`MemoryAPI.add_turn <memoryos_actors.api.MemoryAPI.add_turn>`."""
        core = self._core
        uid = _check_new_id(_check_user_id(user_id))
        core.check_writable("add_turn")
        if turn_key is not None:
            _check_text(turn_key, "turn_key", 200)
        limit = core.config.max_text_bytes
        msg = AddTurn(
            user_id=uid,
            assistant_id=_check_new_id(
                _check_text(assistant_id, "assistant_id", MAX_ID_BYTES), "assistant_id"
            ),
            query=_check_text(query, "query", limit, allow_empty=True, setting="max_text_bytes"),
            response=_check_text(
                response, "response", limit, allow_empty=True, setting="max_text_bytes"
            ),
            timestamp=core.clock.now() if timestamp is None else _check_timestamp(timestamp),
            # Caller keys and generated ones never collide: generated ones start with "~".
            turn_key=("u:" + turn_key) if turn_key is not None else _generated_key(),
        )
        if not msg.query and not msg.response:
            raise InvalidInput("a turn needs a query or a response")
        pauses = self._pauses
        paused = pauses.paused(uid, time.perf_counter())
        was_urgent = not paused and pauses.was_urgent(uid)
        urgent_turn = False  # set by run: whether this turn was urgent

        def run(entry: UserEntry) -> str:
            nonlocal urgent_turn
            # Backpressure happens here, in the caller's thread, before the turn is
            # written (so a retry never duplicates a stored turn): wait for room in the
            # user's placement queue, then in the process's (fair order between users),
            # and in the gateway. Waiting slows a writer; only a queue that places nothing
            # for overload_timeout_seconds answers Overloaded.
            timeout = core.config.overload_timeout_seconds
            assert entry.env is not None
            # Urgent once the user is active (its activation, if any, is done): a turn
            # after a pause has someone waiting on it (see _PAUSE_S), and so has the next
            # one of a user that keeps up (see _KEEPS_UP_PAGES).
            backlog = entry.env.insert_backlog
            urgent_turn = paused or (was_urgent and backlog.pending <= _KEEPS_UP_PAGES)
            with urgent(_LINGER_S) if urgent_turn else nullcontext():
                backlog.admit(timeout)
                core.gateway.wait_capacity(timeout)
                for attempt in range(_ADD_TURN_ATTEMPTS):
                    try:
                        return str(core.ask(actor_names(uid)[0], msg))
                    except ActorCrashed:
                        # The restarted STM recovers from the WAL and knows the turn key
                        # if the turn was written: asking again stores it exactly once
                        # either way.
                        if attempt == _ADD_TURN_ATTEMPTS - 1:
                            raise
            raise AssertionError("unreachable")

        self.load_shared_persona(msg.assistant_id)
        started = time.perf_counter()
        if not (paused or was_urgent):
            # Bulk: let an urgent call in progress finish first (bounded), so its threads
            # do not draw lots for the interpreter lock with this writer's.
            wait_while_urgent(_BULK_WAIT_S)
        try:
            page_id = self._lifecycle.call(uid, run)
        finally:
            pauses.returned(uid, time.perf_counter(), urgent_turn)
        core.metrics.observe("add_turn_ms", (time.perf_counter() - started) * 1000.0)
        core.metrics.inc("turns")
        return page_id

    def retrieve(
        self,
        user_id: str,
        query: str,
        assistant_id: str = "default",
        timestamp: float | None = None,
    ) -> MemoryContext:
        """Retrieve with provenance; see :meth:`MemoryAPI.retrieve
        <memoryos_actors.api.MemoryAPI.retrieve>`."""
        core = self._core
        uid = _check_user_id(user_id)
        msg = Retrieve(
            user_id=uid,
            assistant_id=_check_text(assistant_id, "assistant_id", MAX_ID_BYTES),
            query=_check_text(query, "query", core.config.max_text_bytes, setting="max_text_bytes"),
            timestamp=core.clock.now() if timestamp is None else _check_timestamp(timestamp),
        )

        def run(_entry: UserEntry) -> MemoryContext:
            with urgent(_LINGER_S):  # a reply waits on it
                ctx: MemoryContext = core.ask(core.next_retrieval_worker(), msg)
            return ctx

        started = time.perf_counter()
        try:
            self._lifecycle.require_data(uid)  # before loading a shared persona for nobody
            self.load_shared_persona(msg.assistant_id)
            ctx = self._lifecycle.call(uid, run, create=False)
        except UnknownUser:
            # No data yet (a new user's first message): an empty memory, nothing written.
            ctx = self._empty_context(uid, msg.query, msg.assistant_id)
        core.metrics.observe("retrieve_ms", (time.perf_counter() - started) * 1000.0)
        core.metrics.inc("retrievals")
        return ctx

    def chat_reply(
        self, user_id: str, query: str, assistant_id: str = "default", *, fallback: bool = True
    ) -> ChatReply:
        """Answer from memory and store the turn; see :meth:`MemoryAPI.chat_reply
        <memoryos_actors.api.MemoryAPI.chat_reply>`."""
        core = self._core
        core.check_writable("chat")
        # Refused before the LLM is asked: the turn could not be stored under these ids.
        _check_new_id(_check_user_id(user_id))
        _check_new_id(_check_text(assistant_id, "assistant_id", MAX_ID_BYTES), "assistant_id")
        answer = self.reply(user_id, query, assistant_id, fallback=fallback)
        self._store_chat(user_id, query, answer, assistant_id)
        return answer

    def _store_chat(self, user_id: str, query: str, answer: ChatReply, assistant_id: str) -> None:
        """Store a chat's turn and count it (a degraded reply logged with its reason)."""
        core = self._core
        self.add_turn(user_id, query, answer.text, assistant_id=assistant_id)
        core.metrics.inc("chats")
        if answer.degraded:
            core.metrics.inc("degraded_chats")
            log.warning("chat.degraded", reason=answer.reason)

    def chat_stream(
        self, user_id: str, query: str, assistant_id: str = "default", *, fallback: bool = True
    ) -> ChatStream:
        """Answer from memory piece by piece and store the turn at the end; see
        :meth:`MemoryAPI.chat_stream <memoryos_actors.api.MemoryAPI.chat_stream>`."""
        core = self._core
        core.check_writable("chat")
        _check_user_id(user_id)
        _check_text(query, "query", core.config.max_text_bytes, setting="max_text_bytes")
        _check_text(assistant_id, "assistant_id", MAX_ID_BYTES)
        made: list[CompletionStream | None] = []  # the gateway's stream, once it is asked

        def abandon() -> None:
            made.append(None)  # asked for after this: not asked at all
            for stream in made:
                if stream is not None:
                    stream.close()

        return ChatStream(self._streamed(user_id, query, assistant_id, fallback, made), abandon)

    def _streamed(
        self,
        user_id: str,
        query: str,
        assistant_id: str,
        fallback: bool,
        made: list[CompletionStream | None],
    ) -> Generator[str, None, ChatReply | None]:
        """The pieces of the reply; the turn stored once they are all given out (None
        returned, nothing stored, for a stream abandoned from another thread)."""
        core = self._core
        ctx = self.chat_context(user_id, query, assistant_id)
        if None in made:  # abandoned during retrieval
            return None
        stream = core.gateway_service.stream(
            "chat_reply",
            {"context": ctx.render(), "query": query},
            user_id=user_id,
            fallback=bool(fallback),
            raise_config_errors=True,
        )
        made.append(stream)
        try:
            yield from stream
        finally:
            stream.close()  # abandoned (or failed): the provider's request is closed
        done = stream.completion
        if done is None:  # abandoned from another thread while a piece was awaited
            return None
        answer = ChatReply(str(done.data["reply"]), done.degraded, done.reason, done.backend)
        self._store_chat(user_id, query, answer, assistant_id)
        return answer

    def reply(
        self, user_id: str, query: str, assistant_id: str = "default", *, fallback: bool = True
    ) -> ChatReply:
        """The reply :meth:`chat_reply` gives, without storing the turn and without counting
        a chat: for a caller that stores the turn itself (the sharded facade stores it with a
        turn key, so that sending the reply again after a shard death stores it once).

        Raises as :meth:`chat_reply` does; a user with no data yet is answered from an
        empty memory (:meth:`chat_context`).
        """
        ctx = self.chat_context(user_id, query, assistant_id)
        result = self._core.gateway_service.complete(
            "chat_reply",
            {"context": ctx.render(), "query": query},
            user_id=user_id,
            fallback=bool(fallback),
            raise_config_errors=True,
        )
        return ChatReply(str(result.data["reply"]), result.degraded, result.reason, result.backend)

    def chat_context(self, user_id: str, query: str, assistant_id: str) -> MemoryContext:
        """What ``chat`` answers from: :meth:`retrieve` (an empty context for a user with
        no data yet: a new user's first message; the turn stored after it creates the user,
        so a failed reply leaves nothing behind)."""
        return self.retrieve(user_id, query, assistant_id=assistant_id)

    def _empty_context(self, user_id: str, query: str, assistant_id: str) -> MemoryContext:
        """The context of a user with no data: empty, but for the assistant's shared
        persona (``shared_agent_persona``), which is not the user's. Writes nothing for
        the user."""
        core = self._core
        ctx = MemoryContext(user_id=user_id, assistant_id=assistant_id, query=query)
        if core.config.shared_agent_persona:
            # The assistant's shared persona is not the user's: it answers a new user too.
            # It lives in the persona owner's group, retrieved like any user's memory.
            owner = persona_owner(user_id, assistant_id, True)
            self.load_shared_persona(assistant_id)
            msg = Retrieve(
                user_id=owner, assistant_id=assistant_id, query=query, timestamp=core.clock.now()
            )
            shared: MemoryContext = self._lifecycle.call(
                owner, lambda _e: core.ask(core.retrieval_names[0], msg)
            )
            ctx = dataclasses.replace(
                ctx, agent_profile=shared.agent_profile, agent_traits=shared.agent_traits
            )
        return ctx

    def set_user_profile(self, user_id: str, profile: UserProfile) -> None:
        """Set the user's static profile; see :meth:`MemoryAPI.set_user_profile
        <memoryos_actors.api.MemoryAPI.set_user_profile>`."""
        core = self._core
        uid = _check_new_id(_check_user_id(user_id))
        core.check_writable("set_user_profile")
        if not isinstance(profile, UserProfile):
            raise InvalidInput(f"profile must be a UserProfile, got {type(profile).__name__}")
        self._lifecycle.call(
            uid, lambda e: core.ask(actor_names(uid)[2], SetUserProfile(uid, profile))
        )

    def set_agent_profile(
        self, user_id: str, profile: AgentProfile, assistant_id: str = "default"
    ) -> None:
        """Set the assistant's persona as this user sees it; see
        :meth:`MemoryAPI.set_agent_profile <memoryos_actors.api.MemoryAPI.set_agent_profile>`."""
        core = self._core
        uid = _check_new_id(_check_user_id(user_id))
        core.check_writable("set_agent_profile")
        if not isinstance(profile, AgentProfile):
            raise InvalidInput(f"profile must be an AgentProfile, got {type(profile).__name__}")
        aid = _check_new_id(_check_text(assistant_id, "assistant_id", MAX_ID_BYTES), "assistant_id")
        owner = persona_owner(uid, aid, core.config.shared_agent_persona)
        self._lifecycle.call(
            owner,
            lambda e: core.ask(actor_names(owner)[2], SetAgentProfile(owner, aid, profile)),
        )

    def load_shared_persona(self, assistant_id: str) -> None:
        """With ``shared_agent_persona``, make sure the assistant's persona group is live.

        Such groups are pinned: never passivated while the system runs, since every user
        of the assistant reads and feeds them.
        """
        core = self._core
        if core.config.shared_agent_persona:
            owner = ASSISTANT_PREFIX + assistant_id
            if core.directory.phase(owner) is UserPhase.ACTIVE:
                return
            self._lifecycle.call(owner, lambda e: None)
