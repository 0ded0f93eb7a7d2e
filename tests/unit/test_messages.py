from __future__ import annotations

import dataclasses
import math
import pickle

import msgpack
import pytest
import strategies as S
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memoryos_actors.errors import InvalidInput
from memoryos_actors.messages import (
    AddTurn,
    AgentProfile,
    ContextItem,
    KBEntry,
    MemoryContext,
    Page,
    PersonaUpdate,
    Retrieve,
    SegmentView,
    SetAgentProfile,
    SetUserProfile,
    TraitLevel,
    UserProfile,
)

ALL_RECORDS = st.one_of(
    S.pages(),
    S.segment_views(),
    S.segment_records(),
    S.trait_levels,
    S.kb_entries,
    S.user_profiles,
    S.agent_profiles,
    S.persona_updates,
    S.context_items,
    S.memory_contexts,
    S.mtm_hits,
    S.mtm_effects,
    S.lpm_views,
    S.add_turns,
    S.retrieves,
    S.user_profiles.map(lambda p: SetUserProfile("u", p)),
    S.agent_profiles.map(lambda p: SetAgentProfile("u", "a", p)),
)


def _msgpack_round_trip(d: dict) -> dict:
    return msgpack.unpackb(msgpack.packb(d, use_bin_type=True), raw=False)


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(ALL_RECORDS)
def test_every_record_round_trips_through_msgpack_and_pickle(record) -> None:
    cls = type(record)
    assert cls.from_dict(_msgpack_round_trip(record.to_dict())) == record
    assert pickle.loads(pickle.dumps(record)) == record


@settings(max_examples=50, suppress_health_check=[HealthCheck.too_slow])
@given(S.memory_contexts)
def test_rendering_any_context_gives_text(ctx: MemoryContext) -> None:
    assert isinstance(ctx.render(), str)


def test_records_are_frozen_and_hashable() -> None:
    p = Page.create("u", 1, "q", "r", 1.0, keywords=["a"])
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.query = "x"  # type: ignore[misc]
    assert hash(p) == hash(Page.create("u", 1, "q", "r", 1.0, keywords=["A "]))


def test_lists_become_tuples_and_keywords_are_normalised() -> None:
    view = SegmentView("s1", "", ["Rome", " travel ", ""], ["p1", "p2"], 1.0, 0, 2, 1.0, 1.0)
    assert view.page_ids == ("p1", "p2")
    assert view.keywords == frozenset({"rome", "travel"})
    upd = PersonaUpdate("u", "a", [], ["likes tea"], [])
    assert upd.facts == ("likes tea",) and isinstance(upd.traits, tuple)


@pytest.mark.parametrize("ts", [math.nan, math.inf, -math.inf, -1.0, "1", True, None])
def test_page_rejects_bad_timestamps(ts) -> None:
    with pytest.raises(InvalidInput, match="timestamp"):
        Page("u", "a", "p1", 1, "q", "r", ts)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"user_id": ""}, "user_id"),
        ({"user_id": 3}, "user_id"),
        ({"assistant_id": " "}, "assistant_id"),
        ({"seq": 0}, "seq"),
        ({"seq": True}, "seq"),
        ({"page_id": "p2"}, "page_id"),
        ({"query": b"bytes"}, "query"),
        ({"query": "bad \ud800 surrogate"}, "query"),
        ({"keywords": "travel"}, "keywords"),
        ({"keywords": frozenset({1})}, "keywords"),
    ],
)
def test_page_rejects_invalid_fields_naming_them(kwargs, field) -> None:
    args = {
        "user_id": "u",
        "assistant_id": "a",
        "page_id": "p1",
        "seq": 1,
        "query": "q",
        "response": "r",
        "timestamp": 1.0,
    }
    args.update(kwargs)
    with pytest.raises(InvalidInput, match=field):
        Page(**args)


