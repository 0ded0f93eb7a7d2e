"""Records and messages: the only values actors exchange.

Every class here is a frozen, slotted dataclass: immutable, picklable, validated when built
(:class:`~memoryos_actors.errors.InvalidInput` names the field), with tuples instead of lists
and ``frozenset[str]`` keyword sets of lower-case tokens. ``to_dict()`` gives plain values
(str, int, float, bool, None, list, dict) that round-trip through msgpack, and
``Cls.from_dict(d)`` rebuilds the object. :func:`encode_message` / :func:`decode_message` add a
``"type"`` tag so a WAL record can be decoded without knowing its class in advance.

Times are seconds since the Unix epoch (finite, >= 0); scores are plain floats.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal, TypeVar

from memoryos_actors.errors import InvalidInput

__all__ = [
    "DEFAULT_ASSISTANT",
    "TIERS",
    "TRAIT_CATEGORIES",
    "TRAIT_LEVELS",
    "AddTurn",
    "AgentProfile",
    "ContextItem",
    "FactHit",
    "HeatTick",
    "KBEntry",
    "LPMEffects",
    "LPMView",
    "MTMEffects",
    "MTMHits",
    "MemoryContext",
    "Page",
    "PageHit",
    "PersonaUpdate",
    "Retrieve",
    "SegmentHit",
    "SegmentRecord",
    "SegmentView",
    "SetAgentProfile",
    "SetPageMeta",
    "SetSegmentSummary",
    "SetUserProfile",
    "TraitLevel",
    "UserProfile",
    "decode_message",
    "encode_message",
    "normalize_keywords",
]

DEFAULT_ASSISTANT = "default"
"""The assistant id used when a caller does not name one."""

TIERS: tuple[str, ...] = ("stm", "mtm", "lpm", "archive")
"""Memory tiers a :class:`ContextItem` can come from."""

TRAIT_CATEGORIES: tuple[str, ...] = (
    "basic_needs_personality",
    "ai_alignment",
    "content_interests",
)
"""The paper's three user-trait categories (see :mod:`memoryos_actors.tiers.traits`)."""

TRAIT_LEVELS: tuple[str, ...] = ("low", "medium", "high")
"""Levels a user trait can take; ``None`` means not yet observed."""

Tier = Literal["stm", "mtm", "lpm", "archive"]
RetrievalMode = Literal["paper", "hybrid"]

# ---------------------------------------------------------------------------- validation


def _fail(cls: str, name: str, what: str, value: Any) -> InvalidInput:
    shown = repr(value)
    if len(shown) > 80:
        shown = shown[:77] + "..."
    return InvalidInput(f"{cls}.{name} {what}, got {shown}")


def _text(obj: Any, name: str, *, nonempty: bool = False) -> str:
    value = getattr(obj, name)
    cls = type(obj).__name__
    if not isinstance(value, str):
        raise _fail(cls, name, "must be a str", value)
    try:
        # Lone surrogates cannot be stored as UTF-8 (msgpack, WAL): refuse them up front.
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise _fail(cls, name, "must be valid Unicode (no lone surrogates)", value) from None
    if nonempty and not value.strip():
        raise _fail(cls, name, "must be a non-empty string", value)
    return value


def _opt_text(obj: Any, name: str, *, nonempty: bool = False) -> None:
    if getattr(obj, name) is not None:
        _text(obj, name, nonempty=nonempty)


def _integer(obj: Any, name: str, *, minimum: int | None = None) -> None:
    value = getattr(obj, name)
    if isinstance(value, bool) or not isinstance(value, int):
        raise _fail(type(obj).__name__, name, "must be an int", value)
    if minimum is not None and value < minimum:
        raise _fail(type(obj).__name__, name, f"must be >= {minimum}", value)


def _number(obj: Any, name: str, *, minimum: float | None = None, optional: bool = False) -> None:
    value = getattr(obj, name)
    if value is None and optional:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _fail(type(obj).__name__, name, "must be a number", value)
    value = float(value)
    if not math.isfinite(value):
        raise _fail(type(obj).__name__, name, "must be finite", value)
    if minimum is not None and value < minimum:
        raise _fail(type(obj).__name__, name, f"must be >= {minimum}", value)
    object.__setattr__(obj, name, value)


