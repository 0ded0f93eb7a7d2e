"""Domain records: pages, segments, traits, knowledge-base entries, profiles, persona updates.

Every record is a frozen, slotted dataclass: immutable, picklable, validated when built
(:class:`~memoryos_actors.errors.InvalidInput` names the field), with tuples instead of lists
and ``frozenset[str]`` keyword sets of lower-case tokens. ``to_dict()`` gives plain values
(str, int, float, bool, None, list, dict) that round-trip through msgpack, and
``Cls.from_dict(d)`` rebuilds the object. The field checks and the dict codec every record
class shares are :mod:`memoryos_actors.record_base`'s; the other record modules are
:mod:`memoryos_actors.requests`, :mod:`memoryos_actors.hits` and
:mod:`memoryos_actors.context`.

Times are seconds since the Unix epoch (finite, >= 0); scores are plain floats.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

from memoryos_actors.errors import InvalidInput
from memoryos_actors.record_base import (
    _choice,
    _fail,
    _integer,
    _number,
    _opt_text,
    _pairs,
    _Record,
    _record,
    _text,
    _timestamp,
    _tuple_of,
)
from memoryos_actors.trait_table import TRAIT_CATEGORIES, category_of

__all__ = [
    "AgentProfile",
    "DEFAULT_ASSISTANT",
    "KBEntry",
    "Page",
    "PersonaUpdate",
    "SegmentRecord",
    "SegmentView",
    "TIERS",
    "TRAIT_CATEGORIES",
    "TRAIT_LEVELS",
    "TraitLevel",
    "UserProfile",
    "normalize_keywords",
]

DEFAULT_ASSISTANT = "default"
"""The assistant id used when a caller does not name one."""

TIERS: tuple[str, ...] = ("stm", "mtm", "lpm", "archive")
"""Memory tiers a :class:`ContextItem` can come from."""


TRAIT_LEVELS: tuple[str, ...] = ("low", "medium", "high")
"""Levels a user trait can take; ``None`` means not yet observed."""

Tier = Literal["stm", "mtm", "lpm", "archive"]
RetrievalMode = Literal["paper", "hybrid"]


def normalize_keywords(values: Iterable[str]) -> frozenset[str]:
    """Lower-case, strip and deduplicate keywords; empty strings are dropped.

    Raises:
        InvalidInput: ``values`` is a bare string or holds a non-string.
    """
    if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
        raise InvalidInput(f"keywords must be a collection of strings, got {values!r}")
    out = set()
    for v in values:
        if not isinstance(v, str):
            raise InvalidInput(f"keywords must be strings, got {v!r}")
        v = v.strip().lower()
        if v:
            out.add(v)
    return frozenset(out)


def _keywords(obj: Any, name: str) -> None:
    try:
        kw = normalize_keywords(getattr(obj, name))
    except InvalidInput as exc:
        raise InvalidInput(f"{type(obj).__name__}.{name}: {exc}") from None
    object.__setattr__(obj, name, kw)


# ---------------------------------------------------------------------------- records


@_record
@dataclass(frozen=True, slots=True)
class Page(_Record):
    """One dialogue turn (a user query and the assistant's response).

    Attributes:
        user_id: owner of the page.
        assistant_id: the assistant that answered.
        page_id: ``f"p{seq}"``.
        seq: the user's turn number, from 1.
        query: what the user said.
        response: what the assistant answered.
        timestamp: when the turn happened, seconds since the epoch.
        meta_chain: running summary of the dialogue chain this page belongs to (filled in
            later by the LLM; empty until then).
        chain_id: id of that dialogue chain ("" until known).
        keywords: lower-case keywords of the turn.
    """

    user_id: str
    assistant_id: str
    page_id: str
    seq: int
    query: str
    response: str
    timestamp: float
    meta_chain: str = ""
    chain_id: str = ""
    keywords: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        _text(self, "user_id", nonempty=True)
        _text(self, "assistant_id", nonempty=True)
        _integer(self, "seq", minimum=1)
        _text(self, "page_id")
        if self.page_id != f"p{self.seq}":
            raise _fail("Page", "page_id", f"must be 'p{self.seq}' (from seq)", self.page_id)
        _text(self, "query")
        _text(self, "response")
        _timestamp(self, "timestamp")
        _text(self, "meta_chain")
        _text(self, "chain_id")
        _keywords(self, "keywords")

    @classmethod
    def create(
        cls,
        user_id: str,
        seq: int,
        query: str,
        response: str,
        timestamp: float,
        *,
        assistant_id: str = DEFAULT_ASSISTANT,
        keywords: Iterable[str] = (),
    ) -> Page:
        """Build a page with ``page_id`` derived from ``seq``."""
        return cls(
            user_id,
            assistant_id,
            f"p{seq}",
            seq,
            query,
            response,
            timestamp,
            keywords=normalize_keywords(keywords),
        )

    def text(self) -> str:
        """The turn as prompt text: ``User: ...`` then ``Assistant: ...``."""
        return f"User: {self.query}\nAssistant: {self.response}"


def _segment_fields(obj: Any) -> None:
    """The checks :class:`SegmentView` and :class:`SegmentRecord` share."""
    _text(obj, "segment_id", nonempty=True)
    _text(obj, "summary")
    _keywords(obj, "keywords")
    _number(obj, "heat")
    _integer(obj, "n_visit", minimum=0)
    _integer(obj, "l_interaction", minimum=0)
    _timestamp(obj, "last_access")
    _timestamp(obj, "created")


@_record
@dataclass(frozen=True, slots=True)
class SegmentView(_Record):
    """A read-only picture of one MTM segment (a group of pages on one topic).

    Attributes:
        segment_id: ``"s<n>"``.
        summary: LLM summary of the topic ("" until written).
        keywords: the segment's keyword set K_s.
        page_ids: pages in the segment, oldest first.
        heat: heat at the last recomputation.
        n_visit: retrievals of this segment.
        l_interaction: pages gathered since creation or the last promotion.
        last_access: last insert or retrieval, seconds since the epoch.
        created: creation time, seconds since the epoch.
    """

    segment_id: str
    summary: str
    keywords: frozenset[str]
    page_ids: tuple[str, ...]
    heat: float
    n_visit: int
    l_interaction: int
    last_access: float
    created: float

    def __post_init__(self) -> None:
        _tuple_of(self, "page_ids", str)
        _segment_fields(self)


@_record
@dataclass(frozen=True, slots=True)
class SegmentRecord(_Record):
    """A full segment with its pages: what eviction archives and promotion hands to LPM.

    Fields as in :class:`SegmentView`, with ``pages`` (oldest first) instead of ids.
    """

    user_id: str
    segment_id: str
    summary: str
    keywords: frozenset[str]
    pages: tuple[Page, ...]
    heat: float
    n_visit: int
    l_interaction: int
    last_access: float
    created: float

    def __post_init__(self) -> None:
        _text(self, "user_id", nonempty=True)
        _tuple_of(self, "pages", Page)
        _segment_fields(self)

    def view(self) -> SegmentView:
        """The same segment as a :class:`SegmentView`."""
        return SegmentView(
            self.segment_id,
            self.summary,
            self.keywords,
            tuple(p.page_id for p in self.pages),
            self.heat,
            self.n_visit,
            self.l_interaction,
            self.last_access,
            self.created,
        )


@_record
@dataclass(frozen=True, slots=True)
class TraitLevel(_Record):
    """One of the 90 user-trait dimensions and what is known about it.

    Attributes:
        name: trait name from :data:`memoryos_actors.tiers.traits.TRAITS`.
        category: one of :data:`TRAIT_CATEGORIES`.
        level: ``"low"``, ``"medium"``, ``"high"`` or None (not observed yet).
        evidence: short justification quoted or paraphrased from the dialogue.
    """

    name: str
    category: str
    level: str | None = None
    evidence: str = ""

    def __post_init__(self) -> None:
        _text(self, "name", nonempty=True)
        _choice(self, "category", TRAIT_CATEGORIES)
        if self.level is not None:
            _choice(self, "level", TRAIT_LEVELS)
        _text(self, "evidence")

    @classmethod
    def known(cls, name: str, level: str | None = None, evidence: str = "") -> TraitLevel:
        """A TraitLevel for one of the 90 traits, its category taken from the table.

        Raises:
            InvalidInput: ``name`` is not one of the 90 traits, or ``level`` is invalid.
        """
        category = category_of(name) if isinstance(name, str) else None
        if category is None:
            raise InvalidInput(f"TraitLevel.name {name!r} is not one of the 90 user traits")
        return cls(name, category, level, evidence)


@_record
@dataclass(frozen=True, slots=True)
class KBEntry(_Record):
    """A fact about the user (knowledge base) or a trait of the agent.

    Attributes:
        entry_id: ``"f<n>"`` for user facts, ``"a<n>"`` for agent traits.
        text: the fact in one sentence.
        timestamp: when it was learned, seconds since the epoch.
        source_segment: the MTM segment it was distilled from, if any.
        origin: how it came: ``""`` distilled by a persona update, ``"remembered"`` given
            by the application (``remember``).
        metadata: the application's metadata of a remembered fact, as compact JSON text of
            an object (``""``: none).
    """

    entry_id: str
    text: str
    timestamp: float
    source_segment: str | None = None
    origin: str = ""
    metadata: str = ""

    def __post_init__(self) -> None:
        _text(self, "entry_id", nonempty=True)
        _text(self, "text", nonempty=True)
        _timestamp(self, "timestamp")
        _opt_text(self, "source_segment")
        _text(self, "origin")
        _text(self, "metadata")

    def to_dict(self) -> dict[str, Any]:
        """As :meth:`_Record.to_dict`, without ``origin`` and ``metadata`` when empty: an
        entry a persona update learnt is stored as earlier versions stored it."""
        out = _Record.to_dict(self)
        for name in ("origin", "metadata"):
            if not out[name]:
                del out[name]
        return out


@_record
@dataclass(frozen=True, slots=True)
class UserProfile(_Record):
    """Static facts about the user, set by the application.

    Attributes:
        name: the user's name, if known.
        gender: free text, if known.
        birth_year: a calendar year in 1..9999, if known.
        extras: further ``(key, value)`` pairs, keys distinct.
    """

    name: str | None = None
    gender: str | None = None
    birth_year: int | None = None
    extras: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        _opt_text(self, "name")
        _opt_text(self, "gender")
        if self.birth_year is not None:
            _integer(self, "birth_year", minimum=1)
            if self.birth_year > 9999:
                raise _fail("UserProfile", "birth_year", "must be <= 9999", self.birth_year)
        _pairs(self, "extras")

    def is_empty(self) -> bool:
        """True when nothing is known."""
        return (
            self.name is None
            and self.gender is None
            and self.birth_year is None
            and not self.extras
        )


@_record
@dataclass(frozen=True, slots=True)
class AgentProfile(_Record):
    """The assistant's persona as set by the application.

    Attributes:
        role: what the assistant is (e.g. "travel planner").
        character: how it behaves (tone, style).
        extras: further ``(key, value)`` pairs, keys distinct.
    """

    role: str = ""
    character: str = ""
    extras: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        _text(self, "role")
        _text(self, "character")
        _pairs(self, "extras")

    def is_empty(self) -> bool:
        """True when no role, character or extra is set."""
        return not self.role and not self.character and not self.extras


@_record
@dataclass(frozen=True, slots=True)
class PersonaUpdate(_Record):
    """What the LLM distilled from a promoted segment, for the LPM tier.

    Attributes:
        user_id: owner.
        assistant_id: the assistant whose agent traits are updated.
        traits: new levels for user traits.
        facts: new user facts (knowledge base).
        agent_traits: new traits of the assistant.
        source_segment: the promoted segment, if any.
    """

    user_id: str
    assistant_id: str
    traits: tuple[TraitLevel, ...] = ()
    facts: tuple[str, ...] = ()
    agent_traits: tuple[str, ...] = ()
    source_segment: str | None = None

    def __post_init__(self) -> None:
        _text(self, "user_id", nonempty=True)
        _text(self, "assistant_id", nonempty=True)
        _tuple_of(self, "traits", TraitLevel)
        _tuple_of(self, "facts", str)
        _tuple_of(self, "agent_traits", str)
        _opt_text(self, "source_segment")
