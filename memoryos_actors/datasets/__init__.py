"""Readers for conversation data sets that can be fed to a memory system.

- :mod:`memoryos_actors.datasets.locomo`: the LoCoMo JSON layout (conversations with
  sessions, turns and evidence-labelled questions), turned into pages.
- :mod:`memoryos_actors.datasets.turns`: JSON Lines files of turns
  ``{"user_id", "query", "response", "timestamp"}``.

Both are pure: they read a file and return records, without touching a memory system.
Malformed input raises :class:`DatasetError`, whose message names the file and, where the
format has lines, the line.
"""

from __future__ import annotations

from ._errors import DatasetError

__all__ = ["DatasetError"]
