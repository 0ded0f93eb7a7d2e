from __future__ import annotations

import re
from collections import Counter

import msgpack
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import basis_vector, random_unit

from memoryos_actors.clock import ManualClock
from memoryos_actors.config import MemoryConfig
from memoryos_actors.errors import EmbedderMismatch, InvalidInput
from memoryos_actors.messages import (
    TRAIT_CATEGORIES,
    AgentProfile,
    PersonaUpdate,
    TraitLevel,
    UserProfile,
)
from memoryos_actors.tiers.lpm import LPMCore
from memoryos_actors.tiers.traits import TRAITS, TRAITS_BY_NAME, category_of, empty_levels

DIM = 8


def _core(**cfg) -> LPMCore:
    return LPMCore(MemoryConfig(**cfg), clock=ManualClock(500.0))


def _embs(n: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.stack([random_unit(rng, DIM) for _ in range(n)]) if n else np.zeros((0, DIM))


def _facts(core: LPMCore, texts, assistant="default", agent=False, seed=0):
    texts = tuple(texts)
    if agent:
        upd = PersonaUpdate("u", assistant, agent_traits=texts)
        return core.apply(upd, None, _embs(len(texts), seed))
    return core.apply(PersonaUpdate("u", assistant, facts=texts), _embs(len(texts), seed))


# ----------------------------------------------------------------- the trait table


def test_there_are_ninety_distinct_traits_thirty_per_category() -> None:
    assert len(TRAITS) == 90 and len({t.name for t in TRAITS}) == 90
    assert Counter(t.category for t in TRAITS) == {c: 30 for c in TRAIT_CATEGORIES}
    for t in TRAITS:
        assert re.fullmatch(r"[a-z][a-z_]+[a-z]", t.name), t.name
        assert len(t.description.split()) >= 3, t.name
    assert category_of("openness") == "basic_needs_personality"
    assert category_of("conciseness") == "ai_alignment"
    assert category_of("travel") == "content_interests" and category_of("nope") is None
    assert TRAITS_BY_NAME["travel"].category == "content_interests"
    assert TraitLevel.known("travel", "high") == TraitLevel("travel", "content_interests", "high")
    with pytest.raises(InvalidInput, match="mind_reading"):
        TraitLevel.known("mind_reading", "low")


def test_a_new_core_has_all_ninety_traits_without_levels() -> None:
    traits = _core().traits()
    assert traits == empty_levels()
    assert [t.name for t in traits] == [t.name for t in TRAITS]
    assert all(t.level is None for t in traits) and _core().known_traits() == ()


def test_users_share_each_unobserved_trait_until_it_is_observed() -> None:
    # A TraitLevel cannot change: 90 of them per user would only be 90 more objects per
    # active user for the garbage collector to walk.
    a, b = _core(), _core()
    assert all(x is y for x, y in zip(a.traits(), b.traits(), strict=True))
    a.apply(
        PersonaUpdate(
            "u", "default", traits=(TraitLevel("openness", "basic_needs_personality", "high"),)
        )
    )
    assert {t.name for t in a.known_traits()} == {"openness"}
    assert [t.level for t in b.traits()] == [None] * 90
    # A core restored from its state shares the unobserved ones again, not copies.
    back = LPMCore.from_state(a.to_state(), MemoryConfig(), clock=ManualClock(500.0))
    assert back.traits() == a.traits()
    same = [x is y for x, y in zip(back.traits(), b.traits(), strict=True)]
    assert same.count(False) == 1
    assert back.traits()[same.index(False)].level == "high"


# ----------------------------------------------------------------- traits


def test_apply_sets_trait_levels_and_reports_unknown_names() -> None:
    core = _core()
    upd = PersonaUpdate(
        "u",
        "default",
        traits=(
            TraitLevel("openness", "basic_needs_personality", "high", "tried 5 cuisines"),
            TraitLevel("mind_reading", "ai_alignment", "low"),
        ),
    )
    eff = core.apply(upd)
    assert eff.traits_changed == ("openness",) and eff.unknown_traits == ("mind_reading",)
    assert core.known_traits() == (
        TraitLevel("openness", "basic_needs_personality", "high", "tried 5 cuisines"),
    )
    # A later update without a level keeps the level but may refresh evidence.
    core.apply(
        PersonaUpdate(
            "u",
            "default",
            traits=(TraitLevel("openness", "basic_needs_personality", None, "moved abroad"),),
        )
    )
    assert core.known_traits()[0].level == "high"
    assert core.known_traits()[0].evidence == "moved abroad"
    assert core.apply(upd).traits_changed == ("openness",)  # evidence back to the first
    assert core.apply(upd).traits_changed == ()  # nothing new


def test_trait_category_comes_from_the_table_not_the_update() -> None:
    core = _core()
    core.apply(
        PersonaUpdate("u", "default", traits=(TraitLevel("travel", "ai_alignment", "medium"),))
    )
    assert core.known_traits() == (TraitLevel("travel", "content_interests", "medium"),)


# ----------------------------------------------------------------- knowledge base


def test_kb_keeps_the_newest_hundred_facts_and_returns_the_ones_pushed_out() -> None:
    core = _core()
    evicted = []
    for chunk in range(0, 105, 35):
        eff = _facts(core, [f"fact {i}" for i in range(chunk, chunk + 35)], seed=chunk)
        evicted.extend(eff.facts_evicted)
    assert [e.text for e in core.kb()] == [f"fact {i}" for i in range(5, 105)]
    assert [e.text for e in evicted] == [f"fact {i}" for i in range(5)]
    assert core.kb()[0].entry_id == "f6" and core.kb()[-1].timestamp == 500.0


def test_agent_traits_keep_the_newest_hundred_per_assistant() -> None:
    core = _core()
    eff = _facts(core, [f"trait {i}" for i in range(103)], assistant="guide", agent=True)
    assert [e.text for e in eff.agent_traits_evicted] == ["trait 0", "trait 1", "trait 2"]
    assert len(core.agent_traits("guide")) == 100
    assert core.agent_traits("default") == () and core.kb() == ()
    _facts(core, ["speaks French"], assistant="tutor", agent=True)
    assert [e.text for e in core.agent_traits("tutor")] == ["speaks French"]
    assert core.assistants() == ("guide", "tutor")


def test_capacities_follow_the_config() -> None:
    core = _core(kb_capacity=2, agent_traits_capacity=1)
    _facts(core, ["a", "b", "c"])
    _facts(core, ["x", "y"], agent=True)
    assert [e.text for e in core.kb()] == ["b", "c"]
    assert [e.text for e in core.agent_traits()] == ["y"]


def test_exact_duplicate_facts_are_skipped_ignoring_case_and_spacing() -> None:
    core = _core()
    eff = _facts(core, ["Likes tea", "likes  tea ", "Has a dog"])
    assert [e.text for e in eff.facts_added] == ["Likes tea", "Has a dog"]
    eff = _facts(core, ["HAS A DOG", "Has a cat"])
    assert [e.text for e in eff.facts_added] == ["Has a cat"] and eff.duplicates == 1
    assert len(core.kb()) == 3


def test_apply_checks_embedding_shapes_and_the_user() -> None:
    core = _core()
    with pytest.raises(InvalidInput, match="fact_embeddings"):
        core.apply(PersonaUpdate("u", "default", facts=("a", "b")), _embs(1))
    with pytest.raises(InvalidInput, match="fact_embeddings"):
        core.apply(PersonaUpdate("u", "default", facts=("a",)))
    _facts(core, ["a"])
    with pytest.raises(InvalidInput, match="columns"):
        core.apply(PersonaUpdate("u", "default", facts=("b",)), np.ones((1, DIM + 1)))
    with pytest.raises(InvalidInput, match="user"):
        core.apply(PersonaUpdate("v", "default", facts=("b",)), _embs(1))
    assert [e.text for e in core.kb()] == ["a"]  # failed updates changed nothing


# ----------------------------------------------------------------- retrieval


def test_search_returns_top_k_facts_and_agent_traits_by_cosine() -> None:
    core = _core()
    texts = ["likes hiking", "is vegetarian", "lives in Oslo"]
    core.apply(
        PersonaUpdate("u", "guide", facts=tuple(texts), agent_traits=("jokes a lot",)),
        np.stack([basis_vector(DIM, i) for i in range(3)]),
        basis_vector(DIM, 1)[None],
    )
    q = 0.6 * basis_vector(DIM, 1) + 0.8 * basis_vector(DIM, 2)
    view = core.search(q, top_k_kb=2, top_k_agent=5, assistant_id="guide")
    assert [h.entry.text for h in view.kb] == ["lives in Oslo", "is vegetarian"]
    assert [round(h.score, 6) for h in view.kb] == [0.8, 0.6]
    assert [h.entry.text for h in view.agent_traits] == ["jokes a lot"]
    assert core.search(q, assistant_id="other").agent_traits == ()
    assert len(core.search(q).kb) == 3  # config default kb_top_k = 10


def test_search_returns_profiles_and_only_traits_with_a_level() -> None:
    core = _core()
    core.set_user_profile(UserProfile(name="Ada", birth_year=1990))
    core.set_agent_profile("guide", AgentProfile(role="guide"))
    core.apply(
        PersonaUpdate("u", "guide", traits=(TraitLevel("music", "content_interests", "high"),))
    )
    view = core.search(np.ones(DIM), assistant_id="guide")
    assert view.user_profile.name == "Ada" and view.agent_profile.role == "guide"
    assert [t.name for t in view.traits] == ["music"]
    assert core.search(np.ones(DIM)).agent_profile == AgentProfile()


def test_state_round_trips_through_msgpack() -> None:
    core = _core()
    core.set_user_profile(UserProfile(name="Ada", extras=(("city", "Oslo"),)))
    core.set_agent_profile("guide", AgentProfile(role="guide", character="calm"))
    core.apply(
        PersonaUpdate(
            "u",
            "guide",
            traits=(TraitLevel("music", "content_interests", "high", "plays piano"),),
            facts=("a", "b"),
            agent_traits=("c",),
        ),
        _embs(2),
        _embs(1, seed=4),
    )
    state = msgpack.unpackb(msgpack.packb(core.to_state(), use_bin_type=True), raw=False)
    back = LPMCore.from_state(state, MemoryConfig(), clock=ManualClock(500.0))
    assert back.traits() == core.traits() and back.kb() == core.kb()
    assert back.agent_traits("guide") == core.agent_traits("guide")
    assert back.user_profile() == core.user_profile()
    assert back.agent_profile("guide") == core.agent_profile("guide")
    q = _embs(1, seed=9)[0]
    assert back.search(q, assistant_id="guide") == core.search(q, assistant_id="guide")
    assert _facts(back, ["d"]).facts_added[0].entry_id == "f3"
    with pytest.raises(EmbedderMismatch):
        LPMCore.from_state(state, MemoryConfig(), dim=DIM + 1)


# ----------------------------------------------------------------- single memories


def test_a_fact_can_be_corrected_in_place_and_removed() -> None:
    core = _core()
    _facts(core, ["User likes tea.", "User has a dog."])
    emb = random_unit(np.random.default_rng(9), DIM)
    old = core.replace_entry("fact", "f1", "User likes coffee.", emb)
    assert old is not None and old.text == "User likes tea."
    new = core.entry("fact", "f1")
    assert new is not None and new.text == "User likes coffee."
    assert (new.timestamp, new.source_segment) == (old.timestamp, old.source_segment)
    # Retrieval ranks by the new embedding.
    assert core.search(emb, 1, 0).kb[0].entry.entry_id == "f1"
    assert core.remove_entry("fact", "f1") is not None
    assert [e.entry_id for e in core.kb()] == ["f2"]
    assert core.remove_entry("fact", "f1") is None
    assert core.replace_entry("fact", "f404", "x", emb) is None
    # The state round-trips the change.
    again = LPMCore.from_state(core.to_state(), MemoryConfig())
    assert [e.text for e in again.kb()] == ["User has a dog."]


def test_agent_traits_are_edited_per_assistant() -> None:
    core = _core()
    _facts(core, ["Speaks briefly."], assistant="coach", agent=True)
    assert core.entry("agent_trait", "a1", "coach") is not None
    assert core.entry("agent_trait", "a1", "other") is None
    assert core.remove_entry("agent_trait", "a1", "other") is None
    assert core.remove_entry("agent_trait", "a1", "coach") is not None
    assert core.agent_traits("coach") == ()
    with pytest.raises(InvalidInput):
        core.entry("page", "p1")


def test_a_trait_keeps_the_history_of_its_changes_until_it_is_cleared() -> None:
    core = _core()
    core.apply(
        PersonaUpdate(
            "u", "default", source_segment="s2", traits=(TraitLevel.known("travel", "low", "once"),)
        ),
        now=10.0,
    )
    core.apply(
        PersonaUpdate(
            "u",
            "default",
            source_segment="s5",
            traits=(TraitLevel.known("travel", "high", "often"),),
        ),
        now=20.0,
    )
    assert core.trait_history("travel") == (
        (10.0, "low", "once", "s2"),
        (20.0, "high", "often", "s5"),
    )
    before = core.set_trait("travel", "medium", "said so", now=30.0)
    assert before.level == "high"
    assert core.trait_history("travel")[-1] == (30.0, "medium", "said so", "edit")
    again = LPMCore.from_state(core.to_state(), MemoryConfig())
    assert again.trait_history("travel") == core.trait_history("travel")
    core.set_trait("travel", None)
    assert core.trait_history("travel") == ()
    assert "travel" not in {t.name for t in core.known_traits()}
    with pytest.raises(InvalidInput):
        core.set_trait("travel", "enormous")
    with pytest.raises(InvalidInput):
        core.set_trait("mind_reading", "low")


def test_an_archived_agent_trait_is_matched_to_its_own_assistant_only() -> None:
    """LPM decides whose archived trait it is from the cold item's id, and reads the
    record only when a colon leaves the id's split in doubt."""
    from memoryos_actors.actors.lpm import _owned
    from memoryos_actors.cold_items import ColdItem

    def item(item_id: str, assistant: str) -> ColdItem:
        return ColdItem(
            item_id=item_id,
            kind="agent_trait",
            seq=None,
            segment_id=None,
            timestamp=0.0,
            archive_seq=0,
            text="",
            keywords=frozenset(),
            terms=(),
            embedding=None,
            raw_record={"assistant": assistant, "entry_id": "a1"},
        )

    assert _owned(item("agent_trait:coach:a1", "coach"), "agent_trait:coach:", "coach")
    assert not _owned(item("agent_trait:tutor:a1", "tutor"), "agent_trait:coach:", "coach")
    assert not _owned(item("agent_trait:coachx:a1", "coachx"), "agent_trait:coach:", "coach")
    # "coach:b" owns "agent_trait:coach:b:a1"; asked for "coach", the record decides.
    assert not _owned(item("agent_trait:coach:b:a1", "coach:b"), "agent_trait:coach:", "coach")
    assert _owned(item("agent_trait:coach:b:a1", "coach:b"), "agent_trait:coach:b:", "coach:b")


_FIFO_OPS = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.integers(0, DIM - 1)),
        st.tuples(st.just("remove"), st.integers(0, 5)),
        st.tuples(st.just("replace"), st.integers(0, 5), st.integers(0, DIM - 1)),
        st.tuples(st.just("search"), st.integers(0, DIM - 1), st.integers(0, 12)),
    ),
    max_size=40,
)


