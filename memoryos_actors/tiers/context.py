"""Pure merge of the three tiers' answers into one :class:`MemoryContext`.

The retrieval actor fans a query out to STM, MTM and LPM in parallel and hands their answers
to :func:`build_context`; everything here is deterministic and free of I/O.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import cast

from memoryos_actors.errors import InvalidInput
from memoryos_actors.messages import (
    ContextItem,
    FactHit,
    LPMView,
    MemoryContext,
    MTMHits,
    Page,
)
from memoryos_actors.records import Tier

__all__ = ["build_context"]


def _tier(tier: str) -> Tier:
    # A hit's tier is a plain str field, but hits check it against their tiers when built.
    return cast(Tier, tier)


def _fact_items(hits: Iterable[FactHit], kind: str) -> tuple[ContextItem, ...]:
    return tuple(
        ContextItem(
            _tier(h.tier),
            kind,
            h.entry.entry_id,
            h.entry.text,
            h.score,
            segment_id=_segment_or_none(h.entry.source_segment),
            timestamp=h.entry.timestamp,
            why=f"{kind.replace('_', ' ')} cos={h.score:.2f}"
            + (" (archive: pushed out of the FIFO earlier)" if h.tier == "archive" else ""),
        )
        for h in hits
    )


def _segment_or_none(value: str | None) -> str | None:
    return value if value else None


def build_context(
    user_id: str,
    assistant_id: str,
    query: str,
    stm_pages: Iterable[Page] = (),
    mtm_hits: MTMHits | None = None,
    lpm_view: LPMView | None = None,
    *,
    elapsed_ms: float = 0.0,
) -> MemoryContext:
    """Merge STM pages, MTM hits and an LPM view into a :class:`MemoryContext`.

    * STM pages are all included, oldest first, with score 1.0.
    * MTM pages keep their order (best first), score and ``why``; a page that is also in
      STM (possible while a page is moving between tiers) appears only under STM, and a
      page is never listed twice.
    * MTM segments are kept (best first) if they supplied a page or have a summary; their
      item text is the summary.
    * From LPM: the user and agent profiles, the traits that have a level, and the facts
      and agent traits in their order, each with its cosine as score.

    Args:
        user_id, assistant_id: whose memory.
        query: the query retrieved for.
        stm_pages: the STM pages.
        mtm_hits: MTM's answer, if MTM was asked.
        lpm_view: LPM's answer, if LPM was asked.
        elapsed_ms: how long retrieval took, milliseconds.
    """
    pages = list(stm_pages)
    for p in pages:
        if not isinstance(p, Page):
            raise InvalidInput(f"stm_pages must hold Page objects, got {type(p).__name__}")
    stm_items = tuple(
        ContextItem(
            "stm",
            "page",
            p.page_id,
            p.text(),
            1.0,
            timestamp=p.timestamp,
            why="recent dialogue (STM)",
        )
        for p in sorted({p.page_id: p for p in pages}.values(), key=lambda p: p.seq)
    )
    seen = {item.item_id for item in stm_items}

    mtm_items: list[ContextItem] = []
    segment_items: list[ContextItem] = []
    if mtm_hits is not None:
        for hit in mtm_hits.pages:
            if hit.page.page_id in seen:
                continue
            seen.add(hit.page.page_id)
            mtm_items.append(
                ContextItem(
                    _tier(hit.tier),
                    "page",
                    hit.page.page_id,
                    hit.page.text(),
                    hit.score,
                    segment_id=hit.segment_id,
                    timestamp=hit.page.timestamp,
                    why=hit.why,
                )
            )
        used = {item.segment_id for item in mtm_items if item.tier == "mtm"}
        for seg_hit in mtm_hits.segments:
            seg = seg_hit.segment
            if seg.segment_id in used or seg.summary.strip():
                segment_items.append(
                    ContextItem(
                        "mtm",
                        "segment",
                        seg.segment_id,
                        seg.summary,
                        seg_hit.score,
                        segment_id=seg.segment_id,
                        timestamp=seg.last_access,
                        why=seg_hit.why or f"segment {seg.segment_id} F={seg_hit.score:.2f}",
                    )
                )

    view = lpm_view if lpm_view is not None else LPMView()
    chain = next((p.meta_chain for p in sorted(pages, key=lambda p: -p.seq) if p.meta_chain), "")
    return MemoryContext(
        user_id=user_id,
        assistant_id=assistant_id,
        query=query,
        stm=stm_items,
        mtm=tuple(mtm_items),
        segments=tuple(segment_items),
        lpm_profile=view.user_profile,
        traits=tuple(t for t in view.traits if t.level is not None),
        kb=_fact_items(view.kb, "fact"),
        agent_traits=_fact_items(view.agent_traits, "agent_trait"),
        elapsed_ms=elapsed_ms,
        agent_profile=view.agent_profile,
        dialogue_chain=chain,
    )
