"""The public API, declared once: :class:`MemoryAPI` and its asyncio twin
:class:`AsyncMemoryAPI`.

:class:`~memoryos_actors.MemoryOS` (in-process) and
:class:`~memoryos_actors.cluster.ClusterMemoryOS` (sharded) implement :class:`MemoryAPI`;
:class:`~memoryos_actors.AsyncMemoryOS` implements :class:`AsyncMemoryAPI`. mypy checks
each of them against its protocol (the assignments at the end of this module), and
``tests/docs/test_public_api.py`` checks the same at run time (parameter names, kinds,
defaults and annotations). Code that works with any of the facades can take a
``MemoryAPI``.

Beside each method of :class:`MemoryAPI` is its routing policy, as data (the
:func:`policy` decorator; :data:`POLICIES` collects them): how the sharded facade routes
the call (to the shard of its user, to every shard at once, or not at all: answered by the
facade itself), whether it may send the call again after a shard death, and how the
shards' answers to a fanned-out call merge. The sharded facade and the shard server are
driven by that table (:mod:`memoryos_actors.cluster`). :class:`AsyncMemoryAPI`, the
coroutines of :class:`~memoryos_actors.AsyncMemoryOS`, the sharded facade's methods that
only forward a call and the API list of ``docs/library/api.md`` are generated from the
protocol with ``cog`` (:func:`twin_methods`; ``cog -r docs/library/api.md
docs/configuration.md memoryos_actors/api.py memoryos_actors/aio.py
memoryos_actors/cluster/_facade.py``). A new method is declared
once, here, with its policy; then :class:`~memoryos_actors.MemoryOS` implements it (and
the sharded facade, if it needs more than forwarding).

``open`` is not part of the protocols: it is the constructor
(:meth:`MemoryOS.open <memoryos_actors.MemoryOS.open>`,
:meth:`AsyncMemoryOS.open <memoryos_actors.AsyncMemoryOS.open>`), and a cluster facade is
made by ``MemoryOS.open(..., cluster=...)``.

Importing this module imports none of the facades.
"""

from __future__ import annotations

import enum
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

if TYPE_CHECKING:
    from .chat_streams import AsyncChatStream, ChatStream
    from .directory import UserPhase
    from .memories import ArchivedMemories, Memory, MemoryEvent, MemoryList
    from .messages import AgentProfile, MemoryContext, UserProfile
    from .reports import ChatReply, ForgetReport, RepairReport, UserState

__all__ = [
    "API_METHODS",
    "POLICIES",
    "AsyncMemoryAPI",
    "MemoryAPI",
    "Merge",
    "Policy",
    "Route",
    "document",
    "policy",
    "policy_of",
    "twin_methods",
]

_C = TypeVar("_C", bound=type)
_F = TypeVar("_F", bound=Callable[..., Any])


class Route(enum.Enum):
    """Where the sharded facade sends a call."""

    #: To the shard that holds the call's user (its ``user_id`` argument).
    USER = "by user"
    #: To every shard at once; the answers merge as the policy's :class:`Merge` says.
    ALL = "to every shard"
    #: With a ``user_id``, as :attr:`USER`; with ``user_id=None``, as :attr:`ALL`.
    USER_OR_ALL = "by user, or to every shard"
    #: Nowhere as such: the facade answers it from its other calls.
    LOCAL = "in the facade"


class Merge(enum.Enum):
    """How the answers of the shards to a call sent to every shard become one answer."""

    #: Every shard answers None; so does the call.
    NOTHING = "none"
    #: Lists, joined and sorted.
    SORTED = "sorted union"
    #: Lists, joined in shard order.
    CONCAT = "joined in shard order"
    #: Counters (``stats``): integers added up, other numbers the largest (the worst
    #: shard's latency), each shard's whole answer kept besides.
    COUNTERS = "counters added up"
    #: Text: each shard's under a line naming the shard.
    SECTIONS = "one section per shard"