@settings(max_examples=200, deadline=None)
@given(ops=_FIFO_OPS)
def test_search_ranks_the_current_facts_by_cosine_newest_first_on_ties(ops) -> None:
    """Facts come, are corrected and go between searches (the FIFO keeps its embeddings
    as one matrix between changes): every search ranks exactly the facts held then, best
    cosine first and, among equal cosines (embeddings drawn from a few axes, so ties are
    common), the newer fact first."""
    core = _core(kb_capacity=6)
    emb_of: dict[str, np.ndarray] = {}
    made = 0
    for op in ops:
        if op[0] == "add":
            made += 1
            emb = basis_vector(DIM, op[1])
            report = core.apply(PersonaUpdate("u", "a", facts=(f"fact number {made}",)), emb[None])
            for hit in report.facts_added:
                emb_of[hit.entry_id] = emb
        elif op[0] == "remove" and core.kb():
            target = core.kb()[op[1] % len(core.kb())].entry_id  # one of the facts held
            assert core.remove_entry("fact", target) is not None
        elif op[0] == "replace" and core.kb():
            target = core.kb()[op[1] % len(core.kb())].entry_id
            emb = basis_vector(DIM, op[2])
            assert core.replace_entry("fact", target, f"corrected {made}", emb) is not None
            emb_of[target] = emb
        elif op[0] == "search":
            q = basis_vector(DIM, op[1])
            held = core.kb()
            want = sorted(
                range(len(held)),
                key=lambda i: (-float(emb_of[held[i].entry_id] @ q), -i),
            )[: op[2]]
            got = core.search(q, top_k_kb=op[2], top_k_agent=0).kb
            assert [h.entry.entry_id for h in got] == [held[i].entry_id for i in want]
            assert [h.score for h in got] == [float(emb_of[held[i].entry_id] @ q) for i in want]


