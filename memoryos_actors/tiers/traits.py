"""The 90 user-trait dimensions of MemoryOS's long-term persona memory.

The paper groups user traits into three categories: basic needs and personality,
AI-alignment dimensions (how the user wants an assistant to behave), and content-platform
interest tags. :data:`TRAITS` is the single table of all 90, 30 per category; every other
module takes names, categories and descriptions from here.
"""

from __future__ import annotations

import functools

from memoryos_actors.records import TraitLevel
from memoryos_actors.trait_table import (
    TRAIT_CATEGORIES,
    TRAITS,
    TRAITS_BY_NAME,
    TraitSpec,
    category_of,
)

__all__ = [
    "TRAITS",
    "TRAITS_BY_NAME",
    "TRAIT_CATEGORIES",
    "TraitSpec",
    "category_of",
    "empty_levels",
]


@functools.cache
def empty_levels() -> tuple[TraitLevel, ...]:
    """All 90 traits, in table order, with no level and no evidence.

    The same 90 objects every time: a :class:`TraitLevel` cannot change, so every user's
    LPM starts from these and shares each until that trait is observed (90 objects in
    the process instead of 90 per active user, each one walked by every full garbage
    collection).
    """
    return tuple(TraitLevel(t.name, t.category) for t in TRAITS)
