"""Where an MTM actor's evictions go: the user's append-only archive, in eviction order.

:class:`ArchiveOutbox` turns evicted segments and pages into archive records
(:class:`~memoryos_actors.store.archived.ArchivedSegment`,
:class:`~memoryos_actors.store.archived.ArchivedPage`, embeddings as float16) and writes them.
A record the archive refuses (a full disk) is kept, owed, in the MTM's snapshot and written,
oldest first, before any newer record as soon as the archive takes records again: evicted
from MTM, nothing is dropped. At recovery, :meth:`ArchiveOutbox.replay_tail` applies again the
evictions the archive recorded after the snapshot's cut.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import numpy.typing as npt
import structlog

from ..errors import StorageError
from ..messages import Page, SegmentRecord
from ..store.formats import (
    ArchivedPage,
    ArchivedSegment,
    ArchiveRecord,
    decode_archived,
    emb_to_f16,
)
from ..tiers.mtm import MTMCore
from .base import UserEnv

__all__ = ["ArchiveOutbox"]

log = structlog.get_logger("memoryos.mtm")


class ArchiveOutbox:
    """The archive records of one user's MTM: written, owed, and the pages already held.

    Attributes:
        seq: the last archive record this MTM's state reflects (snapshots store it).
        owed: archive records (evicted segments and pages) not written yet because the
            archive refused them (a full disk), oldest first: kept here and in snapshots,
            and written before any newer record once the archive takes records again.
        archived: turn seqs of the pages the archive held when this incarnation started,
            and of the owed records' pages: never inserted or archived again (pages
            archived from then on are new by definition).
    """

    def __init__(self, env: UserEnv, seq: int = 0) -> None:
        self.env = env
        self.seq = seq
        self.owed: list[ArchiveRecord] = []
        self.archived: set[int] = set()

    def replay_tail(self, core: MTMCore) -> None:
        """Apply again to ``core`` the evictions the archive recorded after :attr:`seq`, and
        remember their pages (see :attr:`archived`)."""
        archive = self.env.store.archive
        tail = archive.records(after_seq=self.seq) if archive is not None else ()
        for seq, found in tail:
            self.seq = seq
            if isinstance(found, ArchivedSegment):
                self.archived.update(found.seqs())
                core.discard_segment(found.segment_id)
            elif isinstance(found, ArchivedPage):
                self.archived.update(found.seqs())
                core.discard_page(found.seqs()[0])

    def take_owed(self, records: Iterable[Mapping[str, Any]]) -> None:
        """Take over the records a previous incarnation still owed the archive (from its
        snapshot), ahead of any newer one, and try writing them."""
        self.owed = [found for rec in records if (found := decode_archived(rec)) is not None]
        for found in self.owed:
            self.archived.update(found.seqs())
        self.write_owed()

    def owed_state(self) -> list[dict[str, Any]]:
        """The records owed, as a snapshot keeps them (:meth:`take_owed` reads them)."""
        return [rec.encode() for rec in self.owed]

    def write_owed(self) -> bool:
        """Write the records owed, oldest first, up to the first one the archive refuses;
        True when none is left."""
        store = self.env.store
        while self.owed:
            try:
                seq = store.archive_append(self.owed[0])
            except StorageError as exc:
                log.debug("mtm.archive_refused", user=self.env.user_id, error=str(exc))
                return False
            self.seq = max(self.seq, seq)
            del self.owed[0]
        return True

    def segment_evicted(
        self,
        segment: SegmentRecord,
        embs: Mapping[int, npt.NDArray[np.float32]],
        deletions_seen: int = 0,
    ) -> None:
        """Archive an evicted segment with the pages of it the archive does not hold yet
        (``embs``: the evicted pages' embeddings by turn seq; ``deletions_seen``: how many
        of the edit log's deletions MTM had scrubbed its summaries for)."""
        if self.env.store.archive is None:
            return
        fresh = tuple(p for p in segment.pages if p.seq not in self.archived)
        if not fresh:
            return
        if len(fresh) != len(segment.pages):
            segment = dataclasses.replace(segment, pages=fresh)
        self._append(
            ArchivedSegment.of_segment(
                segment,
                {str(p.seq): emb_to_f16(embs[p.seq]) for p in fresh if p.seq in embs},
                self.env.store.edits.deletion_key(deletions_seen),
            )
        )

    def page_evicted(
        self, page: Page, segment_id: str | None, embs: Mapping[int, npt.NDArray[np.float32]]
    ) -> None:
        """Archive a page evicted from segment ``segment_id`` (unless the archive holds it)."""
        if self.env.store.archive is None or page.seq in self.archived:
            return
        emb = embs.get(page.seq)
        self._append(
            ArchivedPage.of_page(page, segment_id, emb_to_f16(emb) if emb is not None else None)
        )

    def _append(self, record: ArchiveRecord) -> None:
        """Archive ``record`` after every record still owed; if the archive refuses it (a
        full disk), keep it owed instead of losing it."""
        self.owed.append(record)
        if not self.write_owed():
            self.env.metrics.inc("archive_writes_deferred")
            log.warning("mtm.archive_deferred", user=self.env.user_id, owed=len(self.owed))
