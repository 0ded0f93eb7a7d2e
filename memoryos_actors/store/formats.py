"""The on-disk records, typed: the one module that knows how each is encoded and decoded.

Like diskcache's ``Disk`` (the one class that turns values into what the cache file holds and
back), this module owns the record formats; the store and the actors only call it. Records
are msgpack maps whose key ``"t"`` names the kind; only this module knows the short keys.

**WAL records** (:data:`WalRecord`, :func:`decode_wal`, each record's ``encode()``):

* :class:`TurnRecord` (``"turn"``) — one turn, written before the caller is acknowledged;
* :class:`MetaRecord` (``"meta"``) — a page's dialogue-chain meta data;
* :class:`PersonaRecord` (``"persona"``) — what a promotion taught LPM;
* :class:`UserProfileRecord` (``"user_profile"``), :class:`AgentProfileRecord`
  (``"agent_profile"``) — profiles the application set;
* :class:`EditRecord` (``"edit"``) — a deletion or correction of one memory;
* :class:`RememberRecord` (``"remember"``) — a free-text memory the application gave
  (``remember``), a user fact of LPM;
* :class:`LostRecord` (``"lost"``) — the placeholder a repair writes for a record damage
  destroyed (its seq stays taken; readers skip it);
* :class:`UnknownRecord` — a kind this version does not know (kept, skipped).

**Archive records** (:data:`ArchiveRecord`, :func:`decode_archived`), what leaves MTM and
LPM for a user's archive file:

* :class:`ArchivedSegment` — a segment MTM evicted, with the pages it held and their
  embeddings;
* :class:`ArchivedPage` — one page pushed out of a full segment;
* :class:`ArchivedFact` — a user fact (``kind="fact"``) or an assistant trait
  (``kind="agent_trait"``) pushed out of LPM's FIFO.

Their pages, segments and KB entries stay the plain dicts of ``Page.to_dict``,
``SegmentRecord.to_dict`` and ``KBEntry.to_dict`` (the archive is read far more often than
it is turned back into objects: a listing, the cold index and an export need a few fields
each). Embeddings are little-endian float16 bytes (:func:`emb_to_f16`, :func:`emb_from_f16`).

Encoding is byte for byte what earlier versions wrote (the keys in the same order, the same
types), so a data directory of an earlier version opens, and one written now opens there.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from memoryos_actors.errors import InvalidInput
from memoryos_actors.records import (
    AgentProfile,
    KBEntry,
    Page,
    PersonaUpdate,
    SegmentRecord,
    TraitLevel,
    UserProfile,
)
from memoryos_actors.store.memory_ids import parse_memory_id

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = [
    "ARCHIVED_KINDS",
    "LOST_RECORD",
    "archive_keywords",
    "encode_archived",
    "AgentProfileRecord",
    "ArchiveRecord",
    "ArchivedFact",
    "ArchivedPage",
    "ArchivedSegment",
    "EditRecord",
    "LostRecord",
    "MetaRecord",
    "PersonaRecord",
    "RememberRecord",
    "TurnRecord",
    "UnknownRecord",
    "UserProfileRecord",
    "WalRecord",
    "decode_archived",
    "decode_edit",
    "decode_wal",
    "derived_of",
    "emb_from_f16",
    "emb_to_f16",
    "encode_edit_state",
    "encode_wal",
    "persona_job",
    "rename_archived_assistant",
    "scrub_page_map",
    "turn_seq",
    "is_archive_placeholder",
    "lost_record",
]

#: The kind (key ``"t"``) of the placeholder a repair writes for each record damage
#: destroyed, in a WAL or an archive: it keeps that record's seq taken, so every later seq
#: (and every cut that refers to one) still means what it meant. Readers skip it.
LOST_RECORD = "lost"

ARCHIVED_KINDS = ("segment", "page", "fact", "agent_trait")
"""The record kinds (key ``"t"``) the archive holds items of; other kinds (a repaired
record's placeholder) hold none."""


def emb_to_f16(emb: npt.ArrayLike) -> bytes:
    """An embedding as the little-endian float16 bytes archive records carry."""
    # Not at import: reading the files (``memoryos stats``) needs no numpy.
    import numpy as np

    from memoryos_actors import smallvec

    # smallvec: one vector's cast, without letting go of the interpreter lock.
    return smallvec.cast(np.asarray(emb, dtype=np.float32), "<f2").tobytes()


def emb_from_f16(raw: object) -> npt.NDArray[np.float32] | None:
    """The float32 vector of :func:`emb_to_f16` bytes, or None when ``raw`` is not such
    bytes (a record written before embeddings were archived has none)."""
    if not isinstance(raw, (bytes, bytearray)) or not raw or len(raw) % 2:
        return None
    import numpy as np

    return np.frombuffer(bytes(raw), dtype="<f2").astype(np.float32)


@dataclass(frozen=True, slots=True)
class ArchivedPage:
    """One page pushed out of a full segment.

    Attributes:
        page: the page as ``Page.to_dict`` gives it (``seq``, ``page_id``, ``query``, ...).
        segment_id: the segment it left, or None when unknown.
        keywords: the page's keywords, sorted.
        emb: its embedding as float16 bytes, or None.
    """

    page: Mapping[str, Any]
    segment_id: str | None = None
    keywords: tuple[str, ...] = ()
    emb: bytes | None = None

    kind: Literal["page"] = field(default="page", init=False)

    @classmethod
    def of_page(cls, page: Page, segment_id: str | None, emb: bytes | None) -> ArchivedPage:
        """The record of ``page`` pushed out of segment ``segment_id``."""
        return cls(page.to_dict(), segment_id, tuple(sorted(page.keywords)), emb)

    def to_page(self) -> Page:
        """The page, as a :class:`Page` (validated)."""
        return Page.from_dict(self.page)

    @property
    def pages(self) -> Sequence[Mapping[str, Any]]:
        """The pages the record holds: this one."""
        return (self.page,)

    @property
    def seq(self) -> int:
        """The page's turn seq."""
        return int(self.page["seq"])

    def seqs(self) -> list[int]:
        """Turn seqs of the pages the record holds."""
        return [self.seq]

    def with_page(self, page: Mapping[str, Any]) -> ArchivedPage:
        """This record holding ``page`` instead."""
        return ArchivedPage(page, self.segment_id, self.keywords, self.emb)

    def encode(self) -> dict[str, Any]:
        """The dict the archive file holds."""
        rec: dict[str, Any] = {"t": "page", "keywords": list(self.keywords), "page": self.page}
        if self.segment_id:
            rec["segment_id"] = self.segment_id
        if self.emb is not None:
            rec["emb"] = self.emb
        return rec


@dataclass(frozen=True, slots=True)
class ArchivedSegment:
    """A segment MTM evicted, with its pages.

    Attributes:
        segment: the segment as ``SegmentRecord.to_dict`` gives it (``segment_id``,
            ``summary``, ``heat``, ``created``, ``pages``: page dicts, ...).
        keywords: the segment's keywords (K_s), sorted.
        embs: the pages' embeddings as float16 bytes, by turn seq as a string (records of
            an early version keyed them by the int seq).
        scrubbed_through: the key (``lsn``, ``memory_id``, ``ts``) of the last deletion of
            the user's edit log whose scrub the segment's summary had seen when it was
            archived (:meth:`~memoryos_actors.store.edits.EditLog.deletion_key`): a
            deletion after it that names the segment clears the summary when the record
            is read. None (records of earlier versions too): every such deletion does.
    """

    segment: Mapping[str, Any]
    keywords: tuple[str, ...] = ()
    embs: Mapping[str | int, bytes] = field(default_factory=dict)
    scrubbed_through: tuple[int, str, float] | None = None

    kind: Literal["segment"] = field(default="segment", init=False)

    @classmethod
    def of_segment(
        cls,
        segment: SegmentRecord,
        embs: Mapping[str | int, bytes],
        scrubbed_through: tuple[int, str, float] | None = None,
    ) -> ArchivedSegment:
        """The record of evicted ``segment`` (``embs``: float16 embeddings by turn seq as
        a string; ``scrubbed_through``: see the class)."""
        return cls(segment.to_dict(), tuple(sorted(segment.keywords)), dict(embs), scrubbed_through)

    def to_segment(self) -> SegmentRecord:
        """The segment with its pages, as a :class:`SegmentRecord` (validated)."""
        return SegmentRecord.from_dict(self.segment)

    @property
    def segment_id(self) -> str:
        """The segment's id."""
        return str(self.segment["segment_id"])

    @property
    def pages(self) -> Sequence[Mapping[str, Any]]:
        """The pages the record holds, oldest first."""
        pages: Sequence[Mapping[str, Any]] = self.segment.get("pages") or ()
        return pages

    def seqs(self) -> list[int]:
        """Turn seqs of the pages the record holds."""
        return [int(p["seq"]) for p in self.pages]

    def emb_of(self, seq: int) -> bytes | None:
        """The float16 embedding of the page of turn ``seq``, or None."""
        found = self.embs.get(str(seq))
        if found is None:  # records of an early version keyed them by int
            found = self.embs.get(seq)
        return found

    def with_pages(self, pages: Iterable[Mapping[str, Any]]) -> ArchivedSegment:
        """This record holding only ``pages``."""
        return replace(self, segment={**self.segment, "pages": list(pages)})

    def edited(
        self,
        deleted_pages: Container[int],
        scrub_page: Callable[[Mapping[str, Any]], Mapping[str, Any]],
        *,
        scrub_summary: bool,
    ) -> ArchivedSegment | None:
        """This record without the pages of ``deleted_pages`` and with ``scrub_page``
        applied to the others (None when no page is left; the record itself when nothing
        changes). With ``scrub_summary`` its summary is cleared (it may quote a deleted
        page) and its keywords become those of the pages left."""
        pages = self.pages
        kept = [scrub_page(p) for p in pages if int(p["seq"]) not in deleted_pages]
        if (
            len(kept) == len(pages)
            and not scrub_summary
            and all(a is b for a, b in zip(kept, pages, strict=True))
        ):
            return self
        if not kept:
            return None
        seqs = {int(p["seq"]) for p in kept}
        segment: dict[str, Any] = {**self.segment, "pages": kept}
        embs = {k: v for k, v in self.embs.items() if int(k) in seqs}
        keywords = self.keywords
        if scrub_summary:
            kws = sorted({str(k) for p in kept for k in p.get("keywords") or ()})
            segment = {**segment, "summary": "", "keywords": kws}
            keywords = tuple(kws)
        return replace(self, segment=segment, keywords=keywords, embs=embs)

    def encode(self) -> dict[str, Any]:
        """The dict the archive file holds."""
        rec: dict[str, Any] = {
            "t": "segment",
            "keywords": list(self.keywords),
            "segment": self.segment,
            "embs": dict(self.embs),
        }
        if self.scrubbed_through is not None:
            rec["scrubbed_through"] = list(self.scrubbed_through)
        return rec


@dataclass(frozen=True, slots=True)
class ArchivedFact:
    """A user fact or an assistant trait pushed out of LPM's FIFO.

    Attributes:
        kind: ``"fact"`` or ``"agent_trait"``.
        entry: the entry as ``KBEntry.to_dict`` gives it (``entry_id``, ``text``, ...).
        assistant: the assistant an ``agent_trait`` belongs to (``""`` for a fact).
        emb: its embedding as float16 bytes, or None.
    """

    kind: Literal["fact", "agent_trait"]
    entry: Mapping[str, Any]
    assistant: str = ""
    emb: bytes | None = None

    @classmethod
    def of_entry(
        cls, kind: Literal["fact", "agent_trait"], entry: KBEntry, assistant: str, emb: bytes | None
    ) -> ArchivedFact:
        """The record of ``entry`` pushed out of LPM's FIFO of ``kind``."""
        return cls(kind, entry.to_dict(), assistant, emb)

    def to_entry(self) -> KBEntry:
        """The entry, as a :class:`KBEntry` (validated)."""
        return KBEntry.from_dict(self.entry)

    @property
    def pages(self) -> Sequence[Mapping[str, Any]]:
        """The pages the record holds: none."""
        return ()

    def seqs(self) -> list[int]:
        """Turn seqs of the pages the record holds: none."""
        return []

    @property
    def memory_id(self) -> str:
        """The memory id of the entry (``fact:f3``, ``agent_trait:<assistant>:a2``)."""
        entry_id = self.entry.get("entry_id")
        if self.kind == "fact":
            return f"fact:{entry_id}"
        return f"agent_trait:{self.assistant}:{entry_id}"

    def corrected(self, text: str, emb: bytes | None) -> ArchivedFact:
        """This record with the entry's text ``text`` and embedding ``emb`` (a user's
        correction)."""
        return ArchivedFact(self.kind, {**self.entry, "text": text}, self.assistant, emb or None)

    def encode(self) -> dict[str, Any]:
        """The dict the archive file holds."""
        rec: dict[str, Any] = {"t": self.kind, "entry": self.entry, "assistant": self.assistant}
        if self.emb is not None:
            rec["emb"] = self.emb
        return rec


ArchiveRecord = ArchivedSegment | ArchivedPage | ArchivedFact
"""Any record of the archive that holds items."""


def scrub_page_map(
    page: Mapping[str, Any], scrubbed: Callable[[str, int], bool]
) -> Mapping[str, Any]:
    """A page's map (``Page.to_dict``) with its chain summary cleared when ``scrubbed(chain
    id, seq)`` says it may quote a deleted page (the map itself when not)."""
    if page.get("meta_chain") and scrubbed(str(page.get("chain_id") or ""), int(page["seq"])):
        return {**page, "meta_chain": ""}
    return page


def _deletion_key(raw: Any) -> tuple[int, str, float] | None:
    """A deletion's key as an archived segment records it (``[lsn, memory_id, ts]``), or
    None for a missing or malformed one (read as "no deletion seen": the safe side)."""
    if not isinstance(raw, (list, tuple)) or len(raw) != 3:
        return None
    lsn, mid, ts = raw
    if isinstance(lsn, bool) or not isinstance(lsn, int) or not isinstance(mid, str):
        return None
    if isinstance(ts, bool) or not isinstance(ts, (int, float)):
        return None
    return int(lsn), mid, float(ts)


def decode_archived(rec: Mapping[str, Any]) -> ArchiveRecord | None:
    """The typed record of an archive file's dict, or None for a kind that holds no item
    (a repaired record's placeholder, a kind of a later version).

    Raises:
        KeyError, TypeError: a record of a known kind without what that kind must hold (a
            page without ``seq`` is caught by the readers of damaged data; see repair).
    """
    kind = rec.get("t")
    if kind == "segment":
        segment = rec["segment"]
        if not isinstance(segment, Mapping):
            raise TypeError(f"archived segment is a {type(segment).__name__}, not a map")
        return ArchivedSegment(
            segment,
            tuple(rec.get("keywords") or ()),
            rec.get("embs") or {},
            _deletion_key(rec.get("scrubbed_through")),
        )
    if kind == "page":
        page = rec["page"]
        if not isinstance(page, Mapping):
            raise TypeError(f"archived page is a {type(page).__name__}, not a map")
        sid = rec.get("segment_id")
        return ArchivedPage(
            page,
            str(sid) if sid else None,
            tuple(rec.get("keywords") or ()),
            rec.get("emb"),
        )
    if kind in ("fact", "agent_trait"):
        return ArchivedFact(
            kind,
            rec.get("entry") or {},
            str(rec.get("assistant") or ""),
            rec.get("emb"),
        )
    return None


# -- WAL records ---------------------------------------------------------------------------


def _num(value: Any) -> float:
    """A stored number as written (an int stays an int: re-encoding gives the same bytes)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value
    return float(value)


@dataclass(frozen=True, slots=True)
class TurnRecord:
    """One turn, logged before the caller is acknowledged (short keys: one per turn).

    Attributes:
        seq: the user's turn number.
        assistant_id: the assistant that answered.
        query: what the user said.
        response: what the assistant answered.
        timestamp: when, seconds since the epoch.
        turn_key: the caller's idempotency key, or ``""``.
    """

    seq: int
    assistant_id: str
    query: str
    response: str
    timestamp: float
    turn_key: str = ""

    kind: ClassVar[str] = "turn"

    @classmethod
    def of_page(cls, page: Page, turn_key: str = "") -> TurnRecord:
        """The record of ``page``'s turn."""
        return cls(page.seq, page.assistant_id, page.query, page.response, page.timestamp, turn_key)

    def page(self, user_id: str) -> Page:
        """The page of this turn (without meta data)."""
        return Page(
            user_id=user_id,
            assistant_id=self.assistant_id,
            page_id=f"p{self.seq}",
            seq=self.seq,
            query=self.query,
            response=self.response,
            timestamp=float(self.timestamp),
        )

    def encode(self) -> dict[str, Any]:
        """The map the WAL holds."""
        rec: dict[str, Any] = {
            "t": "turn",
            "seq": self.seq,
            "a": self.assistant_id,
            "q": self.query,
            "r": self.response,
            "ts": self.timestamp,
        }
        if self.turn_key:
            rec["k"] = self.turn_key
        return rec

    @classmethod
    def decode(cls, rec: Mapping[str, Any]) -> TurnRecord:
        """The record of a WAL map (see :meth:`encode`)."""
        return cls(
            int(rec["seq"]),
            str(rec["a"]),
            str(rec["q"]),
            str(rec["r"]),
            _num(rec["ts"]),
            str(rec.get("k") or ""),
        )


@dataclass(frozen=True, slots=True)
class MetaRecord:
    """A page's dialogue-chain meta data (replay keeps the last one of a seq).

    Attributes:
        seq: the page's turn number.
        meta_chain: the running summary of its dialogue chain.
        chain_id: the chain's id.
        keywords: the page's keywords, sorted.
    """

    seq: int
    meta_chain: str
    chain_id: str
    keywords: tuple[str, ...]

    kind: ClassVar[str] = "meta"

    @classmethod
    def of_page(cls, page: Page) -> MetaRecord:
        """The record of ``page``'s meta data."""
        return cls(page.seq, page.meta_chain, page.chain_id, tuple(sorted(page.keywords)))

    def encode(self) -> dict[str, Any]:
        """The map the WAL holds."""
        return {
            "t": "meta",
            "seq": self.seq,
            "m": self.meta_chain,
            "ch": self.chain_id,
            "k": list(self.keywords),
        }

    @classmethod
    def decode(cls, rec: Mapping[str, Any]) -> MetaRecord:
        """The record of a WAL map (see :meth:`encode`)."""
        return cls(
            int(rec["seq"]),
            str(rec["m"]),
            str(rec["ch"]),
            tuple(str(k) for k in rec["k"]),
        )


@dataclass(frozen=True, slots=True)
class PersonaRecord:
    """What a promotion taught LPM, from the gateway's answer on: logged, replayed and made
    the :class:`PersonaUpdate` LPM applies (:meth:`update`).

    Attributes:
        assistant_id: the assistant whose agent traits it updates.
        segment_id: the promoted segment (``"<user>/<segment>"`` when another user's
            promotion taught a shared persona; ``""`` when unknown).
        traits: ``(name, level, evidence)`` of the user traits it sets.
        facts: user facts learned.
        agent_traits: the assistant's traits learned.
        degraded: whether the gateway answered without the LLM (a fallback).
        timestamp: when it was logged, seconds; None for records written before it was
            kept (their entries are stamped at replay).
        job: the id of the MTM job that asked for it (``""``: none).
    """

    assistant_id: str
    segment_id: str
    traits: tuple[tuple[str, str, str], ...] = ()
    facts: tuple[str, ...] = ()
    agent_traits: tuple[str, ...] = ()
    degraded: bool = False
    timestamp: float | None = None
    job: str = ""

    kind: ClassVar[str] = "persona"

    @classmethod
    def from_gateway(
        cls,
        data: Mapping[str, Any],
        *,
        assistant_id: str,
        segment_id: str,
        degraded: bool,
        timestamp: float,
    ) -> PersonaRecord:
        """The record of the gateway's persona answer ``data`` (``traits``: maps with
        ``name``, ``level`` and ``evidence``; ``facts``; ``agent_traits``)."""
        return cls(
            assistant_id=assistant_id,
            segment_id=segment_id,
            traits=tuple(
                (str(t["name"]), str(t["level"]), str(t.get("evidence", "")))
                for t in data.get("traits", ())
            ),
            facts=tuple(str(f) for f in data.get("facts", ())),
            agent_traits=tuple(str(a) for a in data.get("agent_traits", ())),
            degraded=bool(degraded),
            timestamp=timestamp,
        )

    @property
    def learned(self) -> bool:
        """Whether it teaches anything (a trait, a fact or an agent trait)."""
        return bool(self.traits or self.facts or self.agent_traits)

    def update(self, user_id: str) -> tuple[PersonaUpdate, tuple[str, ...]]:
        """The update LPM applies for ``user_id``, and the names of the traits it leaves out
        (not among the 90 user traits, or with an invalid level)."""
        known: list[TraitLevel] = []
        unknown: list[str] = []
        for name, level, evidence in self.traits:
            try:
                known.append(TraitLevel.known(name, level, evidence))
            except InvalidInput:
                unknown.append(name)
        update = PersonaUpdate(
            user_id=user_id,
            assistant_id=self.assistant_id,
            traits=tuple(known),
            facts=self.facts,
            agent_traits=self.agent_traits,
            source_segment=self.segment_id,
        )
        return update, tuple(unknown)

    def encode(self) -> dict[str, Any]:
        """The map the WAL holds."""
        rec: dict[str, Any] = {
            "t": "persona",
            "assistant": self.assistant_id,
            "segment": self.segment_id,
            "traits": [[n, lv, ev] for n, lv, ev in self.traits],
            "facts": list(self.facts),
            "agent_traits": list(self.agent_traits),
            "degraded": self.degraded,
        }
        if self.timestamp is not None:
            rec["ts"] = self.timestamp
        if self.job:
            rec["job"] = self.job
        return rec

    @classmethod
    def decode(cls, rec: Mapping[str, Any]) -> PersonaRecord:
        """The record of a WAL map (see :meth:`encode`)."""
        ts = rec.get("ts")
        return cls(
            assistant_id=str(rec["assistant"]),
            segment_id=str(rec["segment"]),
            traits=tuple((str(n), str(lv), str(ev)) for n, lv, ev in rec["traits"]),
            facts=tuple(str(f) for f in rec["facts"]),
            agent_traits=tuple(str(a) for a in rec["agent_traits"]),
            degraded=bool(rec.get("degraded", False)),
            timestamp=_num(ts) if isinstance(ts, (int, float)) else None,
            job=str(rec.get("job") or ""),
        )


@dataclass(frozen=True, slots=True)
class UserProfileRecord:
    """The user's profile, as the application set it."""

    profile: UserProfile

    kind: ClassVar[str] = "user_profile"

    def encode(self) -> dict[str, Any]:
        """The map the WAL holds."""
        return {"t": "user_profile", "profile": self.profile.to_dict()}

    @classmethod
    def decode(cls, rec: Mapping[str, Any]) -> UserProfileRecord:
        """The record of a WAL map (see :meth:`encode`)."""
        return cls(UserProfile.from_dict(rec["profile"]))


@dataclass(frozen=True, slots=True)
class AgentProfileRecord:
    """An assistant's profile as this user sees it, as the application set it."""

    assistant_id: str
    profile: AgentProfile

    kind: ClassVar[str] = "agent_profile"

    def encode(self) -> dict[str, Any]:
        """The map the WAL holds."""
        return {
            "t": "agent_profile",
            "assistant": self.assistant_id,
            "profile": self.profile.to_dict(),
        }

    @classmethod
    def decode(cls, rec: Mapping[str, Any]) -> AgentProfileRecord:
        """The record of a WAL map (see :meth:`encode`)."""
        return cls(str(rec["assistant"]), AgentProfile.from_dict(rec["profile"]))


@dataclass(frozen=True, slots=True)
class LostRecord:
    """The placeholder a repair writes for a record damage destroyed (WAL or archive).

    Attributes:
        repaired: when the repair ran, seconds since the epoch (None if not said).
    """

    repaired: float | None = None

    kind: ClassVar[str] = LOST_RECORD

    def encode(self) -> dict[str, Any]:
        """The map the log holds."""
        rec: dict[str, Any] = {"t": LOST_RECORD}
        if self.repaired is not None:
            rec["repaired"] = self.repaired
        return rec

    @classmethod
    def decode(cls, rec: Mapping[str, Any]) -> LostRecord:
        """The record of a log's map (see :meth:`encode`)."""
        repaired = rec.get("repaired")
        return cls(_num(repaired) if isinstance(repaired, (int, float)) else None)


def lost_record(repaired: float) -> dict[str, Any]:
    """The map of a repair's placeholder (:class:`LostRecord`), stamped ``repaired``."""
    return LostRecord(repaired).encode()


@dataclass(frozen=True, slots=True)
class UnknownRecord:
    """A WAL record of a kind this version does not know (a later version's): kept as it
    is, applied by no tier.

    Attributes:
        name: its kind (key ``"t"``), None when it has none.
        fields: the whole map.
    """

    name: str | None
    fields: Mapping[str, Any]

    kind: ClassVar[str] = "unknown"

    def encode(self) -> dict[str, Any]:
        """The map the WAL holds (as it was read)."""
        return dict(self.fields)


@dataclass(frozen=True, slots=True)
class EditRecord:
    """One per-memory edit, as the LPM actor logs it in the WAL and answers it.

    Attributes:
        op: ``"delete"`` or ``"correct"``.
        memory_id: the memory edited (``fact:f3``, ``page:p12``, ``trait:humor``, ...).
        old: its value before (``""`` once a later deletion erased it).
        ts: when, seconds since the epoch.
        pages: turn seqs of the pages a deletion removes.
        chains: ``(chain id, deleted seq, last seq stored then)`` of the dialogue chains a
            deleted page was in (their later chain summaries may quote it).
        segments: the segments whose summary may quote a deleted page.
        new: a correction's new value.
        evidence: a trait correction's evidence.
        emb: a fact or agent-trait correction's embedding, float16 bytes.
        lsn: the record's WAL LSN (0 before it is logged, and once imported).
        derived: what a deletion of pages did to the memories distilled from them that
            quote them (:mod:`memoryos_actors.tiers.quotes`), as ``(memory id, action,
            history positions)``: ``"delete"`` a fact or agent trait (its history keeps
            no value); ``"revert"`` a trait: the changes of its history at those positions
            (0 the oldest) go, and it takes the newest change left, or is cleared;
            ``"scrub"`` the same for a trait whose value stays, and for a fact or agent
            trait the user corrected (its text is the user's): the old values of its
            history are erased. Replaying the record does exactly that again: no text of
            the deleted pages is needed, and none is kept.
    """

    op: str
    memory_id: str
    old: Any
    ts: float
    pages: tuple[int, ...] = ()
    chains: tuple[tuple[str, int, int], ...] = ()
    segments: tuple[str, ...] = ()
    new: str | None = None
    evidence: str | None = None
    emb: bytes | None = None
    lsn: int = 0
    derived: tuple[tuple[str, str, tuple[int, ...]], ...] = ()

    @property
    def rewrote(self) -> tuple[str, ...]:
        """The memory ids :attr:`derived` names, in its order."""
        return tuple(mid for mid, _action, _at in self.derived)

    def encode(self) -> dict[str, Any]:
        """The WAL record (``{"t": "edit", ...}``; ``lsn`` only when set)."""
        rec: dict[str, Any] = {
            "t": "edit",
            "op": self.op,
            "id": self.memory_id,
            "old": self.old,
            "pages": list(self.pages),
            "chains": [[c, s, u] for c, s, u in self.chains],
            "segments": list(self.segments),
            "ts": self.ts,
        }
        if self.new is not None:
            rec["new"] = self.new
        if self.evidence is not None:
            rec["evidence"] = self.evidence
        if self.emb is not None:
            rec["emb"] = self.emb
        if self.lsn:
            rec["lsn"] = self.lsn
        if self.derived:
            rec["derived"] = [[mid, action, list(at)] for mid, action, at in self.derived]
        return rec

    @classmethod
    def decode(cls, rec: Mapping[str, Any]) -> EditRecord:
        """The edit of a WAL or export record (see :meth:`encode`)."""
        new, evidence, emb = rec.get("new"), rec.get("evidence"), rec.get("emb")
        return cls(
            op=str(rec["op"]),
            memory_id=str(rec["id"]),
            old=rec.get("old", ""),
            ts=float(rec.get("ts", 0.0) or 0.0),
            pages=tuple(int(s) for s in rec.get("pages") or ()),
            chains=tuple((str(c), int(s), int(u)) for c, s, u in rec.get("chains") or ()),
            segments=tuple(str(x) for x in rec.get("segments") or ()),
            new=None if new is None else str(new),
            evidence=None if evidence is None else str(evidence),
            emb=bytes(emb) if emb else None,
            lsn=int(rec.get("lsn", 0) or 0),
            derived=derived_of(rec),
        )


def derived_of(rec: Mapping[str, Any]) -> tuple[tuple[str, str, tuple[int, ...]], ...]:
    """The :attr:`EditRecord.derived` of a WAL or export record, checked: a malformed
    entry raises :class:`InvalidInput`."""
    out = []
    for entry in rec.get("derived") or ():
        if not isinstance(entry, (list, tuple)) or len(entry) != 3:
            raise InvalidInput(
                f"an edit's derived entry must be [id, action, [positions]], got {entry!r:.80}"
            )
        mid, action, at = entry
        ref = parse_memory_id(mid)
        allowed = ("revert", "scrub") if ref.kind == "trait" else ("delete", "scrub")
        if action not in allowed or ref.kind not in ("fact", "agent_trait", "trait"):
            raise InvalidInput(f"an edit's derived entry {entry!r:.80} is not one a deletion makes")
        if not isinstance(at, (list, tuple)) or not all(
            isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in at
        ):
            raise InvalidInput(f"an edit's derived positions must be ints >= 0, got {at!r:.80}")
        out.append((ref.memory_id, str(action), tuple(int(i) for i in at)))
    return tuple(out)


def decode_edit(rec: Mapping[str, Any]) -> EditRecord:
    """The edit of a WAL, snapshot or export map (see :meth:`EditRecord.encode`)."""
    return EditRecord.decode(rec)


def encode_edit_state(edit: EditRecord) -> dict[str, Any]:
    """The map a snapshot's (and an export's) LPM state keeps of ``edit``: its WAL map with
    ``"lsn"`` last, always there (0 once imported)."""
    rec = EditRecord.encode(edit)
    rec.pop("lsn", None)
    rec["lsn"] = edit.lsn
    return rec


@dataclass(frozen=True, slots=True)
class RememberRecord:
    """A free-text memory the application gave (``remember``): a user fact, logged by LPM
    before the caller is acknowledged.

    Attributes:
        entry_id: the fact's entry id (``f<n>``; its memory id is ``fact:f<n>``).
        text: the memory's text.
        timestamp: when, seconds since the epoch.
        metadata: the application's metadata, compact JSON text of an object (``""``:
            none).
        emb: the text's embedding, float16 bytes (a replay needs no embedder).
    """

    entry_id: str
    text: str
    timestamp: float
    metadata: str = ""
    emb: bytes | None = None

    kind: ClassVar[str] = "remember"

    def entry(self) -> KBEntry:
        """The user fact it adds (validated)."""
        return KBEntry(
            self.entry_id, self.text, self.timestamp, origin="remembered", metadata=self.metadata
        )

    def encode(self) -> dict[str, Any]:
        """The map the WAL holds."""
        rec: dict[str, Any] = {
            "t": "remember",
            "id": self.entry_id,
            "text": self.text,
            "ts": self.timestamp,
        }
        if self.metadata:
            rec["meta"] = self.metadata
        if self.emb is not None:
            rec["emb"] = self.emb
        return rec

    @classmethod
    def decode(cls, rec: Mapping[str, Any]) -> RememberRecord:
        """The record of a WAL map (see :meth:`encode`)."""
        emb = rec.get("emb")
        return cls(
            entry_id=str(rec["id"]),
            text=str(rec["text"]),
            timestamp=_num(rec["ts"]),
            metadata=str(rec.get("meta") or ""),
            emb=bytes(emb) if emb else None,
        )


WalRecord = (
    TurnRecord
    | MetaRecord
    | PersonaRecord
    | UserProfileRecord
    | AgentProfileRecord
    | EditRecord
    | RememberRecord
    | LostRecord
    | UnknownRecord
)
"""Any record of a user's WAL."""

_WAL_TYPES = (
    TurnRecord,
    MetaRecord,
    PersonaRecord,
    UserProfileRecord,
    AgentProfileRecord,
    EditRecord,
    RememberRecord,
    LostRecord,
    UnknownRecord,
)

_WAL_KINDS: dict[str, Any] = {
    "turn": TurnRecord.decode,
    "meta": MetaRecord.decode,
    "persona": PersonaRecord.decode,
    "user_profile": UserProfileRecord.decode,
    "agent_profile": AgentProfileRecord.decode,
    "edit": EditRecord.decode,
    "remember": RememberRecord.decode,
    LOST_RECORD: LostRecord.decode,
}


def decode_wal(rec: Mapping[str, Any]) -> WalRecord:
    """The typed record of a WAL map; :class:`UnknownRecord` for a kind this version does
    not know.

    Raises:
        KeyError, TypeError, ValueError, InvalidInput: a record of a known kind without
            what that kind must hold (damage that kept its checksum, a hand-made file).
    """
    kind = rec.get("t")
    decode = _WAL_KINDS.get(kind) if isinstance(kind, str) else None
    if decode is None:
        return UnknownRecord(kind if isinstance(kind, str) else None, dict(rec))
    found: WalRecord = decode(rec)
    return found


def encode_wal(record: WalRecord | dict[str, Any]) -> Any:
    """The map the WAL holds for ``record`` (a plain dict, or anything that is not a
    record, is handed on as it is: the framed log refuses what is not a packable dict)."""
    if isinstance(record, _WAL_TYPES):
        return record.encode()
    return record


def persona_job(rec: WalRecord | Mapping[str, Any]) -> str:
    """The id of the MTM job whose persona update ``rec`` is (``""``: none, or not a
    persona record); a map is read without decoding the rest of it."""
    if isinstance(rec, PersonaRecord):
        return rec.job
    if isinstance(rec, Mapping) and rec.get("t") == PersonaRecord.kind:
        return str(rec.get("job") or "")
    return ""


def turn_seq(rec: Mapping[str, Any]) -> int | None:
    """The turn seq of a WAL map that is a whole ``turn`` record (None for any other map,
    and for one damage left without what a turn holds)."""
    if rec.get("t") != TurnRecord.kind or not isinstance(rec.get("seq"), int):
        return None
    try:
        return TurnRecord.decode(rec).seq
    except (KeyError, TypeError, ValueError):
        return None


def encode_archived(record: ArchiveRecord | dict[str, Any]) -> Any:
    """The map the archive holds for ``record`` (a plain dict is handed on as it is)."""
    if isinstance(record, (ArchivedSegment, ArchivedPage, ArchivedFact)):
        return record.encode()
    return record


def archive_keywords(rec: Mapping[str, Any]) -> frozenset[str]:
    """The lower-case keywords an archive map names (its ``keywords`` list)."""
    kws = rec.get("keywords")
    if isinstance(kws, (list, tuple, set, frozenset)):
        return frozenset(k.lower() for k in kws if isinstance(k, str))
    return frozenset()


def rename_archived_assistant(rec: object, rename: Callable[[str], str]) -> None:
    """Rename, in place, the assistant of an archive map that is an agent trait's (any
    other value, however malformed, is left alone: exports are untrusted)."""
    if isinstance(rec, dict) and rec.get("t") == "agent_trait":
        aid = rec.get("assistant")
        if isinstance(aid, str) and aid:
            rec["assistant"] = rename(aid)


def is_archive_placeholder(rec: Mapping[str, Any]) -> bool:
    """Whether an archive map is a repair's placeholder (:class:`LostRecord`)."""
    return rec.get("t") == LOST_RECORD
