"""Internal messages between the actors of one memory system.

The public request records (:class:`~memoryos_actors.messages.AddTurn`,
:class:`~memoryos_actors.messages.Retrieve`, ...) live in :mod:`memoryos_actors.messages`;
these are the messages the actors send each other on the way. All are frozen, slotted
dataclasses holding only immutable values (embeddings travel as ``bytes`` of float32), so no
actor can change what another one holds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import MemoryOSError
from ..messages import (
    AgentProfile,
    KBEntry,
    Page,
    PersonaUpdate,
    SegmentRecord,
    TraitLevel,
    UserProfile,
)
from ..store.edits import EditRecord

__all__ = [
    "AnswersWaiting",
    "ApplyEdit",
    "ApplyPersona",
    "CompletionDone",
    "CompletionJob",
    "EditMemory",
    "FlushSummaries",
    "GetState",
    "HeatTick",
    "InsertPage",
    "Inspect",
    "LPMPicture",
    "LPMSearch",
    "MTMPicture",
    "MTMSearch",
    "OwedJobs",
    "Pending",
    "PersonaAgain",
    "Ping",
    "Progress",
    "ReadHistory",
    "RefreshSummary",
    "Remember",
    "STMPages",
    "STMPicture",
    "Snapshot",
    "StateIncomplete",
    "StateReply",
    "TierState",
    "emb_from_bytes",
    "emb_to_bytes",
    "split_tag",
]


def emb_to_bytes(vector: np.ndarray) -> bytes:
    """Pack an embedding as float32 bytes (immutable, msgpack-friendly)."""
    return np.ascontiguousarray(vector, dtype=np.float32).tobytes()


def emb_from_bytes(data: bytes) -> np.ndarray:
    """Unpack float32 bytes into a read-only vector (no copy)."""
    return np.frombuffer(data, dtype=np.float32)


@dataclass(frozen=True, slots=True)
class InsertPage:
    """STM -> MTM: a page left STM (FIFO overflow) and must join a segment.

    ``now`` is the time of the turn that pushed it out (seconds): MTM uses it as the time of
    the insert, so replaying the WAL places the pages in the same segments with the same
    ``L_interaction``. Retrievals are not in the WAL: the ``N_visit`` counts and access
    times gained since the last snapshot are lost in a crash, so recovered heat can be lower
    than it was, and an eviction or promotion that heat decides can then differ.
    """

    page: Page
    now: float


@dataclass(frozen=True, slots=True)
class InsertPages:
    """STM -> MTM: several pages that left STM, in turn order (what became ready at once,
    e.g. the pages one chain-meta batch answered): MTM embeds them in one call and places
    them one by one, exactly as that many :class:`InsertPage` messages would."""

    inserts: tuple[InsertPage, ...]


@dataclass(frozen=True, slots=True)
class CompletionJob:
    """Anyone -> gateway worker: run a structured completion, reply to a registry name.

    ``reply_to`` is a stable registry name, never a ref, so a reply reaches the current
    incarnation of the asker even if it restarted meanwhile. ``tag`` and ``epoch`` are
    echoed back: ``epoch`` is the asker's user incarnation (one per activation), so an
    answer that arrives after the user was passivated or forgotten and activated again is
    recognised as stale and dropped (tags restart from the same values).
    """

    kind: str
    payload: Any
    user_id: str
    reply_to: str
    tag: str
    epoch: int = 0


@dataclass(frozen=True, slots=True)
class CompletionDone:
    """Gateway worker -> asker: the validated JSON result of a :class:`CompletionJob`."""

    kind: str
    tag: str
    data: Any
    degraded: bool
    epoch: int = 0


@dataclass(frozen=True, slots=True)
class AnswersWaiting:
    """Gateway worker -> an asker with an answer inbox (see ``GatewayClient.open_inbox``):
    a :class:`CompletionDone` waits there; the asker takes its inbox before any message."""


@dataclass(frozen=True, slots=True)
class RefreshSummary:
    """Timer -> MTM: the debounce window of a segment's summary has passed."""

    segment_id: str


