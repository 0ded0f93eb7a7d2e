"""The records and messages actors exchange, under one name (the compatibility face).

The definitions live in one module per concept: :mod:`memoryos_actors.records` (domain
records), :mod:`memoryos_actors.requests` (requests to a user's actors),
:mod:`memoryos_actors.hits` (what the tier cores answer) and
:mod:`memoryos_actors.context` (what retrieval returns). Importing a name from here gives
the same object.
"""

from __future__ import annotations

from memoryos_actors.context import ContextItem, MemoryContext
from memoryos_actors.hits import (
    FactHit,
    LPMEffects,
    LPMView,
    MTMEffects,
    MTMHits,
    PageHit,
    SegmentHit,
)
from memoryos_actors.records import (
    DEFAULT_ASSISTANT as DEFAULT_ASSISTANT,
)
from memoryos_actors.records import (
    TIERS as TIERS,
)
from memoryos_actors.records import (
    TRAIT_CATEGORIES as TRAIT_CATEGORIES,
)
from memoryos_actors.records import (
    TRAIT_LEVELS as TRAIT_LEVELS,
)
from memoryos_actors.records import (
    AgentProfile as AgentProfile,
)
from memoryos_actors.records import (
    KBEntry as KBEntry,
)
from memoryos_actors.records import (
    Page as Page,
)
from memoryos_actors.records import (
    PersonaUpdate as PersonaUpdate,
)
from memoryos_actors.records import (
    RetrievalMode as RetrievalMode,
)
from memoryos_actors.records import (
    SegmentRecord as SegmentRecord,
)
from memoryos_actors.records import (
    SegmentView as SegmentView,
)
from memoryos_actors.records import (
    Tier as Tier,
)
from memoryos_actors.records import (
    TraitLevel as TraitLevel,
)
from memoryos_actors.records import (
    UserProfile as UserProfile,
)
from memoryos_actors.records import (
    normalize_keywords as normalize_keywords,
)
from memoryos_actors.requests import (
    AddTurn as AddTurn,
)
from memoryos_actors.requests import (
    Retrieve as Retrieve,
)
from memoryos_actors.requests import (
    SetAgentProfile as SetAgentProfile,
)
from memoryos_actors.requests import (
    SetUserProfile as SetUserProfile,
)

__all__ = [
    "AddTurn",
    "AgentProfile",
    "ContextItem",
    "DEFAULT_ASSISTANT",
    "FactHit",
    "KBEntry",
    "LPMEffects",
    "LPMView",
    "MTMEffects",
    "MTMHits",
    "MemoryContext",
    "Page",
    "PageHit",
    "PersonaUpdate",
    "RetrievalMode",
    "Retrieve",
    "SegmentHit",
    "SegmentRecord",
    "SegmentView",
    "SetAgentProfile",
    "SetUserProfile",
    "TIERS",
    "TRAIT_CATEGORIES",
    "TRAIT_LEVELS",
    "Tier",
    "TraitLevel",
    "UserProfile",
    "normalize_keywords",
]
