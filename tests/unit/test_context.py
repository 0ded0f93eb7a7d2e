from __future__ import annotations

import numpy as np
from strategies import basis_vector

from memoryos_actors.clock import ManualClock
from memoryos_actors.config import MemoryConfig
from memoryos_actors.messages import (
    AgentProfile,
    FactHit,
    KBEntry,
    LPMView,
    MTMHits,
    Page,
    PageHit,
    PersonaUpdate,
    SegmentHit,
    SegmentView,
    TraitLevel,
    UserProfile,
)
from memoryos_actors.tiers.context import build_context
from memoryos_actors.tiers.lpm import LPMCore
from memoryos_actors.tiers.mtm import MTMCore
from memoryos_actors.tiers.stm import STMCore


def _page(seq: int, q: str = "", r: str = "") -> Page:
    return Page.create("u", seq, q or f"q{seq}", r or f"r{seq}", 100.0 * seq)


def _view(sid: str, summary: str = "") -> SegmentView:
    return SegmentView(sid, summary, frozenset(), (), 1.0, 1, 1, 0.0, 0.0)


def test_stm_pages_come_first_in_time_order_with_full_score() -> None:
    ctx = build_context("u", "a", "q", [_page(3), _page(2)])
    assert [i.item_id for i in ctx.stm] == ["p2", "p3"]
    assert all(i.tier == "stm" and i.kind == "page" and i.score == 1.0 for i in ctx.stm)
    assert ctx.stm[0].text == "User: q2\nAssistant: r2" and ctx.stm[0].timestamp == 200.0


def test_mtm_pages_keep_order_score_and_provenance_without_duplicates() -> None:
    hits = MTMHits(
        "paper",
        (
            SegmentHit(_view("s1", "Rome trip"), 1.4, "segment s1 F=1.40"),
            SegmentHit(_view("s2"), 0.9),
            SegmentHit(_view("s3"), 0.8),
        ),
        (
            PageHit(_page(1), "s1", 0.9, "segment s1 F=1.40; page cos=0.90"),
            PageHit(_page(5), "s1", 0.8, "dup of STM"),
            PageHit(_page(1), "s1", 0.7, "dup"),
            PageHit(_page(2), "s2", 0.6, "segment s2 F=0.90; page cos=0.60"),
        ),
    )
    ctx = build_context("u", "a", "q", [_page(5)], hits)
    assert [(i.item_id, i.score, i.segment_id) for i in ctx.mtm] == [
        ("p1", 0.9, "s1"),
        ("p2", 0.6, "s2"),
    ]
    assert ctx.mtm[0].why == "segment s1 F=1.40; page cos=0.90" and ctx.mtm[0].tier == "mtm"
    # s3 supplied no page and has no summary: left out.
    assert [(s.item_id, s.text) for s in ctx.segments] == [("s1", "Rome trip"), ("s2", "")]
    assert ctx.page_ids() == ("p1", "p2", "p5")


def test_lpm_view_becomes_profile_traits_facts_and_persona() -> None:
    view = LPMView(
        UserProfile(name="Ada"),
        AgentProfile(role="guide"),
        (
            TraitLevel("music", "content_interests", "high"),
            TraitLevel("travel", "content_interests", None),
        ),
        (FactHit(KBEntry("f1", "Ada is vegetarian", 5.0, "s1"), 0.75),),
        (FactHit(KBEntry("a1", "answers briefly", 6.0), 0.5),),
    )
    ctx = build_context("u", "a", "q", lpm_view=view, elapsed_ms=3.5)
    assert ctx.lpm_profile.name == "Ada" and ctx.agent_profile.role == "guide"
    assert [t.name for t in ctx.traits] == ["music"]
    fact = ctx.kb[0]
    assert (fact.tier, fact.kind, fact.item_id, fact.score, fact.segment_id) == (
        "lpm",
        "fact",
        "f1",
        0.75,
        "s1",
    )
    assert fact.why == "fact cos=0.75"
    assert ctx.agent_traits[0].kind == "agent_trait" and ctx.elapsed_ms == 3.5


def test_nothing_retrieved_gives_an_empty_context() -> None:
    ctx = build_context("u", "a", "hello")
    assert ctx.is_empty() and ctx.render() == "" and ctx.page_ids() == ()


def test_context_from_real_tiers_renders_the_relevant_past_and_persona() -> None:
    cfg = MemoryConfig(stm_capacity=2, fscore_threshold=0.5)
    clock = ManualClock(0.0)
    stm, mtm, lpm = STMCore(2), MTMCore(cfg, 4, clock), LPMCore(cfg, clock=clock)
    embs = {
        1: basis_vector(4, 0),
        2: basis_vector(4, 0),
        3: basis_vector(4, 1),
        4: basis_vector(4, 2),
        5: basis_vector(4, 3),
    }
    texts = {
        1: "I'm planning a trip to Rome",
        2: "Which museums in Rome?",
        3: "My cat is ill",
        4: "Recipe for soup",
        5: "Thanks",
    }
    for seq in range(1, 6):
        out = stm.push(
            Page.create(
                "u", seq, texts[seq], "ok", float(seq), keywords={"rome"} if seq < 3 else set()
            )
        )
        if out is not None:
            mtm.insert(out, embs[out.seq])
    mtm.set_summary("s1", "Planning a Rome trip", ["rome"])
    lpm.apply(PersonaUpdate("u", "default", facts=("Ada loves art",)), basis_vector(4, 0)[None])
    q = basis_vector(4, 0)
    ctx = build_context(
        "u",
        "default",
        "rome?",
        stm.pages(),
        mtm.search(q, {"rome"}, top_m=1, top_k=2, mode="paper"),
        lpm.search(q),
    )
    text = ctx.render()
    assert "### Topic: Planning a Rome trip" in text
    assert "User: I'm planning a trip to Rome" in text and "Which museums" in text
    assert "- Ada loves art" in text
    assert ctx.page_ids()[:2] in (("p2", "p1"), ("p1", "p2"))
    assert ctx.page_ids()[2:] == ("p5", "p4")
    assert np.isclose(ctx.kb[0].score, 1.0)
