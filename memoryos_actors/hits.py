"""What the tier cores answer: search hits and views (:class:`MTMHits`, :class:`LPMView`) and the
effects of a change (:class:`MTMEffects`, :class:`LPMEffects`). Records like those of
:mod:`memoryos_actors.records`, with the same validation and dict codec.
"""

from __future__ import annotations

from dataclasses import dataclass

from memoryos_actors.record_base import (
    _bool,
    _choice,
    _instance,
    _integer,
    _number,
    _opt_text,
    _Record,
    _record,
    _text,
    _tuple_of,
)
from memoryos_actors.records import (
    AgentProfile,
    KBEntry,
    Page,
    RetrievalMode,
    SegmentRecord,
    SegmentView,
    TraitLevel,
    UserProfile,
)

__all__ = ["FactHit", "LPMEffects", "LPMView", "MTMEffects", "MTMHits", "PageHit", "SegmentHit"]


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
        return not (
            self.evicted_segments or self.evicted_pages or self.promoted or self.summary_due
        )


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
        for name in ("facts_added", "facts_evicted", "agent_traits_added", "agent_traits_evicted"):
            _tuple_of(self, name, KBEntry)
        _tuple_of(self, "traits_changed", str)
        _tuple_of(self, "unknown_traits", str)
        _integer(self, "duplicates", minimum=0)
