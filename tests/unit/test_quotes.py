"""What quotes a deleted page (#41 item 5): the quote test, and what the LPM core finds and
undoes with it (facts, agent traits, a trait's value and the changes of its history)."""

from __future__ import annotations

import numpy as np
import pytest

from memoryos_actors.clock import ManualClock
from memoryos_actors.config import MemoryConfig
from memoryos_actors.messages import PersonaUpdate, TraitLevel
from memoryos_actors.tiers.lpm import LPMCore
from memoryos_actors.tiers.quotes import Deletion, content_terms, source_segments

DELETED = "I love hiking in the Dolomites with my sister Quillonby.\nThe Dolomites are lovely."
KEPT = {
    "s1": ["I love hiking near glacier lakes too.\nLakes are lovely."],
    "s2": ["My sister and I hike every summer.\nNice."],
}


def _deletion(pages=(("s1", DELETED),)) -> Deletion:
    asked: list[str] = []

    def kept(segment_id: str) -> list[str]:
        asked.append(segment_id)
        return KEPT.get(segment_id, [])

    d = Deletion(pages, kept)
    d.asked = asked  # type: ignore[attr-defined]
    return d


def test_sources_name_the_segments_an_update_read() -> None:
    assert source_segments("s3") == {"s3"}
    assert source_segments("s1+s2+s10") == {"s1", "s2", "s10"}
    assert source_segments(None) == source_segments("") == source_segments("edit") == set()
    assert source_segments("alice/s3") == set()  # another user's segment (a shared persona)


def test_the_persona_words_are_no_evidence() -> None:
    assert content_terms("User's sister is called Quillonby.") == content_terms(
        "sister called Quillonby"
    )


@pytest.mark.parametrize(
    ("text", "source", "quotes"),
    [
        # What only the deleted page said, learned from its segment.
        ("User loves hiking in the Dolomites with their sister Quillonby.", "s1", True),
        ("User has a sister.", "s1", True),  # no page left in s1 says "sister"
        # Said by a page the segment keeps as well.
        ("User loves hiking near glacier lakes.", "s1", False),
        ("User loves hiking.", "s1", False),
        # An update that read s1 and s2: s2 keeps a page about the sister.
        ("User has a sister.", "s1+s2", False),
        ("User has a sister called Quillonby.", "s1+s2", True),
        # Learned from another segment: shared words are no quote...
        ("User has a sister.", "s2", False),
        ("User has a sister called Quillonby.", "s7", False),
        # ... but a run of its words is, whatever the source (or none known).
        ("Hiking in the Dolomites with my sister Quillonby", "s7", True),
        ("Hiking in the Dolomites with my sister Quillonby", None, True),
        ("Dolomites sister Quillonby", None, True),  # three words: all of them
        ("Sister Quillonby", None, False),  # two words are no run
        ("", "s1", False),
    ],
)
def test_a_derived_text_quotes_a_deleted_page(text: str, source: str | None, quotes: bool) -> None:
    assert _deletion().quotes(text, source) is quotes


def test_pages_kept_are_read_only_for_the_segments_a_candidate_names() -> None:
    d = _deletion()
    d.quotes("User has a sister.", "s1+s2")
    d.quotes("User has a brother.", "s9")  # no deleted page there: nothing read
    d.quotes("User has a sister.", "s1")
    assert d.asked == ["s1", "s2"]  # type: ignore[attr-defined]


def test_a_page_in_no_segment_yet_is_found_by_its_runs_only() -> None:
    d = _deletion((("", DELETED),))
    assert d.segments == frozenset()
    assert not d.quotes("User has a sister.", "s1")
    assert d.quotes("User loves hiking in the Dolomites with their sister.", "s1")


# ----------------------------------------------------------------- the LPM core


def _core() -> LPMCore:
    return LPMCore(MemoryConfig(), clock=ManualClock(500.0))


def _learn(core: LPMCore, segment: str, facts=(), traits=(), now: float = 1.0) -> None:
    embs = np.eye(len(facts), 8, dtype=np.float32) if facts else None
    core.apply(
        PersonaUpdate(
            "u",
            "default",
            traits=tuple(TraitLevel.known(n, lv, ev) for n, lv, ev in traits),
            facts=tuple(facts),
            source_segment=segment,
        ),
        embs,
        now=now,
    )


def test_the_core_finds_facts_and_traits_that_quote_and_undoes_them_as_replayed() -> None:
    core = _core()
    _learn(core, "s0", traits=[("travel", "low", "I rarely leave my town.")], now=1.0)
    _learn(
        core,
        "s1",
        facts=["User's sister is Quillonby.", "User loves hiking."],
        traits=[
            ("travel", "high", "I love hiking in the Dolomites with my sister Quillonby."),
            ("parenting_and_family", "medium", "I love hiking in the Dolomites with my sister."),
        ],
        now=2.0,
    )
    # Another segment names her too, in words of its own: no quote.
    _learn(
        core, "s5", traits=[("pets_and_animals", "high", "Quillonby's cat sleeps a lot")], now=3.0
    )
    core.set_trait("sense_of_humor", "high", "set by hand", now=4.0)
    d = _deletion()
    found = core.quoting(d.quotes)
    assert sorted(found) == [
        ("fact:f1", "delete", ()),
        ("trait:parenting_and_family", "revert", (0,)),
        ("trait:travel", "revert", (1,)),
    ]
    assert core.quoting(d.quotes, skip={"fact:f1"}) == [e for e in found if e[0] != "fact:f1"]
    for mid, action, at in found:
        kind, _, key = mid.partition(":")
        if kind == "trait":
            core.forget_trait_changes(key, at, revert=action == "revert")
        else:
            core.remove_entry(kind, key)
    assert [e.text for e in core.kb()] == ["User loves hiking."]
    levels = {t.name: (t.level, t.evidence) for t in core.known_traits()}
    # travel falls back to what s0 taught; parenting had nothing else: cleared.
    assert levels["travel"] == ("low", "I rarely leave my town.")
    assert "parenting_and_family" not in levels
    assert [h[1:] for h in core.trait_history("travel")] == [
        ("low", "I rarely leave my town.", "s0")
    ]
    assert levels["sense_of_humor"] == ("high", "set by hand")  # the user's own value
    assert levels["pets_and_animals"][0] == "high"
    assert core.quoting(d.quotes) == []


def test_an_older_change_that_quotes_is_scrubbed_and_the_value_stays() -> None:
    core = _core()
    _learn(core, "s1", traits=[("travel", "high", "Dolomites with my sister Quillonby")], now=1.0)
    _learn(core, "s4", traits=[("travel", "medium", "I fly to Lisbon twice a year.")], now=2.0)
    found = core.quoting(_deletion().quotes)
    assert found == [("trait:travel", "scrub", (0,))]
    core.forget_trait_changes("travel", (0,), revert=False)
    assert core.trait_history("travel") == ((2.0, "medium", "I fly to Lisbon twice a year.", "s4"),)
    assert next(t for t in core.known_traits() if t.name == "travel").level == "medium"
