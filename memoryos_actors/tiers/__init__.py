"""Tier cores: pure state and transitions of STM, MTM and LPM (no threads, no I/O).

The actors in :mod:`memoryos_actors.actors` are thin shells around these classes.
"""

from __future__ import annotations

from memoryos_actors.tiers.context import build_context
from memoryos_actors.tiers.lpm import LPMCore
from memoryos_actors.tiers.mtm import MTMCore
from memoryos_actors.tiers.stm import STMCore
from memoryos_actors.tiers.traits import TRAITS, TraitSpec

__all__ = ["TRAITS", "LPMCore", "MTMCore", "STMCore", "TraitSpec", "build_context"]
