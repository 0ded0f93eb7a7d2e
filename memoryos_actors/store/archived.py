"""The archive's records, typed: now defined in :mod:`memoryos_actors.store.formats`, the one
owner of the record formats; the names stay importable from here."""

from __future__ import annotations

from memoryos_actors.store.formats import (
    ARCHIVED_KINDS,
    ArchivedFact,
    ArchivedPage,
    ArchivedSegment,
    ArchiveRecord,
    decode_archived,
    emb_from_f16,
    emb_to_f16,
)

__all__ = [
    "ARCHIVED_KINDS",
    "ArchiveRecord",
    "ArchivedFact",
    "ArchivedPage",
    "ArchivedSegment",
    "decode_archived",
    "emb_from_f16",
    "emb_to_f16",
]