# ----------------------------------------------------------------- archived facts merged


class _Archived:
    """An archived fact as the cold index gives it: an id and a record decoded on demand
    (counted, so the test sees which ones were decoded)."""

    decoded = 0

    def __init__(self, entry_id: str, ts: float) -> None:
        self.item_id = f"fact::{entry_id}"
        self._rec = {"entry_id": entry_id, "text": f"fact {entry_id}", "timestamp": ts}

    @property
    def record(self) -> dict:
        _Archived.decoded += 1
        return dict(self._rec, assistant="")


@settings(max_examples=200, deadline=None)
@given(
    hot=st.lists(st.tuples(st.integers(0, 6), st.sampled_from([0.0, 0.5, 1.0])), max_size=6),
    cold=st.lists(st.tuples(st.integers(0, 9), st.sampled_from([0.0, 0.5, 1.0])), max_size=12),
    k=st.integers(0, 8),
)
def test_archived_facts_merge_like_decoding_them_all_and_decode_only_the_answer(
    hot, cold, k
) -> None:
    """The merge of hot hits and archived candidates equals decoding every candidate
    and sorting the lot (best score, then newer, hot first on a full tie, no archived copy
    of a hot entry), while decoding only the archived entries it returns (and any whose
    id could be a hot entry's)."""
    from memoryos_actors.actors.lpm import _merge
    from memoryos_actors.messages import FactHit, KBEntry

    hot_hits = tuple(
        FactHit(KBEntry(f"f{n}", f"fact f{n}", 100.0 + n), score) for n, score in dict(hot).items()
    )
    cands = [(score, 100.0 + n, _Archived(f"f{n}", 100.0 + n)) for n, score in cold]
    cands.sort(key=lambda c: (-c[0], -c[1]))
    # The definition: decode every candidate, drop copies of hot entries, sort stably.
    seen = {h.entry.entry_id for h in hot_hits}
    everything = list(hot_hits) + [
        FactHit(KBEntry.from_dict(dict(item._rec)), score, "archive")
        for score, _ts, item in cands
        if item._rec["entry_id"] not in seen
    ]
    everything.sort(key=lambda h: (-h.score, -h.entry.timestamp))
    _Archived.decoded = 0
    got = _merge(hot_hits, cands, k)
    assert got == tuple(everything[:k])
    copies = sum(1 for _s, _t, item in cands if item._rec["entry_id"] in seen)
    assert _Archived.decoded <= sum(1 for h in got if h.tier == "archive") + copies