@dataclass(frozen=True, slots=True)
class PersonaAgain:
    """LPM -> MTM: a persona update read a page deleted before it reached LPM (it may
    quote it) and was dropped; ask again for the segments ``body`` names (``"s1+s2"``).

    ``owed``: ``(token, id)`` of the placeholder LPM noted in the user's job watch, which
    MTM settles with the jobs it asks (a flush waits for those), or None."""

    body: str
    owed: tuple[str, str] | None = None


@dataclass(frozen=True, slots=True)
class FlushSummaries:
    """Anyone -> MTM: ask now for every segment summary and persona update it owes.

    Answered with the number of summaries asked for.
    """


@dataclass(frozen=True, slots=True)
class HeatTick:
    """Ticker -> MTM: recompute heat, evict and promote."""


@dataclass(frozen=True, slots=True)
class STMPages:
    """Retrieval -> STM: all pages, oldest first."""


@dataclass(frozen=True, slots=True)
class MTMSearch:
    """Retrieval -> MTM: two-stage (or hybrid) search for a query."""

    query_embedding: bytes
    query_keywords: frozenset[str]
    top_m: int
    top_k: int
    now: float
    mode: str
    query_text: str = ""


@dataclass(frozen=True, slots=True)
class LPMSearch:
    """Retrieval -> LPM: profile, traits and the closest KB facts and agent traits."""

    assistant_id: str
    query_embedding: bytes
    top_k_kb: int
    top_k_agent: int
    #: Stemmed query terms: when given, archived facts and agent traits are searched too.
    query_terms: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ApplyPersona:
    """A user's LPM -> the shared persona's LPM: agent traits learnt from a promotion."""

    update: PersonaUpdate


@dataclass(frozen=True, slots=True)
class GetState:
    """Anyone -> MTM or LPM: answered with a :class:`TierState` (for snapshots and exports).

    With ``reply_to`` (a registry name), the state is told there as a :class:`StateReply`
    carrying ``token`` instead of being answered: STM's periodic snapshot gathers its
    siblings' states without blocking its mailbox.
    """

    reply_to: str | None = None
    token: int = 0


class StateIncomplete(MemoryOSError):
    """MTM's answer to a :class:`GetState` when its state lacks pages it was handed: it
    was asked to stop while placing pages from the WAL, so the rest stay unplaced (they are
    in the WAL, which the next incarnation reads). A snapshot or export of that state would
    cover those pages without holding them; it is refused instead."""


@dataclass(frozen=True, slots=True)
class StateReply:
    """MTM or LPM -> STM: a tier's state for the snapshot ``token``."""

    token: int
    state: Any


@dataclass(frozen=True, slots=True)
class TierState:
    """A tier's persistent state: ``data`` is msgpack-friendly (what a snapshot stores)."""

    tier: str
    data: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Facade -> STM: write a coordinated snapshot of the user's three tiers now."""


@dataclass(frozen=True, slots=True)
class EditMemory:
    """Facade -> LPM: delete (``op="delete"``) or correct (``op="correct"``, to ``value``)
    one memory of the user. LPM writes the edit to the WAL, applies what concerns it (facts,
    traits, agent traits) and answers the edit record (``memoryos_actors.store.edits``).

    ``old`` is the memory's value before (for its history), ``pages`` the turn seqs of the
    pages the edit removes (a page, or a segment's pages), ``evidence`` a corrected trait's.
    """

    op: str
    memory_id: str
    old: str
    value: str | None = None
    pages: tuple[int, ...] = ()
    evidence: str = ""
    #: ``(chain id, deleted seq, last seq stored)``: chain summaries in between go.
    chains: tuple[tuple[str, int, int], ...] = ()
    #: Segments whose summary may quote a deleted page.
    segments: tuple[str, ...] = ()
    #: ``(segment id or "", text)`` of each page deleted: LPM finds the facts, agent traits
    #: and traits that quote them (never logged).
    quoted: tuple[tuple[str, str], ...] = ()
    #: ``(segment id, texts of the pages it keeps)`` of every segment MTM holds (a segment
    #: not named here keeps only what the archive holds of it).
    kept: tuple[tuple[str, tuple[str, ...]], ...] = ()


@dataclass(frozen=True, slots=True)
class Remember:
    """Facade -> LPM: remember ``text`` (checked), a free-text memory of the user, with
    the application's ``metadata`` (compact JSON text of an object, or ``""``). LPM logs
    it to the WAL, adds it as a user fact and answers its memory id (``fact:f<n>``)."""

    text: str
    metadata: str = ""


