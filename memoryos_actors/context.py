"""What retrieval returns: :class:`ContextItem` (one piece of memory with its provenance) and
:class:`MemoryContext` (everything retrieved for a query, rendered as prompt text).
"""

from __future__ import annotations

from dataclasses import dataclass

from memoryos_actors.record_base import (
    _choice,
    _fmt_time,
    _instance,
    _number,
    _opt_text,
    _Record,
    _record,
    _text,
    _timestamp,
    _tuple_of,
)
from memoryos_actors.records import (
    TIERS,
    AgentProfile,
    Tier,
    TraitLevel,
    UserProfile,
)

__all__ = ["ContextItem", "MemoryContext"]


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
        return (
            not (
                self.stm or self.mtm or self.segments or self.traits or self.kb or self.agent_traits
            )
            and self.lpm_profile.is_empty()
            and self.agent_profile.is_empty()
        )

    def render(self) -> str:
        """Prompt text in sections; empty sections are left out.

        Sections, in order: the current dialogue chain's summary, recent dialogue (STM,
        oldest first), relevant past (MTM segments with their summaries and pages), user
        profile and traits (only traits with a level), known facts (KB), assistant persona
        (profile and agent traits).
        """
        sections: list[str] = []
        if self.dialogue_chain.strip():
            sections.append(
                f"## Current conversation thread (summary)\n{self.dialogue_chain.strip()}"
            )
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
