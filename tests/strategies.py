"""Hypothesis strategies for valid memoryos-actors records, shared by the test suites.

Every strategy builds objects through their public constructors, so anything generated is
valid by construction; tests that need invalid input build it by hand.
"""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from memoryos_actors.messages import (
    TRAIT_LEVELS,
    AddTurn,
    AgentProfile,
    ContextItem,
    FactHit,
    KBEntry,
    LPMView,
    MemoryContext,
    MTMEffects,
    MTMHits,
    Page,
    PageHit,
    PersonaUpdate,
    Retrieve,
    SegmentHit,
    SegmentRecord,
    SegmentView,
    TraitLevel,
    UserProfile,
)
from memoryos_actors.tiers.traits import TRAITS

__all__ = [
    "add_turns",
    "agent_profiles",
    "basis_vector",
    "context_items",
    "ids",
    "kb_entries",
    "keyword_sets",
    "lpm_views",
    "memory_contexts",
    "mtm_effects",
    "mtm_hits",
    "page_sequences",
    "pages",
    "persona_updates",
    "random_unit",
    "retrieves",
    "segment_records",
    "segment_views",
    "texts",
    "timestamps",
    "trait_levels",
    "unit_vectors",
    "user_profiles",
]

#: Printable text including non-ASCII; no lone surrogates (they are not valid UTF-8).
texts = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), min_size=0, max_size=20)
nonblank_texts = texts.filter(lambda s: s.strip() != "")
ids = st.text(
    alphabet=st.characters(blacklist_categories=("Cs", "Cc", "Z")), min_size=1, max_size=16
)
#: Seconds since the epoch, between 1970 and about 2096.
timestamps = st.floats(min_value=0.0, max_value=4e9, allow_nan=False, allow_infinity=False)
keyword_sets = st.frozensets(st.from_regex(r"[a-z][a-z0-9]{0,9}", fullmatch=True), max_size=6)
scores = st.floats(min_value=-1.0, max_value=3.0, allow_nan=False, allow_infinity=False)


@st.composite
def pages(draw: st.DrawFn, user_id: str | None = None, seq: int | None = None) -> Page:
    """A valid page; ``user_id`` and ``seq`` can be pinned."""
    s = draw(st.integers(1, 10**9)) if seq is None else seq
    return Page(
        user_id if user_id is not None else draw(ids),
        draw(ids),
        f"p{s}",
        s,
        draw(texts),
        draw(texts),
        draw(timestamps),
        draw(texts),
        draw(st.sampled_from(["", "c1", "c2"])),
        draw(keyword_sets),
    )


@st.composite
def page_sequences(draw: st.DrawFn, max_size: int = 30) -> list[Page]:
    """Pages of one user with increasing seq from 1 and non-decreasing timestamps."""
    n = draw(st.integers(0, max_size))
    t = draw(st.floats(0.0, 1e9))
    out = []
    for seq in range(1, n + 1):
        t += draw(st.floats(0.0, 1e4))
        out.append(
            Page(
                "u",
                "default",
                f"p{seq}",
                seq,
                draw(texts),
                draw(texts),
                t,
                keywords=draw(keyword_sets),
            )
        )
    return out


segment_ids = st.integers(1, 10**6).map(lambda n: f"s{n}")


@st.composite
def segment_views(draw: st.DrawFn) -> SegmentView:
    """A valid segment view."""
    return SegmentView(
        draw(segment_ids),
        draw(texts),
        draw(keyword_sets),
        tuple(f"p{n}" for n in sorted(draw(st.sets(st.integers(1, 10**6), max_size=5)))),
        draw(st.floats(0.0, 100.0)),
        draw(st.integers(0, 100)),
        draw(st.integers(0, 100)),
        draw(timestamps),
        draw(timestamps),
    )


@st.composite
def segment_records(draw: st.DrawFn) -> SegmentRecord:
    """A valid full segment record with 0-4 pages."""
    return SegmentRecord(
        draw(ids),
        draw(segment_ids),
        draw(texts),
        draw(keyword_sets),
        tuple(draw(st.lists(pages(), max_size=2))),
        draw(st.floats(0.0, 100.0)),
        draw(st.integers(0, 100)),
        draw(st.integers(0, 100)),
        draw(timestamps),
        draw(timestamps),
    )