@dataclass(frozen=True, slots=True)
class ApplyEdit:
    """Facade -> STM and MTM: an edit LPM has logged (its record); drop the pages and the
    segment it deletes."""

    record: EditRecord


@dataclass(frozen=True, slots=True)
class ReadHistory:
    """Facade -> LPM: the edits of ``memory_id``, and for a user trait the changes persona
    updates made (answered as ``(edits, trait_changes)``)."""

    memory_id: str


@dataclass(frozen=True, slots=True)
class Inspect:
    """Anyone -> tier: a picture of the tier for tools (not for persistence). STM answers
    an :class:`STMPicture`, MTM an :class:`MTMPicture`, LPM an :class:`LPMPicture`."""


@dataclass(frozen=True, slots=True)
class STMPicture:
    """STM's answer to :class:`Inspect`: turns stored so far, the pages held, oldest first,
    and the pages that left the queue and wait (for their chain meta) to go to MTM."""

    turns: int
    pages: tuple[Page, ...]
    outbox: tuple[Page, ...] = ()


@dataclass(frozen=True, slots=True)
class MTMPicture:
    """MTM's answer to :class:`Inspect`: its segments with their pages."""

    segments: tuple[SegmentRecord, ...]


@dataclass(frozen=True, slots=True)
class LPMPicture:
    """LPM's answer to :class:`Inspect`.

    ``agents`` maps each assistant id to its ``profile`` (:class:`AgentProfile`) and agent
    ``traits`` (a tuple of :class:`KBEntry`); ``updates`` counts the persona updates
    applied since the actor started.
    """

    profile: UserProfile
    traits: tuple[TraitLevel, ...]
    kb: tuple[KBEntry, ...]
    agents: dict[str, dict[str, AgentProfile | tuple[KBEntry, ...]]]
    updates: int


@dataclass(frozen=True, slots=True)
class Pending:
    """Facade -> STM or MTM: how many units of the user's background work the tier still
    holds, as an ``int``: STM, pages whose chain meta is not known or that are not handed to
    MTM yet; MTM, gateway jobs (summaries, persona updates) it holds back and answered
    persona updates not yet handed to LPM. A passivation reads them before its snapshot;
    ``flush`` uses :class:`Progress` and :class:`OwedJobs`."""


@dataclass(frozen=True, slots=True)
class Progress:
    """Facade -> STM: answered with ``(seq, settled_through)``, two turn seqs: the last
    turn stored, and the highest seq ``s`` such that every page of a turn up to ``s`` has
    its chain meta and, if it left STM, was handed to MTM. Both only grow while the
    incarnation lives, and pages are settled oldest first, so a flush waits until
    ``settled_through`` reaches the ``seq`` it saw first, whatever turns arrive meanwhile."""


@dataclass(frozen=True, slots=True)
class OwedJobs:
    """Facade -> MTM: answered with ``(incarnation, owed)``: a token of this MTM
    incarnation (a restarted MTM answers another one) and the ids of the gateway jobs
    (summaries, persona updates) it asked for and has not had an answer to, as a
    ``frozenset``. With ``ask_now``, every summary and persona update it still owes (due,
    or waiting for its debounce window) is asked for first.

    An id leaves the set when its answer is applied: the summary stored, the persona update
    told to LPM (a ``Ping`` to LPM after that is a barrier for it). The user's ``JobWatch``
    mirrors the set, for waiting without asking again."""

    ask_now: bool = False


@dataclass(frozen=True, slots=True)
class Ping:
    """Anyone -> actor: answered with ``None`` after every message sent before it (a
    mailbox barrier, and nothing else)."""


def split_tag(tag: str) -> tuple[str, str, str]:
    """``(job id, body, assistant)`` of an MTM job tag ``"<job>:<body>|<assistant>"``.

    The job id is ``""`` for a tag without one (written before jobs had ids); the
    assistant is ``""`` for a summary's tag (``"<job>:<segment id>"``).
    """
    head, _, assistant = tag.partition("|")
    job, sep, body = head.partition(":")
    if not sep:
        return "", head, assistant
    return job, body, assistant