def test_other_records_validate_their_enums_and_ranges() -> None:
    with pytest.raises(InvalidInput, match="level"):
        TraitLevel("openness", "basic_needs_personality", "extreme")
    with pytest.raises(InvalidInput, match="category"):
        TraitLevel("openness", "hobbies", "high")
    with pytest.raises(InvalidInput, match="birth_year"):
        UserProfile(birth_year=0)
    with pytest.raises(InvalidInput, match="extras"):
        AgentProfile(extras=(("k", "1"), ("k", "2")))
    with pytest.raises(InvalidInput, match="tier"):
        ContextItem("ltm", "page", "p1", "t", 1.0)
    with pytest.raises(InvalidInput, match="score"):
        ContextItem("stm", "page", "p1", "t", math.nan)
    with pytest.raises(InvalidInput, match="text"):
        KBEntry("f1", "   ", 1.0)
    with pytest.raises(InvalidInput, match="elapsed_ms"):
        MemoryContext("u", "a", "q", elapsed_ms=-1.0)
    with pytest.raises(InvalidInput, match="non-blank"):
        AddTurn("u", "a", " ", "", 1.0)
    with pytest.raises(InvalidInput, match="timestamp"):
        Retrieve("u", "a", "q", math.nan)
    with pytest.raises(InvalidInput, match="profile"):
        SetUserProfile("u", AgentProfile())  # type: ignore[arg-type]


def test_from_dict_rejects_unknown_keys_and_missing_fields() -> None:
    d = Page.create("u", 1, "q", "r", 1.0).to_dict()
    with pytest.raises(InvalidInput, match="unknown"):
        Page.from_dict({**d, "colour": "red"})
    del d["query"]
    with pytest.raises(InvalidInput, match="query"):
        Page.from_dict(d)


def _ctx() -> MemoryContext:
    def page(tier: str, n: int, score: float, seg: str | None = None) -> ContextItem:
        return ContextItem(
            tier,
            "page",
            f"p{n}",
            f"User: q{n}\nAssistant: r{n}",
            score,
            segment_id=seg,
            timestamp=86400.0 * n,
            why="w",
        )

    return MemoryContext(
        user_id="u",
        assistant_id="a",
        query="what about rome?",
        stm=(page("stm", 8, 1.0), page("stm", 9, 1.0)),
        mtm=(page("mtm", 3, 0.9, "s2"), page("mtm", 1, 0.5, "s1"), page("mtm", 2, 0.4, "s2")),
        segments=(ContextItem("mtm", "segment", "s2", "Trip to Rome", 1.2, segment_id="s2"),),
        lpm_profile=UserProfile(name="Ada", birth_year=1990, extras=(("city", "Turin"),)),
        traits=(
            TraitLevel("openness", "basic_needs_personality", "high", "loves new places"),
            TraitLevel("patience", "basic_needs_personality", None),
        ),
        kb=(ContextItem("lpm", "fact", "f1", "Ada is vegetarian", 0.7),),
        agent_traits=(ContextItem("lpm", "agent_trait", "a1", "answers briefly", 0.3),),
        agent_profile=AgentProfile(role="travel planner", character="warm"),
    )


def test_render_has_sections_in_order_and_groups_pages_under_their_topic() -> None:
    text = _ctx().render()
    heads = [
        "## Recent dialogue",
        "## Relevant past conversations",
        "## User profile",
        "## Known facts about the user",
        "## Assistant persona",
    ]
    positions = [text.index(h) for h in heads]
    assert positions == sorted(positions)
    assert "### Topic: Trip to Rome" in text
    # Pages of s2 are under the topic in time order; the s1 page is listed separately.
    assert (
        text.index("q2")
        < text.index("q3")
        < text.index("### Other related turns")
        < text.index("q1")
    )
    assert "[1970-01-03 00:00] User: q2" in text
    assert "Name: Ada" in text and "city: Turin" in text and "Birth year: 1990" in text
    assert "- openness: high (loves new places)" in text
    assert "patience" not in text  # traits without a level are not shown
    assert "- Ada is vegetarian" in text and "Role: travel planner" in text
    assert "- answers briefly" in text


def test_render_leaves_out_empty_sections_and_an_empty_context_renders_nothing() -> None:
    assert MemoryContext("u", "a", "q").render() == ""
    only_stm = dataclasses.replace(
        _ctx(),
        mtm=(),
        segments=(),
        kb=(),
        agent_traits=(),
        traits=(),
        lpm_profile=UserProfile(),
        agent_profile=AgentProfile(),
    )
    assert only_stm.render().startswith("## Recent dialogue")
    assert "##" not in only_stm.render().split("\n", 1)[1]


def test_page_ids_lists_mtm_best_first_then_stm_newest_first() -> None:
    assert _ctx().page_ids() == ("p3", "p1", "p2", "p9", "p8")