def _timestamp(obj: Any, name: str, *, optional: bool = False) -> None:
    _number(obj, name, minimum=0.0, optional=optional)


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


def _tuple_of(obj: Any, name: str, kind: type | tuple[type, ...]) -> None:
    value = getattr(obj, name)
    cls = type(obj).__name__
    if isinstance(value, list):
        value = tuple(value)
    if not isinstance(value, tuple):
        raise _fail(cls, name, "must be a tuple", value)
    for item in value:
        if not isinstance(item, kind):
            raise _fail(cls, name, f"must hold {_kind_name(kind)}", item)
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                raise _fail(cls, name, "must hold valid Unicode", item) from None
    object.__setattr__(obj, name, value)


def _kind_name(kind: type | tuple[type, ...]) -> str:
    if isinstance(kind, tuple):
        return " or ".join(k.__name__ for k in kind)
    return kind.__name__


def _pairs(obj: Any, name: str) -> None:
    """``extras``: a tuple of (key, value) string pairs with distinct keys."""
    value = getattr(obj, name)
    cls = type(obj).__name__
    if isinstance(value, Mapping):
        value = tuple(sorted(value.items()))
    if isinstance(value, list):
        value = tuple(value)
    if not isinstance(value, tuple):
        raise _fail(cls, name, "must be a tuple of (key, value) pairs", value)
    pairs = []
    for item in value:
        if isinstance(item, list):
            item = tuple(item)
        if (
            not isinstance(item, tuple)
            or len(item) != 2
            or not all(isinstance(x, str) for x in item)
        ):
            raise _fail(cls, name, "must hold (str, str) pairs", item)
        pairs.append(item)
    keys = [k for k, _ in pairs]
    if len(set(keys)) != len(keys):
        raise _fail(cls, name, "must not repeat a key", keys)
    object.__setattr__(obj, name, tuple(pairs))


def _choice(obj: Any, name: str, choices: tuple[Any, ...]) -> None:
    value = getattr(obj, name)
    if value not in choices or isinstance(value, bool):
        raise _fail(type(obj).__name__, name, f"must be one of {choices}", value)


# ---------------------------------------------------------------------------- codec

_T = TypeVar("_T", bound="_Record")
_HINTS_CACHE: dict[type, dict[str, Any]] = {}


def _hints(cls: type) -> dict[str, Any]:
    hints = _HINTS_CACHE.get(cls)
    if hints is None:
        hints = typing.get_type_hints(cls)
        _HINTS_CACHE[cls] = hints
    return hints


def _encode(value: Any) -> Any:
    if isinstance(value, _Record):
        return value.to_dict()
    if isinstance(value, frozenset):
        return sorted(value)
    if isinstance(value, tuple):
        return [_encode(v) for v in value]
    return value


def _decode(tp: Any, value: Any) -> Any:
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        if value is None:
            return None
        inner = [a for a in typing.get_args(tp) if a is not type(None)]
        return _decode(inner[0], value)
    if origin is tuple:
        if not isinstance(value, (list, tuple)):
            raise InvalidInput(f"expected a list, got {value!r}")
        args = typing.get_args(tp)
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_decode(args[0], v) for v in value)
        return tuple(_decode(a, v) for a, v in zip(args, value, strict=True))
    if origin is frozenset:
        if not isinstance(value, (list, tuple)):
            raise InvalidInput(f"expected a list of keywords, got {value!r}")
        return frozenset(value)
    if isinstance(tp, type) and issubclass(tp, _Record):
        return tp.from_dict(value)
    return value