@dataclass(frozen=True, slots=True)
class Policy:
    """How the sharded facade serves one method of :class:`MemoryAPI`.

    Attributes:
        route: where the call goes.
        resend: whether the facade sends the call again after a shard death, until the
            restarted shard answers: the call has its effect at most once (a turn carries a
            turn key) or repeating it changes nothing (a read, setting a value). False:
            the caller gets :class:`~memoryos_actors.errors.ActorCrashed` and may call
            again by hand. Always False for a :attr:`Route.LOCAL` method (it sends nothing
            of its own).
        merge: how the shards' answers merge, for a method that may go to every shard.
        handler: the shard serves the call with a handler of its own (the shard server's
            method that ``serves`` it), not by calling its system's method of that name:
            a reply made without storing the turn, an export or import carried as bytes.
        stream: the method returns an iterator that gives its answer piece by piece, not
            an answer: it has no generated twin (:func:`twin_methods` leaves it out); its
            asyncio twin is written by hand in :class:`AsyncMemoryAPI`, a plain method
            that returns an async iterator.
    """

    route: Route
    resend: bool
    merge: Merge | None = None
    handler: bool = False
    stream: bool = False

    def __post_init__(self) -> None:
        fans_out = self.route in (Route.ALL, Route.USER_OR_ALL)
        if fans_out != (self.merge is not None):
            raise TypeError(f"{self}: a merge is needed exactly when a call goes to every shard")
        if self.route is Route.LOCAL and (self.resend or self.handler):
            raise TypeError(f"{self}: a method the facade answers itself sends nothing")


_POLICY_OF: dict[Callable[..., Any], Policy] = {}


def policy(
    route: Route,
    *,
    resend: bool,
    merge: Merge | None = None,
    handler: bool = False,
    stream: bool = False,
) -> Callable[[_F], _F]:
    """Decorator: declare the routing :class:`Policy` of a :class:`MemoryAPI` method."""
    rule = Policy(route, resend, merge, handler, stream)

    def declare(method: _F) -> _F:
        _POLICY_OF[method] = rule
        return method

    return declare


