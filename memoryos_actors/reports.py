"""What the facade's inspection and lifecycle calls return: :class:`UserState`,
:class:`ForgetReport` and :class:`RepairReport` (plain frozen records).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from .messages import (
    KBEntry,
    Page,
    SegmentRecord,
    TraitLevel,
    UserProfile,
)

__all__ = ["ForgetReport", "RepairReport", "RepairedFile", "UserState"]


@dataclass(frozen=True, slots=True)
class UserState:
    """A picture of one user's memory (see :meth:`MemoryOS.user_state`).

    Attributes:
        user_id: whose memory.
        turns: turns stored so far.
        stm: STM pages, oldest first.
        segments: MTM segments with their pages, hottest first.
        profile: the user's static profile.
        traits: user traits that have a level.
        kb: user facts (knowledge base), oldest first.
        agents: per assistant id, its ``profile`` and agent ``traits``.
        persona_updates: persona updates applied since the LPM actor started.
    """

    user_id: str
    turns: int
    stm: tuple[Page, ...]
    segments: tuple[SegmentRecord, ...]
    profile: UserProfile
    traits: tuple[TraitLevel, ...]
    kb: tuple[KBEntry, ...]
    agents: dict[str, dict[str, Any]]
    persona_updates: int

    def page_ids(self) -> list[str]:
        """Ids of every page held in STM and MTM (not the archive)."""
        ids = [p.page_id for p in self.stm]
        for seg in self.segments:
            ids.extend(p.page_id for p in seg.pages)
        return ids


@dataclass(frozen=True, slots=True)
class ForgetReport:
    """What :meth:`MemoryOS.forget_user` removed."""

    user_id: str
    removed_files: tuple[str, ...]
    was_active: bool
    #: Gateway entries removed: ``gateway_cache`` (cached answers and embeddings),
    #: ``redo_queue`` (degraded requests waiting to be redone) and ``degraded_records``
    #: (who asked for those).
    purged: dict[str, int] = dataclasses.field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class RepairedFile:
    """What a repair did to one file of a user (see :class:`RepairReport`).

    Attributes:
        path: the file.
        action: ``"rewritten"`` (a log written again with every intact record, damaged
            ones replaced by placeholders), ``"moved_aside"`` (an unreadable snapshot or a
            cold index derived from a damaged archive, rebuilt later) or ``"rebuilt"``
            (an unreadable ``meta.json`` written again from the directory name).
        backup: where the original is kept now (``<name>.corrupt-<unix ms>`` beside it).
        reason: what was wrong with it.
        kept_records: intact records kept (logs; 0 for other files).
        lost_records: records destroyed whose place is known: each seq between two intact
            records now holds a ``"lost"`` placeholder, so later seqs keep their meaning.
        lost_seqs: those seqs, as inclusive ``(first, last)`` ranges.
        damaged_bytes: byte ranges ``(start, end)`` of the original (end excluded) that
            held no intact record.
        cut_tail_bytes: bytes of a damaged end of the file dropped (how many records they
            held cannot be known; a crash's torn write looks the same).
    """

    path: str
    action: str
    backup: str
    reason: str
    kept_records: int = 0
    lost_records: int = 0
    lost_seqs: tuple[tuple[int, int], ...] = ()
    damaged_bytes: tuple[tuple[int, int], ...] = ()
    cut_tail_bytes: int = 0


@dataclass(frozen=True, slots=True)
class RepairReport:
    """What :meth:`MemoryOS.repair_user` (or ``memoryos repair``) did to one user's files.

    Attributes:
        user_id: whose files.
        files: every file changed, moved aside or rebuilt (empty: nothing was damaged).
        wal_turns_kept: turns whose records the repaired WAL holds (the rest of the
            user's turns are in its snapshot and archive, untouched unless listed here).
        lost_turns: page ids (``p<seq>``) of turns known to be lost: their WAL record was
            damaged and the intact turns around it say which seq it had.
        notes: one line per thing done or lost, for people.
    """

    user_id: str
    files: tuple[RepairedFile, ...]
    wal_turns_kept: int = 0
    lost_turns: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def changed(self) -> bool:
        """Whether anything was damaged (and so changed)."""
        return bool(self.files)

    @property
    def kept_records(self) -> int:
        """Intact records kept in the rewritten logs."""
        return sum(f.kept_records for f in self.files)

    @property
    def lost_records(self) -> int:
        """Records known to be destroyed (placeholders written for them)."""
        return sum(f.lost_records for f in self.files)