trait_levels = st.sampled_from(TRAITS).flatmap(
    lambda spec: st.builds(
        TraitLevel,
        st.just(spec.name),
        st.just(spec.category),
        st.one_of(st.none(), st.sampled_from(TRAIT_LEVELS)),
        texts,
    )
)
kb_entries = st.builds(
    KBEntry,
    st.integers(1, 10**6).map(lambda n: f"f{n}"),
    nonblank_texts,
    timestamps,
    st.one_of(st.none(), segment_ids),
)
user_profiles = st.builds(
    UserProfile,
    st.one_of(st.none(), texts),
    st.one_of(st.none(), texts),
    st.one_of(st.none(), st.integers(1, 9999)),
    st.dictionaries(ids, texts, max_size=3).map(lambda d: tuple(sorted(d.items()))),
)
agent_profiles = st.builds(
    AgentProfile,
    texts,
    texts,
    st.dictionaries(ids, texts, max_size=3).map(lambda d: tuple(sorted(d.items()))),
)
persona_updates = st.builds(
    PersonaUpdate,
    ids,
    ids,
    st.lists(trait_levels, max_size=4).map(tuple),
    st.lists(texts, max_size=4).map(tuple),
    st.lists(texts, max_size=4).map(tuple),
    st.one_of(st.none(), segment_ids),
)
context_items = st.builds(
    ContextItem,
    st.sampled_from(["stm", "mtm", "lpm"]),
    st.sampled_from(["page", "segment", "fact", "agent_trait"]),
    ids,
    texts,
    scores,
    st.one_of(st.none(), segment_ids),
    st.one_of(st.none(), timestamps),
    texts,
)
memory_contexts = st.builds(
    MemoryContext,
    ids,
    ids,
    texts,
    st.lists(context_items, max_size=3).map(tuple),
    st.lists(context_items, max_size=3).map(tuple),
    st.lists(context_items, max_size=2).map(tuple),
    user_profiles,
    st.lists(trait_levels, max_size=3).map(tuple),
    st.lists(context_items, max_size=3).map(tuple),
    st.lists(context_items, max_size=3).map(tuple),
    st.floats(0.0, 1e4),
    agent_profiles,
)
page_hits = st.builds(PageHit, pages(), segment_ids, scores, texts)
mtm_hits = st.builds(
    MTMHits,
    st.sampled_from(["paper", "hybrid"]),
    st.lists(st.builds(SegmentHit, segment_views(), scores, texts), max_size=3).map(tuple),
    st.lists(page_hits, max_size=3).map(tuple),
)
mtm_effects = st.builds(
    MTMEffects,
    st.one_of(st.none(), segment_ids),
    st.booleans(),
    st.booleans(),
    st.lists(segment_records(), max_size=1).map(tuple),
    st.lists(pages(), max_size=2).map(tuple),
    st.lists(segment_records(), max_size=1).map(tuple),
    st.lists(segment_ids, max_size=2).map(tuple),
)
lpm_views = st.builds(
    LPMView,
    user_profiles,
    agent_profiles,
    st.lists(trait_levels, max_size=3).map(tuple),
    st.lists(st.builds(FactHit, kb_entries, scores), max_size=3).map(tuple),
    st.lists(st.builds(FactHit, kb_entries, scores), max_size=3).map(tuple),
)
add_turns = st.builds(AddTurn, ids, ids, nonblank_texts, texts, timestamps)
retrieves = st.builds(Retrieve, ids, ids, texts, timestamps)


def unit_vectors(dim: int) -> st.SearchStrategy[np.ndarray]:
    """L2-normalised float32 vectors of length ``dim`` (never all zeros)."""
    return (
        st.lists(st.floats(-1.0, 1.0, allow_nan=False, width=32), min_size=dim, max_size=dim)
        .filter(lambda xs: sum(x * x for x in xs) > 1e-6)
        .map(lambda xs: (np.asarray(xs, dtype=np.float64) / np.linalg.norm(xs)).astype(np.float32))
    )


def basis_vector(dim: int, i: int) -> np.ndarray:
    """The i-th standard basis vector of length ``dim`` (float32, unit length)."""
    v = np.zeros(dim, dtype=np.float32)
    v[i] = 1.0
    return v


def random_unit(rng: np.random.Generator, dim: int) -> np.ndarray:
    """A random L2-normalised float32 vector drawn from ``rng``."""
    v = rng.normal(size=dim)
    return (v / np.linalg.norm(v)).astype(np.float32)
