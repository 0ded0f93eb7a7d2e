"""Helpers for the whole-system tests (imported by their conftest and test modules)."""

from __future__ import annotations

from memoryos_actors import MemoryOS

#: A small configuration that makes eviction and promotion happen within a few hundred turns.
SMALL = dict(
    mtm_capacity=12,
    segment_max_pages=6,
    heat_tick_seconds=3600.0,
    summary_debounce_seconds=0.01,
    snapshot_every_turns=50,
    fsync="never",
    log_level="error",
)

TOPICS = {
    "hiking": [
        "We climbed the granite ridge above the glacier lake",
        "My new leather boots gave me blisters on the descent",
        "The mountain hut served lentil soup after the long trail",
        "Next summer I want to trek the alpine pass with my brother",
        "Fog rolled over the summit so we turned back early",
    ],
    "cooking": [
        "The risotto needs warm stock added one ladle at a time",
        "I baked sourdough bread with a crunchy crust yesterday",
        "Fresh basil and garlic make the tomato sauce sing",
        "My grandmother taught me to fold dumplings by hand",
        "The oven thermometer showed the roast was underdone",
    ],
    "software": [
        "The python service leaks memory under heavy load",
        "We traced the bug to an unbounded request cache",
        "Code review caught a race condition in the scheduler",
        "The database migration locked the orders table for an hour",
        "I rewrote the parser with a proper tokenizer",
    ],
    "violin": [
        "Our orchestra rehearses the Dvorak symphony on Thursday",
        "The violin solo passage in the second movement scares me",
        "I changed my violin strings before the concert",
        "The conductor wants softer bowing in the slow section",
        "My teacher says my vibrato sounds warmer now",
    ],
    "astronomy": [
        "The telescope caught Saturn's rings through thin clouds",
        "I measured exoplanet transit spectra for my thesis",
        "A meteor shower peaks next week after midnight",
        "The observatory dome motor broke during the cold night",
        "Jupiter's moons lined up beautifully in the eyepiece",
    ],
    "garden": [
        "The tomatoes in the greenhouse finally turned red",
        "Slugs ate half of my lettuce seedlings overnight",
        "I pruned the climbing roses along the fence",
        "Compost from the kitchen scraps enriched the soil",
        "The apple tree blossomed two weeks early this spring",
    ],
}
_NAMES = list(TOPICS)

REPLIES = {
    "hiking": ["Stay safe on those trails, {user}.", "Mountains reward patience, {user}."],
    "cooking": ["That dish sounds delicious, {user}.", "Kitchen experiments are fun, {user}."],
    "software": ["Debugging takes grit, {user}.", "Good engineers test first, {user}."],
    "violin": ["Music practice pays off, {user}.", "Concerts are thrilling, {user}."],
    "astronomy": ["The night sky is humbling, {user}.", "Clear skies to you, {user}."],
    "garden": ["Gardens need patience, {user}.", "Fresh produce is the best, {user}."],
}


def turn_text(user: str, i: int) -> tuple[str, str]:
    """A deterministic turn of ``user``: five turns per topic, topics in rotation."""
    topic = _NAMES[(i // 5) % len(_NAMES)]
    sentence = TOPICS[topic][i % 5]
    return (f"{sentence} ({user}, turn {i}).", REPLIES[topic][i % 2].format(user=user))


def all_page_ids(mem: MemoryOS, user: str) -> list[str]:
    """Every page id held for ``user`` in STM, MTM and the archive (with repeats)."""
    return mem.stored_page_ids(user)