class _Record:
    """Mixin of every message: dict conversion driven by the type hints."""

    __slots__ = ()

    def to_dict(self) -> dict[str, Any]:
        """Plain msgpack-friendly values: frozensets as sorted lists, tuples as lists."""
        return {
            f.name: _encode(getattr(self, f.name))
            for f in dataclasses.fields(self)  # type: ignore[arg-type]
        }

    @classmethod
    def from_dict(cls: type[_T], d: Mapping[str, Any]) -> _T:
        """Rebuild from :meth:`to_dict` output; validates like the constructor."""
        if not isinstance(d, Mapping):
            raise InvalidInput(f"{cls.__name__}.from_dict needs a mapping, got {type(d).__name__}")
        hints = _hints(cls)
        names = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
        unknown = sorted(set(d) - names - {"type"})
        if unknown:
            raise InvalidInput(f"{cls.__name__}.from_dict: unknown key(s) {unknown}")
        kwargs = {name: _decode(hints[name], d[name]) for name in names if name in d}
        try:
            return cls(**kwargs)
        except TypeError as exc:  # a required field was missing
            raise InvalidInput(f"{cls.__name__}.from_dict: {exc}") from None


def _record(cls: type[_T]) -> type[_T]:
    """Register a message class for :func:`decode_message`."""
    _REGISTRY[cls.__name__] = cls
    return cls


_REGISTRY: dict[str, type[_Record]] = {}


def encode_message(msg: _Record) -> dict[str, Any]:
    """``msg.to_dict()`` plus ``"type": <class name>``, for logs and the WAL."""
    if not isinstance(msg, _Record):
        raise InvalidInput(f"not a message: {msg!r}")
    d = msg.to_dict()
    d["type"] = type(msg).__name__
    return d


def decode_message(d: Mapping[str, Any]) -> Any:
    """Rebuild a message written by :func:`encode_message`."""
    if not isinstance(d, Mapping) or not isinstance(d.get("type"), str):
        raise InvalidInput("a message dict needs a 'type' key")
    cls = _REGISTRY.get(d["type"])
    if cls is None:
        raise InvalidInput(f"unknown message type {d['type']!r}")
    return cls.from_dict({k: v for k, v in d.items() if k != "type"})


