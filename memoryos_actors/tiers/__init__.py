"""Tier cores: pure state and transitions of STM, MTM and LPM (no threads, no I/O).

Each actor in :mod:`memoryos_actors.actors` holds one of these cores and adds what a core
must not do: messages, timers, the store's files, the gateway's jobs and recovery (MTM's
actor is the largest of them).
"""

from __future__ import annotations

from memoryos_actors.tiers.context import build_context
from memoryos_actors.tiers.lpm import LPMCore
from memoryos_actors.tiers.mtm import MTMCore
from memoryos_actors.tiers.stm import STMCore
from memoryos_actors.tiers.traits import TRAITS, TraitSpec

__all__ = ["TRAITS", "LPMCore", "MTMCore", "STMCore", "TraitSpec", "build_context"]