class MemoryAPI(Protocol):
    """The synchronous API of a running memory system (thread-safe; every expected failure
    raises a subclass of :class:`~memoryos_actors.errors.MemoryOSError`)."""

    @policy(Route.USER, resend=True)  # the facade gives each turn a turn key first
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

    @policy(Route.USER, resend=False)  # not idempotent: sent again, it would remember twice
    def remember(
        self, user_id: str, text: str, *, metadata: Mapping[str, Any] | None = None
    ) -> str:
        """Remember ``text``, a free-text memory of the user (a note or a fact the
        application or agent gives, not taken from a turn), and return its memory id
        (``fact:f<n>``).

        Durable on return like :meth:`add_turn` (in the user's write-ahead log, replayed
        after a crash). It is a user fact of LPM's knowledge base, marked as remembered
        (:attr:`Memory.origin <memoryos_actors.memories.Memory.origin>` is
        ``"remembered"``, with its ``metadata``): :meth:`retrieve` returns it for a query
        about it, :meth:`memories` lists it, :meth:`get_memory`,
        :meth:`correct_memory` (with :meth:`memory_history`) and :meth:`delete_memory`
        work on it, and exports carry it. Like every fact it leaves the knowledge base
        for the archive when ``kb_capacity`` newer facts came after it, and is still
        retrieved from there. Deleting a turn never takes it along (it quotes no turn).
        Creates the user.

        Args:
            text: the memory (not blank; at most ``max_text_bytes`` of UTF-8).
            metadata: the application's data about it, a JSON object (str keys; values
                str, finite numbers, bools, None, lists and objects; at most 4 KB as
                JSON, nested at most 8 deep), returned with it; None for none.

        Raises:
            InvalidInput: a bad ``user_id``, ``text`` or ``metadata``.
        """

    @policy(Route.USER, resend=True)
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
        yet (an agent's first message from a new user) gets an empty context (with the
        assistant's shared persona, under ``shared_agent_persona``), and nothing is written
        for it: it is not created and :meth:`users` does not list it.
        """

    @policy(Route.LOCAL, resend=False)  # chat_reply(...).text
    def chat(
        self, user_id: str, query: str, assistant_id: str = "default", *, fallback: bool = True
    ) -> str:
        """Answer ``query`` from memory: retrieve, generate a reply, store the turn.

        The reply's text; :meth:`chat_reply` says besides whether it came from the offline
        fallback (a degraded reply is also logged as a warning). Raises as
        :meth:`chat_reply` does.
        """

    @policy(Route.USER, resend=True, handler=True)  # the turn is stored with a key
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

    # The sharded facade asks the user's shard for the whole reply (chat_reply's handler),
    # gives it out in pieces and stores the turn at the end: no streaming across processes.
    @policy(Route.LOCAL, resend=False, stream=True)
    def chat_stream(
        self, user_id: str, query: str, assistant_id: str = "default", *, fallback: bool = True
    ) -> ChatStream:
        """Answer ``query`` from memory like :meth:`chat_reply`, giving out the reply's
        text piece by piece as the provider writes it (an iterator of ``str``), and store
        the turn once, when the reply is whole.

        The turn is stored when the iteration ends (``StopIteration``), exactly once; the
        stream's ``reply`` is then the :class:`~memoryos_actors.reports.ChatReply`
        (``degraded`` and ``reason`` as :meth:`chat_reply` gives them). Nothing is stored
        for a stream that is abandoned before its end (``close()``, leaving its ``with``
        block, a ``break``, dropping it: the provider's request is closed), nor for one
        that fails. Up to the first piece a failure is handled as :meth:`chat_reply`
        handles it (the offline fallback's reply, given out in pieces and ``degraded``;
        or :class:`~memoryos_actors.errors.ProviderUnavailable` with ``fallback=False``;
        a :class:`~memoryos_actors.errors.ProviderConfigError` for a configuration error).
        After it the reply cannot be taken back: a stream that breaks off raises
        :class:`~memoryos_actors.errors.ProviderUnavailable`, and a whole reply that turns
        out to echo the prompt raises :class:`~memoryos_actors.errors.GatewayError`; the
        pieces given out are not stored. The first 80 characters are held back until they
        are checked for an echo of the prompt (an echo found there is answered by the
        fallback). The offline backend's reply, and a reply on a cluster (made whole on
        the user's shard), come whole and are given out in pieces.

        Bad arguments raise at the call; retrieval and the provider's errors raise from
        the iteration. Iterate in one thread at a time.
        """

    @policy(Route.USER, resend=True)
    def set_user_profile(self, user_id: str, profile: UserProfile) -> None:
        """Set the user's static profile (name, gender, birth year, extras); durable on return."""

    @policy(Route.USER, resend=True)
    def set_agent_profile(
        self, user_id: str, profile: AgentProfile, assistant_id: str = "default"
    ) -> None:
        """Set the assistant's static persona as this user sees it; durable on return."""

    @policy(Route.USER_OR_ALL, resend=True, merge=Merge.COUNTERS)
    def stats(self, user_id: str | None = None) -> dict[str, Any]:
        """Counters of the whole system, or of one user when ``user_id`` is given.

        The system's counters include ``damaged_users`` (how many users' files were refused
        as damaged since the system opened, until repaired or read again successfully) and
        ``damaged`` (their ids, each with the error); those users' calls raise
        :class:`~memoryos_actors.errors.CorruptDataError`, every other user is served.
        """

    @policy(Route.ALL, resend=True, merge=Merge.SORTED)
    def users(self) -> list[str]:
        """Every user with data in this data directory (active or not), sorted.

        Shared assistant personas (``shared_agent_persona``) are not users and not listed.
        """

    @policy(Route.ALL, resend=True, merge=Merge.CONCAT)
    def active_users(self) -> list[str]:
        """Users whose actor groups are live now, least recently used first."""

    @policy(Route.USER, resend=True)
    def user_state(self, user_id: str) -> UserState:
        """A typed picture of the user's three tiers, for tools and tests.

        :class:`~memoryos_actors.errors.UnknownUser` for a user with no data (nothing is
        written for it).
        """

    @policy(Route.ALL, resend=True, merge=Merge.SECTIONS)
    def tree(self) -> str:
        """The supervision tree as text, with each child's status and restart count."""

    @policy(Route.USER, resend=True)
    def archive(
        self, user_id: str, query: str | None = None, limit: int | None = None
    ) -> list[dict[str, Any]]:
        """Segments and pages MTM evicted for ``user_id``, oldest first.

        With ``query``, only records matching its keywords, best first (at most ``limit``,
        default 10). Eviction is a tier decision, not data loss: everything is here.
        :class:`~memoryos_actors.errors.UnknownUser` for a user with no data.
        """

    @policy(Route.USER, resend=True)
    def stored_page_ids(self, user_id: str) -> list[str]:
        """Every page id stored for ``user_id``: STM, then MTM, then the archive.

        An audit helper: each acknowledged turn appears exactly once after :meth:`flush`.
        Before it, each appears at least once (pages on their way from STM to MTM are in
        the state's ``outbox``); one evicted to the archive between the two reads shows
        twice.
        """

    @policy(Route.USER_OR_ALL, resend=True, merge=Merge.NOTHING)
    def flush(self, timeout: float = 300.0, *, user_id: str | None = None) -> None:
        """Wait for the background work of the turns stored before this call.

        For every user live at the call (or only ``user_id``), it returns once:

        * every turn acknowledged before the call (``add_turn`` returned) has its
          dialogue-chain meta data;
        * every page those turns pushed out of STM is placed in an MTM segment, with the
          evictions to the archive and the promotions that placement caused;
        * every segment summary and persona update the user's MTM owed once those pages
          were placed (due, or still in its debounce window) was asked for and answered:
          the summaries stored in MTM, the persona updates applied in LPM (and in the
          assistant's shared persona, with ``shared_agent_persona``).

        It never waits for the process to be quiet: turns stored after the call (for any
        user, the same one too) start work it does not wait for, so it returns under a
        continuous write flood. It may cover some of that later work (what was already
        queued when it looked). Under a flood it waits about ``placement_backlog_seconds``
        per flooded user (the placement work its queue admits), the users side by side. A
        user that is passive has nothing in flight (what it owes is in its files, asked for
        again when it is next activated), and a user passivated
        or forgotten while flush waits is not waited for any longer, for the same reason.
        A degraded answer (the provider was down) counts as the answer; its redo once the
        provider is back is not waited for.

        Args:
            timeout: the longest wait, seconds (> 0). The work goes on after that.
            user_id: wait only for this user's work (returns at once if the user is not
                live); None for every live user.

        Raises:
            Overloaded: the work was not done within ``timeout``.
            InvalidInput: a bad ``timeout`` or ``user_id``.
        """

    @policy(Route.USER, resend=True, handler=True)  # the file is written by the facade
    def export_user(self, user_id: str, path: str | os.PathLike[str]) -> Path:
        """Write everything stored for ``user_id`` to a portable file (``.json`` or msgpack).

        Waits only for this user's work, never for other users'. First, while the user's
        calls go on, for what :meth:`flush` guarantees for its turns stored before this
        call. Then the file is written from one consistent cut: for that moment the user
        is ``EXPORTING`` (its other calls wait, and it cannot be passivated or forgotten),
        the pages of every turn acknowledged before it are placed as well, and the hot
        tiers and the archive are read. So every turn acknowledged before the call is in
        the file with its summaries and persona updates; a summary or persona update that
        turns stored since then still owe is in the file as owed work, asked for when it
        is imported.

        A regular file at ``path`` is replaced whole (temp file, rename); a symlink is
        followed (the file it names is replaced, the link stays); a FIFO or a character
        device is written through, never replaced; any other kind of file is refused
        (``InvalidInput``).

        :class:`~memoryos_actors.errors.UnknownUser` for a user with no data (no file is
        written, not even ``path``). Raises ``Overloaded`` when that takes longer than
        ``overload_timeout_seconds``.
        """

    @policy(Route.USER, resend=False, handler=True)  # routed by the file's user
    def import_user(self, path: str | os.PathLike[str], user_id: str | None = None) -> str:
        """Load a file written by :meth:`export_user`; returns the user id it was stored as.

        Refuses to overwrite a user that already has data (forget it first). One operation
        on the user: its calls wait until the import is done; a failed import leaves no
        files behind.
        """

    @policy(Route.USER, resend=False)
    def forget_user(self, user_id: str) -> ForgetReport:
        """Delete every file of ``user_id`` and every trace of it in the gateway (cached
        answers and embeddings, queued redo work, degraded replies waiting for a redo);
        report what was removed. Other users are untouched.

        One operation on the user: new calls wait (then see an empty user); calls in flight
        are waited for, at most ``overload_timeout_seconds``, then ``Overloaded`` is raised
        and nothing is removed. Late replies addressed to the forgotten incarnation are
        dropped (each activation has its own epoch).
        """

    @policy(Route.USER, resend=False)
    def repair_user(self, user_id: str) -> RepairReport:
        """Salvage ``user_id``'s damaged files: every intact record before and after each
        damaged range is kept, each original is kept beside its file as
        ``<name>.corrupt-<unix ms>``, and the report says what was kept and what was lost
        (records, turns, byte ranges). See :mod:`memoryos_actors.repair` for what is done
        to which file; a healthy user is left as it is (``report.changed`` is False).

        Calls for a user whose files were refused with
        :class:`~memoryos_actors.errors.CorruptDataError` work again afterwards, with
        every intact turn. One operation on the user: a live user's actors are stopped
        first (without a snapshot: the files are what is repaired), new calls wait until
        the repair is done. :class:`UnknownUser` if the user has no files,
        :class:`~memoryos_actors.errors.ReadOnlyError` on a read-only system.
        """

    @policy(Route.USER, resend=False)
    def passivate(self, user_id: str) -> bool:
        """Snapshot and stop ``user_id``'s actors now; False if the user was not active.

        Waits for a transition in progress and for the user's calls in flight (new calls
        wait meanwhile), at most ``overload_timeout_seconds``; then raises ``Overloaded``
        and the user stays active.
        """

    @policy(Route.USER, resend=True)
    def user_phase(self, user_id: str) -> UserPhase:
        """Where ``user_id`` is in its lifecycle now (see :class:`UserPhase`)."""

    @policy(Route.USER, resend=True)
    def user_epoch(self, user_id: str) -> int:
        """The incarnation epoch of ``user_id``'s live actors (0 when it is not live).

        Each activation gets a new epoch, unique in the process; replies addressed to
        another epoch are dropped (counted as ``stale_replies_dropped`` in :meth:`stats`).
        """

    @policy(Route.USER, resend=False)
    def kill_actor(
        self, user_id: str, tier: str, reason: str = "kill_actor", timeout: float = 10.0
    ) -> bool:
        """Fault injection: crash one of ``user_id``'s tier actors (``"stm"``, ``"mtm"`` or
        ``"lpm"``) as an unexpected exception in it would, for drills and demos.

        The user's group supervisor (``rest_for_one``) restarts it and the tiers started
        after it; each rebuilds its state from its snapshot plus the WAL, so no acknowledged
        turn is lost. Activates the user if needed. Returns True once a new actor is
        registered under the same name, False if none appeared within ``timeout`` seconds.
        The restart shows in :meth:`tree` (``restarts=N``). :class:`~memoryos_actors.errors.
        UnknownUser` for a user with no data.
        """

    @policy(Route.USER, resend=True)
    def memories(
        self,
        user_id: str,
        kinds: Iterable[str] | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> MemoryList:
        """The memories of ``user_id`` (of ``kinds`` only, if given), with ids and
        provenance: pages (STM, MTM and archive), segments, facts, agent traits and the user
        traits that have a level. Deleted memories are not listed.

        In a stable order: by kind (in the order above), then oldest first by the
        sequence number in the id (which never changes as a page moves between tiers;
        traits, which have none, by name).
        With ``limit`` (1 or more), at most that many, and the list's ``next_cursor``
        (None on the last page) gives the rest: ``memories(user, cursor=page.next_cursor,
        limit=...)``. Paging while turns are added neither skips nor repeats a memory that
        existed when paging began. A cursor that did not come from this call (or was
        changed) is :class:`InvalidInput`. Each call still reads the whole user.
        """

    @policy(Route.USER, resend=True)
    def archived_memories(
        self,
        user_id: str,
        kind: str = "page",
        query: str | None = None,
        offset: int = 0,
        limit: int = 50,
        per_day: bool = False,
    ) -> ArchivedMemories:
        """A page of the memories of ``kind`` (``"page"``, ``"fact"`` or ``"agent_trait"``)
        that left the hot tiers for the user's archive: ``limit`` (0..500) of them from
        ``offset`` on, newest first, or with ``query`` the best matches for its words
        first. Read from the cold index, so the cost depends on ``offset + limit``, not on
        the length of the history (unlike :meth:`archive`, which reads every record).
        Deleted memories are left out, corrected ones shown corrected. With ``per_day``,
        also how many there are per UTC day (for a picture of the history)."""
        ...

    @policy(Route.USER, resend=True)
    def get_memory(self, user_id: str, memory_id: str) -> Memory:
        """The memory ``memory_id`` of ``user_id``; :class:`UnknownMemory` if it has none
        (or it was deleted)."""
        ...

    @policy(Route.USER, resend=False)
    def delete_memory(self, user_id: str, memory_id: str) -> MemoryEvent:
        """Delete one memory of ``user_id`` from every tier, the cold index, exports and
        the gateway's caches; retrieval never returns it again. Durable: the edit is in the
        user's WAL before this returns (per the ``fsync`` setting).

        Deleting a segment deletes its pages; deleting a trait clears its level. Text that
        may quote a deleted page is cleared with it: the chain summaries of the later pages
        of its dialogue chain, and the summary of the segment that held it (asked for again
        from the pages left). What the LLM distilled from a deleted page and quotes it goes
        too (:mod:`memoryos_actors.tiers.quotes`): such facts and agent traits, held or
        archived, are deleted; a trait whose evidence quotes it falls back to the newest
        change of its history that does not (or is cleared); a fact the user corrected
        keeps its text and loses the old values that quote it. The event's ``rewrote``
        names each, and the segment whose summary was cleared. The history keeps
        only that the memory was deleted, and when: its earlier values are erased from it.
        The event returned carries the deleted text (``old``) for the caller; it is stored
        nowhere. :class:`UnknownMemory` if there is no such memory.
        """

    @policy(Route.USER, resend=False)
    def correct_memory(
        self, user_id: str, memory_id: str, value: str, evidence: str = ""
    ) -> MemoryEvent:
        """Correct a fact, an agent trait (``value``: the new sentence) or a user trait
        (``value``: ``"low"``, ``"medium"`` or ``"high"``; ``evidence`` optional; any of the
        90 traits, observed or not). The old
        value stays in :meth:`memory_history`; retrieval returns the new one. Durable like
        :meth:`delete_memory`. :class:`InvalidInput` for pages and segments (delete them
        instead), :class:`UnknownMemory` if there is no such memory."""
        ...

    @policy(Route.USER, resend=True)
    def memory_history(self, user_id: str, memory_id: str) -> list[MemoryEvent]:
        """What changed memory ``memory_id`` and when, oldest first: its creation (while it
        exists), the changes persona updates made to a trait, and every correction and
        deletion (kept after the memory is deleted). :class:`UnknownMemory` if there is
        nothing to tell."""
        ...

    @policy(Route.ALL, resend=True, merge=Merge.NOTHING)
    def close(self, timeout: float = 60.0) -> None:
        """Snapshot every active user, stop the tree and release the data directory (read-only:
        no snapshot, nothing written)."""
        ...


class AsyncMemoryAPI(Protocol):
    """The same API as :class:`MemoryAPI`, as coroutines that never block the event loop.

    Generated from :class:`MemoryAPI` (``cog -r memoryos_actors/api.py``); a test fails
    when it is not what that generates now.
    """

    # [[[cog
    # import cog
    # from memoryos_actors.api import twin_methods
    # cog.out(twin_methods(lambda name, call: (
    #     f'""":meth:`MemoryAPI.{name}`, awaited (run off the event loop)."""'
    # )))
    # ]]]
    async def add_turn(
        self,
        user_id: str,
        query: str,
        response: str,
        timestamp: float | None = None,
        assistant_id: str = "default",
        *,
        turn_key: str | None = None,
    ) -> str:
        """:meth:`MemoryAPI.add_turn`, awaited (run off the event loop)."""

    async def remember(
        self, user_id: str, text: str, *, metadata: Mapping[str, Any] | None = None
    ) -> str:
        """:meth:`MemoryAPI.remember`, awaited (run off the event loop)."""

    async def retrieve(
        self,
        user_id: str,
        query: str,
        assistant_id: str = "default",
        timestamp: float | None = None,
    ) -> MemoryContext:
        """:meth:`MemoryAPI.retrieve`, awaited (run off the event loop)."""

    async def chat(
        self, user_id: str, query: str, assistant_id: str = "default", *, fallback: bool = True
    ) -> str:
        """:meth:`MemoryAPI.chat`, awaited (run off the event loop)."""

    async def chat_reply(
        self, user_id: str, query: str, assistant_id: str = "default", *, fallback: bool = True
    ) -> ChatReply:
        """:meth:`MemoryAPI.chat_reply`, awaited (run off the event loop)."""

    async def set_user_profile(self, user_id: str, profile: UserProfile) -> None:
        """:meth:`MemoryAPI.set_user_profile`, awaited (run off the event loop)."""

    async def set_agent_profile(
        self, user_id: str, profile: AgentProfile, assistant_id: str = "default"
    ) -> None:
        """:meth:`MemoryAPI.set_agent_profile`, awaited (run off the event loop)."""

    async def stats(self, user_id: str | None = None) -> dict[str, Any]:
        """:meth:`MemoryAPI.stats`, awaited (run off the event loop)."""

    async def users(self) -> list[str]:
        """:meth:`MemoryAPI.users`, awaited (run off the event loop)."""

    async def active_users(self) -> list[str]:
        """:meth:`MemoryAPI.active_users`, awaited (run off the event loop)."""

    async def user_state(self, user_id: str) -> UserState:
        """:meth:`MemoryAPI.user_state`, awaited (run off the event loop)."""

    async def tree(self) -> str:
        """:meth:`MemoryAPI.tree`, awaited (run off the event loop)."""

    async def archive(
        self, user_id: str, query: str | None = None, limit: int | None = None
    ) -> list[dict[str, Any]]:
        """:meth:`MemoryAPI.archive`, awaited (run off the event loop)."""

    async def stored_page_ids(self, user_id: str) -> list[str]:
        """:meth:`MemoryAPI.stored_page_ids`, awaited (run off the event loop)."""

    async def flush(self, timeout: float = 300.0, *, user_id: str | None = None) -> None:
        """:meth:`MemoryAPI.flush`, awaited (run off the event loop)."""

    async def export_user(self, user_id: str, path: str | os.PathLike[str]) -> Path:
        """:meth:`MemoryAPI.export_user`, awaited (run off the event loop)."""

    async def import_user(self, path: str | os.PathLike[str], user_id: str | None = None) -> str:
        """:meth:`MemoryAPI.import_user`, awaited (run off the event loop)."""

    async def forget_user(self, user_id: str) -> ForgetReport:
        """:meth:`MemoryAPI.forget_user`, awaited (run off the event loop)."""

    async def repair_user(self, user_id: str) -> RepairReport:
        """:meth:`MemoryAPI.repair_user`, awaited (run off the event loop)."""

    async def passivate(self, user_id: str) -> bool:
        """:meth:`MemoryAPI.passivate`, awaited (run off the event loop)."""

    async def user_phase(self, user_id: str) -> UserPhase:
        """:meth:`MemoryAPI.user_phase`, awaited (run off the event loop)."""

    async def user_epoch(self, user_id: str) -> int:
        """:meth:`MemoryAPI.user_epoch`, awaited (run off the event loop)."""

    async def kill_actor(
        self, user_id: str, tier: str, reason: str = "kill_actor", timeout: float = 10.0
    ) -> bool:
        """:meth:`MemoryAPI.kill_actor`, awaited (run off the event loop)."""

    async def memories(
        self,
        user_id: str,
        kinds: Iterable[str] | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> MemoryList:
        """:meth:`MemoryAPI.memories`, awaited (run off the event loop)."""

    async def archived_memories(
        self,
        user_id: str,
        kind: str = "page",
        query: str | None = None,
        offset: int = 0,
        limit: int = 50,
        per_day: bool = False,
    ) -> ArchivedMemories:
        """:meth:`MemoryAPI.archived_memories`, awaited (run off the event loop)."""

    async def get_memory(self, user_id: str, memory_id: str) -> Memory:
        """:meth:`MemoryAPI.get_memory`, awaited (run off the event loop)."""

    async def delete_memory(self, user_id: str, memory_id: str) -> MemoryEvent:
        """:meth:`MemoryAPI.delete_memory`, awaited (run off the event loop)."""

    async def correct_memory(
        self, user_id: str, memory_id: str, value: str, evidence: str = ""
    ) -> MemoryEvent:
        """:meth:`MemoryAPI.correct_memory`, awaited (run off the event loop)."""

    async def memory_history(self, user_id: str, memory_id: str) -> list[MemoryEvent]:
        """:meth:`MemoryAPI.memory_history`, awaited (run off the event loop)."""

    async def close(self, timeout: float = 60.0) -> None:
        """:meth:`MemoryAPI.close`, awaited (run off the event loop)."""

    # [[[end]]]

    # A streaming method (its policy says ``stream``) is no coroutine: it returns an async
    # iterator. Written by hand; a test checks it takes the sync method's parameters.
    def chat_stream(
        self, user_id: str, query: str, assistant_id: str = "default", *, fallback: bool = True
    ) -> AsyncChatStream:
        """:meth:`MemoryAPI.chat_stream` as an async iterator (``async for piece in ...``),
        each piece waited for off the event loop."""


#: The protocols' methods, in the order of the API reference (docs/library/api.md).
API_METHODS: tuple[str, ...] = tuple(
    name for name in vars(MemoryAPI) if not name.startswith("_") and callable(vars(MemoryAPI)[name])
)


def _collect() -> Mapping[str, Policy]:
    undeclared = [n for n in API_METHODS if vars(MemoryAPI)[n] not in _POLICY_OF]
    if undeclared:
        raise TypeError(f"MemoryAPI methods without a @policy: {undeclared}")
    return MappingProxyType({n: _POLICY_OF[vars(MemoryAPI)[n]] for n in API_METHODS})


#: Each method's routing policy, by name, in :data:`API_METHODS`' order.
POLICIES: Mapping[str, Policy] = _collect()


def twin_methods(
    body: Callable[[str, str], str], names: Iterable[str] = (), *, coroutines: bool = True
) -> str:
    """Source text of :class:`MemoryAPI`'s methods ``names`` (default: all), with the same
    parameters, as coroutines (or, with ``coroutines=False``, as plain methods), each with
    ``body(name, call)`` as its body (``call``: the source of the arguments to pass on,
    each after a comma, as in ``", user_id, query, turn_key=turn_key"``), formatted by
    ruff, at the indentation of a class body.

    What ``cog`` writes into :class:`AsyncMemoryAPI`,
    :class:`~memoryos_actors.AsyncMemoryOS` and the sharded facade (a development tool: it
    runs ``ruff``). A streaming method (its policy says ``stream``) has no generated twin:
    it is left out, even when ``names`` names it.
    """
    import inspect
    import subprocess
    import sys

    lines = ["class _Twins:"]
    for name in tuple(names) or API_METHODS:
        if POLICIES[name].stream:
            continue
        sig = inspect.signature(getattr(MemoryAPI, name))
        params: list[str] = []
        passed: list[str] = []
        star = False
        for param in sig.parameters.values():
            keyword = param.kind is inspect.Parameter.KEYWORD_ONLY
            if keyword and not star:
                params.append("*")
                star = True
            text = param.name
            if param.annotation is not inspect.Parameter.empty:
                text += f": {param.annotation}"
            if param.default is not inspect.Parameter.empty:
                text += f" = {param.default!r}"
            params.append(text)
            if param.name != "self":
                passed.append(f"{param.name}={param.name}" if keyword else param.name)
        returns = sig.return_annotation
        kind = "async def" if coroutines else "def"
        lines.append(f"    {kind} {name}({', '.join(params)}) -> {returns}:")
        lines.append(f"        {body(name, ''.join(', ' + arg for arg in passed))}")
    if len(lines) == 1:
        return ""
    source = "\n".join(lines) + "\n"
    done = subprocess.run(
        [sys.executable, "-m", "ruff", "format", "--stdin-filename", __file__, "-"],
        input=source,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.split("\n", 1)[1] + "\n"  # a blank line before cog's end marker


def policy_of(method: Callable[..., Any]) -> Policy | None:
    """The policy of ``method`` (a method of :class:`MemoryAPI`, such as
    ``MemoryAPI.add_turn``); None for any other callable."""
    return _POLICY_OF.get(method)


def document(cls: _C) -> _C:
    """Class decorator: give each :data:`API_METHODS` method of ``cls`` that has no
    docstring the protocol's (so ``help()`` on a facade shows the one declared text)."""
    for name in API_METHODS:
        method = vars(cls).get(name)
        if method is not None and not getattr(method, "__doc__", None):
            method.__doc__ = getattr(MemoryAPI, name).__doc__
    return cls


if TYPE_CHECKING:
    # What mypy checks: each facade is assignable to its protocol, so a method missing
    # or with another signature (a renamed parameter, another default's type, another
    # return type) fails the type check here.
    from .aio import AsyncMemoryOS
    from .cluster import ClusterMemoryOS
    from .system import MemoryOS

    def _conforms(
        in_process: MemoryOS, sharded: ClusterMemoryOS, coroutines: AsyncMemoryOS
    ) -> tuple[MemoryAPI, MemoryAPI, AsyncMemoryAPI]:
        return in_process, sharded, coroutines