def _fmt_time(ts: float | None) -> str:
    if ts is None:
        return ""
    try:
        return datetime.fromtimestamp(ts, tz=UTC).strftime("%Y-%m-%d %H:%M")
    except (OverflowError, OSError, ValueError):
        return f"t={ts:.0f}"


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
            user_id, assistant_id, f"p{seq}", seq, query, response, timestamp,
            keywords=normalize_keywords(keywords),
        )

    def text(self) -> str:
        """The turn as prompt text: ``User: ...`` then ``Assistant: ...``."""
        return f"User: {self.query}\nAssistant: {self.response}"


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
        _text(self, "segment_id", nonempty=True)
        _text(self, "summary")
        _keywords(self, "keywords")
        _tuple_of(self, "page_ids", str)
        _number(self, "heat")
        _integer(self, "n_visit", minimum=0)
        _integer(self, "l_interaction", minimum=0)
        _timestamp(self, "last_access")
        _timestamp(self, "created")


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
        _text(self, "segment_id", nonempty=True)
        _text(self, "summary")
        _keywords(self, "keywords")
        _tuple_of(self, "pages", Page)
        _number(self, "heat")
        _integer(self, "n_visit", minimum=0)
        _integer(self, "l_interaction", minimum=0)
        _timestamp(self, "last_access")
        _timestamp(self, "created")

    def view(self) -> SegmentView:
        """The same segment as a :class:`SegmentView`."""
        return SegmentView(
            self.segment_id, self.summary, self.keywords,
            tuple(p.page_id for p in self.pages), self.heat, self.n_visit,
            self.l_interaction, self.last_access, self.created,
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
        # Imported here: the trait table imports this module.
        from memoryos_actors.tiers.traits import category_of

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
    """

    entry_id: str
    text: str
    timestamp: float
    source_segment: str | None = None

    def __post_init__(self) -> None:
        _text(self, "entry_id", nonempty=True)
        _text(self, "text", nonempty=True)
        _timestamp(self, "timestamp")
        _opt_text(self, "source_segment")


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
        return self.name is None and self.gender is None and self.birth_year is None \
            and not self.extras


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


# ---------------------------------------------------------------------------- tier answers


@_record
@dataclass(frozen=True, slots=True)
class SegmentHit(_Record):
    """A segment chosen by MTM retrieval, with its F_score against the query."""

    segment: SegmentView
    score: float
    why: str = ""

    def __post_init__(self) -> None:
        _instance(self, "segment", SegmentView)
        _number(self, "score")
        _text(self, "why")


@_record
@dataclass(frozen=True, slots=True)
class PageHit(_Record):
    """A page chosen by MTM retrieval.

    Attributes:
        page: the page.
        segment_id: the segment holding it (for an archived page: the segment it was
            evicted from, or ``"archive"`` when unknown).
        score: retrieval score (mode-dependent; higher is better).
        why: how the score was made, e.g. ``"segment s3 F=0.71; page cos=0.52"``.
        tier: ``"mtm"``, or ``"archive"`` for a page found in the cold tier.
    """

    page: Page
    segment_id: str
    score: float
    why: str = ""
    tier: str = "mtm"

    def __post_init__(self) -> None:
        _instance(self, "page", Page)
        _text(self, "segment_id", nonempty=True)
        _number(self, "score")
        _text(self, "why")
        _choice(self, "tier", ("mtm", "archive"))


@_record
@dataclass(frozen=True, slots=True)
class MTMHits(_Record):
    """MTM's answer to a query: chosen segments (best first) and pages (best first)."""

    mode: RetrievalMode
    segments: tuple[SegmentHit, ...] = ()
    pages: tuple[PageHit, ...] = ()

    def __post_init__(self) -> None:
        _choice(self, "mode", ("paper", "hybrid"))
        _tuple_of(self, "segments", SegmentHit)
        _tuple_of(self, "pages", PageHit)


@_record
@dataclass(frozen=True, slots=True)
class MTMEffects(_Record):
    """What an MTM insert or heat tick did, for the actor to act on.

    Attributes:
        segment_id: the segment the page went into (None for a tick).
        created: True when that segment was opened for this page.
        duplicate: True when the page had already been inserted (nothing changed).
        evicted_segments: segments removed for capacity, with their pages (for the archive).
        evicted_pages: pages pushed out of a full segment (for the archive).
        promoted: segments whose heat passed τ; their ``l_interaction`` is already reset.
        summary_due: segments whose pages changed and need a new summary.
    """

    segment_id: str | None = None
    created: bool = False
    duplicate: bool = False
    evicted_segments: tuple[SegmentRecord, ...] = ()
    evicted_pages: tuple[Page, ...] = ()
    promoted: tuple[SegmentRecord, ...] = ()
    summary_due: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        _opt_text(self, "segment_id", nonempty=True)
        _bool(self, "created")
        _bool(self, "duplicate")
        _tuple_of(self, "evicted_segments", SegmentRecord)
        _tuple_of(self, "evicted_pages", Page)
        _tuple_of(self, "promoted", SegmentRecord)
        _tuple_of(self, "summary_due", str)

    def is_empty(self) -> bool:
        """True when nothing needs the actor's attention."""
        return not (self.evicted_segments or self.evicted_pages or self.promoted
                    or self.summary_due)


@_record
@dataclass(frozen=True, slots=True)
class FactHit(_Record):
    """A knowledge-base fact or agent trait retrieved by cosine similarity.

    ``tier`` is ``"lpm"``, or ``"archive"`` for an entry found in the cold tier (it was
    pushed out of its FIFO earlier).
    """

    entry: KBEntry
    score: float
    tier: str = "lpm"

    def __post_init__(self) -> None:
        _instance(self, "entry", KBEntry)
        _number(self, "score")
        _choice(self, "tier", ("lpm", "archive"))


@_record
@dataclass(frozen=True, slots=True)
class LPMView(_Record):
    """LPM's answer to a query.

    Attributes:
        user_profile: the user's static profile.
        agent_profile: the assistant's persona.
        traits: user traits that have a level, in table order.
        kb: best knowledge-base facts, best first.
        agent_traits: best agent traits, best first.
    """

    user_profile: UserProfile = UserProfile()
    agent_profile: AgentProfile = AgentProfile()
    traits: tuple[TraitLevel, ...] = ()
    kb: tuple[FactHit, ...] = ()
    agent_traits: tuple[FactHit, ...] = ()

    def __post_init__(self) -> None:
        _instance(self, "user_profile", UserProfile)
        _instance(self, "agent_profile", AgentProfile)
        _tuple_of(self, "traits", TraitLevel)
        _tuple_of(self, "kb", FactHit)
        _tuple_of(self, "agent_traits", FactHit)


@_record
@dataclass(frozen=True, slots=True)
class LPMEffects(_Record):
    """What :meth:`LPMCore.apply` changed.

    Attributes:
        facts_added / agent_traits_added: new entries.
        facts_evicted / agent_traits_evicted: oldest entries pushed out of a full FIFO
            (for the archive; nothing is dropped silently).
        traits_changed: names of user traits whose level or evidence changed.
        unknown_traits: trait names in the update that are not among the 90 (ignored).
        duplicates: facts and agent traits skipped as exact duplicates.
    """

    facts_added: tuple[KBEntry, ...] = ()
    facts_evicted: tuple[KBEntry, ...] = ()
    agent_traits_added: tuple[KBEntry, ...] = ()
    agent_traits_evicted: tuple[KBEntry, ...] = ()
    traits_changed: tuple[str, ...] = ()
    unknown_traits: tuple[str, ...] = ()
    duplicates: int = 0

    def __post_init__(self) -> None:
        for name in ("facts_added", "facts_evicted", "agent_traits_added",
                     "agent_traits_evicted"):
            _tuple_of(self, name, KBEntry)
        _tuple_of(self, "traits_changed", str)
        _tuple_of(self, "unknown_traits", str)
        _integer(self, "duplicates", minimum=0)


def _bool(obj: Any, name: str) -> None:
    if not isinstance(getattr(obj, name), bool):
        raise _fail(type(obj).__name__, name, "must be a bool", getattr(obj, name))


def _instance(obj: Any, name: str, kind: type) -> None:
    if not isinstance(getattr(obj, name), kind):
        raise _fail(type(obj).__name__, name, f"must be a {kind.__name__}", getattr(obj, name))


# ---------------------------------------------------------------------------- context


@_record
@dataclass(frozen=True, slots=True)
class ContextItem(_Record):
    """One piece of retrieved memory with its provenance.

    Attributes:
        tier: ``"stm"``, ``"mtm"``, ``"lpm"``, or ``"archive"`` (the cold tier: items that
            left the hot tiers and were found again in the per-user archive).
        kind: ``"page"``, ``"segment"``, ``"fact"`` or ``"agent_trait"``.
        item_id: page id, segment id or KB entry id.
        text: the content as prompt text.
        score: relevance (1.0 for STM pages, which are always included).
        segment_id: for MTM pages, their segment.
        timestamp: when the item was written, seconds since the epoch.
        why: how it was chosen.
    """

    tier: Tier
    kind: str
    item_id: str
    text: str
    score: float
    segment_id: str | None = None
    timestamp: float | None = None
    why: str = ""

    def __post_init__(self) -> None:
        _choice(self, "tier", TIERS)
        _text(self, "kind", nonempty=True)
        _text(self, "item_id", nonempty=True)
        _text(self, "text")
        _number(self, "score")
        _opt_text(self, "segment_id", nonempty=True)
        _timestamp(self, "timestamp", optional=True)
        _text(self, "why")


@_record
@dataclass(frozen=True, slots=True)
class MemoryContext(_Record):
    """Everything retrieved for one query, ready to render into a prompt.

    Attributes:
        user_id, assistant_id: whose memory.
        query: the query retrieved for.
        stm: recent pages, oldest first (kind ``"page"``).
        mtm: relevant past pages, best first (kind ``"page"``): MTM pages and archived
            pages (``tier="archive"``) ranked together under one scorer.
        segments: the segments those pages came from, best first (kind ``"segment"``).
        lpm_profile: the user's static profile.
        traits: user traits that have a level.
        kb: relevant user facts, best first (kind ``"fact"``).
        agent_traits: relevant assistant traits, best first (kind ``"agent_trait"``).
        elapsed_ms: time retrieval took, milliseconds.
        agent_profile: the assistant's persona.
        dialogue_chain: the running summary of the current dialogue chain (the meta chain
            of the newest STM page that has one; ``""`` when none is known yet).
    """

    user_id: str
    assistant_id: str
    query: str
    stm: tuple[ContextItem, ...] = ()
    mtm: tuple[ContextItem, ...] = ()
    segments: tuple[ContextItem, ...] = ()
    lpm_profile: UserProfile = UserProfile()
    traits: tuple[TraitLevel, ...] = ()
    kb: tuple[ContextItem, ...] = ()
    agent_traits: tuple[ContextItem, ...] = ()
    elapsed_ms: float = 0.0
    agent_profile: AgentProfile = AgentProfile()
    dialogue_chain: str = ""

    def __post_init__(self) -> None:
        _text(self, "user_id", nonempty=True)
        _text(self, "assistant_id", nonempty=True)
        _text(self, "query")
        _text(self, "dialogue_chain")
        for name in ("stm", "mtm", "segments", "kb", "agent_traits"):
            _tuple_of(self, name, ContextItem)
        _instance(self, "lpm_profile", UserProfile)
        _tuple_of(self, "traits", TraitLevel)
        _number(self, "elapsed_ms", minimum=0.0)
        _instance(self, "agent_profile", AgentProfile)

    def page_ids(self) -> tuple[str, ...]:
        """Ids of every page in the context: MTM pages best first, then STM newest first."""
        seen: set[str] = set()
        out: list[str] = []
        for item in (*self.mtm, *reversed(self.stm)):
            if item.kind == "page" and item.item_id not in seen:
                seen.add(item.item_id)
                out.append(item.item_id)
        return tuple(out)

    def is_empty(self) -> bool:
        """True when nothing at all was retrieved."""
        return not (self.stm or self.mtm or self.segments or self.traits or self.kb
                    or self.agent_traits) and self.lpm_profile.is_empty() \
            and self.agent_profile.is_empty()

    def render(self) -> str:
        """Prompt text in sections; empty sections are left out.

        Sections, in order: the current dialogue chain's summary, recent dialogue (STM,
        oldest first), relevant past (MTM segments with their summaries and pages), user
        profile and traits (only traits with a level), known facts (KB), assistant persona
        (profile and agent traits).
        """
        sections: list[str] = []
        if self.dialogue_chain.strip():
            sections.append(f"## Current conversation thread (summary)\n{self.dialogue_chain.strip()}")
        if self.stm:
            lines = ["## Recent dialogue"]
            for item in self.stm:
                lines.append(_stamped(item))
            sections.append("\n".join(lines))
        past = self._render_past()
        if past:
            sections.append(past)
        profile = self._render_profile()
        if profile:
            sections.append(profile)
        if self.kb:
            lines = ["## Known facts about the user"]
            lines.extend(f"- {item.text}" for item in self.kb)
            sections.append("\n".join(lines))
        persona = self._render_persona()
        if persona:
            sections.append(persona)
        return "\n\n".join(sections)

    def _render_past(self) -> str:
        if not self.mtm and not self.segments:
            return ""
        lines = ["## Relevant past conversations"]
        by_segment: dict[str | None, list[ContextItem]] = {}
        for item in self.mtm:
            by_segment.setdefault(item.segment_id, []).append(item)
        shown: set[str | None] = set()
        for seg in self.segments:
            shown.add(seg.item_id)
            topic = seg.text.strip() or "(no summary yet)"
            lines.append(f"### Topic: {topic}")
            for item in sorted(by_segment.get(seg.item_id, []), key=_chronological):
                lines.append(_stamped(item))
        rest = [i for sid, items in by_segment.items() if sid not in shown for i in items]
        if rest:
            lines.append("### Other related turns")
            lines.extend(_stamped(item) for item in sorted(rest, key=_chronological))
        return "\n".join(lines)

    def _render_profile(self) -> str:
        p = self.lpm_profile
        lines: list[str] = []
        if p.name is not None:
            lines.append(f"Name: {p.name}")
        if p.gender is not None:
            lines.append(f"Gender: {p.gender}")
        if p.birth_year is not None:
            lines.append(f"Birth year: {p.birth_year}")
        lines.extend(f"{k}: {v}" for k, v in p.extras)
        known = [t for t in self.traits if t.level is not None]
        if known:
            lines.append("Traits:")
            for t in known:
                label = t.name.replace("_", " ")
                evidence = f" ({t.evidence})" if t.evidence else ""
                lines.append(f"- {label}: {t.level}{evidence}")
        if not lines:
            return ""
        return "\n".join(["## User profile", *lines])

    def _render_persona(self) -> str:
        a = self.agent_profile
        lines: list[str] = []
        if a.role:
            lines.append(f"Role: {a.role}")
        if a.character:
            lines.append(f"Character: {a.character}")
        lines.extend(f"{k}: {v}" for k, v in a.extras)
        if self.agent_traits:
            lines.append("Traits:")
            lines.extend(f"- {item.text}" for item in self.agent_traits)
        if not lines:
            return ""
        return "\n".join(["## Assistant persona", *lines])


def _chronological(item: ContextItem) -> tuple[float, str]:
    return (item.timestamp if item.timestamp is not None else 0.0, item.item_id)


def _stamped(item: ContextItem) -> str:
    when = _fmt_time(item.timestamp)
    return f"[{when}] {item.text}" if when else item.text


# ---------------------------------------------------------------------------- requests


@_record
@dataclass(frozen=True, slots=True)
class AddTurn(_Record):
    """Request: store one dialogue turn for ``user_id``.

    ``timestamp`` is the turn's time in seconds since the epoch. At least one of ``query``
    and ``response`` must contain non-blank text. ``turn_key`` makes the request
    idempotent: STM answers a repeated key with the page it already stored.
    """

    user_id: str
    assistant_id: str
    query: str
    response: str
    timestamp: float
    turn_key: str = ""

    def __post_init__(self) -> None:
        _text(self, "user_id", nonempty=True)
        _text(self, "assistant_id", nonempty=True)
        _text(self, "query")
        _text(self, "response")
        _text(self, "turn_key")
        if not self.query.strip() and not self.response.strip():
            raise InvalidInput("AddTurn needs a non-blank query or response")
        _timestamp(self, "timestamp")


@_record
@dataclass(frozen=True, slots=True)
class Retrieve(_Record):
    """Request: retrieve memory relevant to ``query`` at ``timestamp`` (seconds)."""

    user_id: str
    assistant_id: str
    query: str
    timestamp: float

    def __post_init__(self) -> None:
        _text(self, "user_id", nonempty=True)
        _text(self, "assistant_id", nonempty=True)
        _text(self, "query")
        _timestamp(self, "timestamp")


@_record
@dataclass(frozen=True, slots=True)
class SetUserProfile(_Record):
    """Request: replace the user's static profile."""

    user_id: str
    profile: UserProfile

    def __post_init__(self) -> None:
        _text(self, "user_id", nonempty=True)
        _instance(self, "profile", UserProfile)


@_record
@dataclass(frozen=True, slots=True)
class SetAgentProfile(_Record):
    """Request: replace the persona of ``assistant_id`` as seen by ``user_id``."""

    user_id: str
    assistant_id: str
    profile: AgentProfile

    def __post_init__(self) -> None:
        _text(self, "user_id", nonempty=True)
        _text(self, "assistant_id", nonempty=True)
        _instance(self, "profile", AgentProfile)


@_record
@dataclass(frozen=True, slots=True)
class SetPageMeta(_Record):
    """Request: fill in a page's dialogue-chain meta (computed asynchronously by the LLM)."""

    user_id: str
    page_id: str
    meta_chain: str
    chain_id: str
    keywords: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        _text(self, "user_id", nonempty=True)
        _text(self, "page_id", nonempty=True)
        _text(self, "meta_chain")
        _text(self, "chain_id")
        _keywords(self, "keywords")


@_record
@dataclass(frozen=True, slots=True)
class SetSegmentSummary(_Record):
    """Request: store a new LLM summary and keywords for an MTM segment."""

    user_id: str
    segment_id: str
    summary: str
    keywords: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        _text(self, "user_id", nonempty=True)
        _text(self, "segment_id", nonempty=True)
        _text(self, "summary")
        _keywords(self, "keywords")


@_record
@dataclass(frozen=True, slots=True)
class HeatTick(_Record):
    """Request: recompute heat at ``now`` (seconds), promote and evict as needed."""

    now: float

    def __post_init__(self) -> None:
        _timestamp(self, "now")

