"""Per-memory edits of one user: deletions and corrections of single memories.

A user's memories each have an id, the same in every tier and in the archive:

* ``page:<page id>`` (``page:p12``): a stored turn, in STM, MTM or the archive;
* ``segment:<segment id>`` (``segment:s3``): a topic segment with its summary and pages;
* ``fact:<entry id>`` (``fact:f7``): a knowledge-base fact, in LPM or archived;
* ``agent_trait:<assistant>:<entry id>``: a trait of an assistant, in LPM or archived;
* ``trait:<name>`` (``trait:sense_of_humor``): one of the 90 user traits.

An edit is a WAL record (``{"t": "edit", ...}``) that the LPM actor writes and replays; its
state keeps every edit (the history of the user's memories). The archive is append-only,
so it is never rewritten: :class:`EditLog` is applied to its records wherever they are
read (the cold index, listings, exports), and the hot tiers drop deleted pages when they
replay the WAL. This module is pure: no I/O.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from memoryos_actors.store.formats import (
    ArchivedPage,
    ArchivedSegment,
    ArchiveRecord,
    EditRecord,
    WalRecord,
    decode_archived,
    decode_edit,
    decode_wal,
    derived_of,
    encode_edit_state,
    scrub_page_map,
)
from memoryos_actors.store.memory_ids import (
    DERIVED_ACTIONS,
    EDITABLE_KINDS,
    MEMORY_KINDS,
    MemoryRef,
    cold_item_id,
    parse_memory_id,
)

__all__ = [
    "DERIVED_ACTIONS",
    "EditRecord",
    "EDITABLE_KINDS",
    "MEMORY_KINDS",
    "EditLog",
    "MemoryRef",
    "cold_item_id",
    "derived_of",
    "parse_memory_id",
]


def _page_seq(page_id: str) -> int | None:
    return int(page_id[1:]) if page_id[:1] == "p" and page_id[1:].isdigit() else None


class EditLog:
    """Every edit of one user, oldest first, with the lookups readers need.

    Each edit is an :class:`EditRecord` (its WAL and snapshot maps are
    :mod:`memoryos_actors.store.formats`'s). A page's deletion also names the dialogue
    chains it was in (:attr:`EditRecord.chains`) and the segment that held it
    (:attr:`EditRecord.segments`): the chain summaries of the later pages of those chains
    stored by then, and that segment's summary, may quote it, so they are cleared (a new
    summary is asked for the segment). It also names the facts, agent traits and traits
    that quoted a deleted page and what became of each (:attr:`EditRecord.derived`).

    Edits go in as :class:`EditRecord` or as their maps; :attr:`records`, :meth:`history`,
    :meth:`to_state` and :meth:`apply` answer in maps, :attr:`edits`, :meth:`history_of`
    and :meth:`apply_record` typed.
    """

    def __init__(self, records: Iterable[Mapping[str, Any] | EditRecord] = ()) -> None:
        self.edits: list[EditRecord] = []
        self.deleted: set[str] = set()
        self.deleted_pages: set[int] = set()
        #: The newest correction of each memory that was corrected and not deleted since.
        self.corrected: dict[str, EditRecord] = {}
        #: Chain id -> ``(deleted seq, last seq then)`` ranges: the chain summaries of the
        #: pages in those ranges (ends included) are cleared.
        self.scrub_chains: dict[str, list[tuple[int, int]]] = {}
        #: The segments each deletion named, in the order of the deletions: a tier that
        #: knows how many deletions its state has seen scrubs only the later ones'
        #: (:meth:`segments_scrubbed_after`).
        self._scrubs_by_delete: list[tuple[str, ...]] = []
        #: The key of each deletion (:meth:`deletion_key`), in that order, and its place.
        self._delete_keys: list[tuple[int, str, float]] = []
        self._delete_place: dict[tuple[int, str, float], int] = {}
        #: segments_scrubbed_after(n), kept until the next deletion.
        self._scrubbed_after: dict[int, frozenset[str]] = {}
        self._keys: set[tuple[int, str, str, float]] = set()
        for rec in records:
            self.add(rec)

    def __len__(self) -> int:
        return len(self.edits)

    def __bool__(self) -> bool:
        return bool(self.edits)

    @property
    def records(self) -> list[dict[str, Any]]:
        """The edits as the maps a snapshot keeps (:meth:`to_state`)."""
        return self.to_state()

    def add(self, record: Mapping[str, Any] | EditRecord) -> bool:
        """Take ``record`` in; False if it is already here (same LSN, id, op and time)."""
        edit = record if isinstance(record, EditRecord) else decode_edit(record)
        key = (edit.lsn, edit.memory_id, edit.op, float(edit.ts))
        if key in self._keys:
            return False
        self._keys.add(key)
        mid = edit.memory_id
        if edit.op == "delete":
            self.edits.append(edit)
            # A deletion erases the memory's values from its history too, and those of
            # what it took along (a fact that quoted a deleted page).
            self._erase(mid, everything=True)
            self.deleted.add(mid)
            self.corrected.pop(mid, None)
            for other, action, _at in edit.derived:
                if action == "delete":
                    self._erase(other, everything=True)
                    self.deleted.add(other)
                    self.corrected.pop(other, None)
                elif not other.startswith("trait:"):
                    self._erase(other, everything=False)  # a text the user corrected stays
            self.deleted_pages.update(edit.pages)
            for chain, seq, upto in edit.chains:
                self.scrub_chains.setdefault(chain, []).append((seq, upto))
            dkey = (int(edit.lsn), mid, float(edit.ts))
            self._delete_place[dkey] = len(self._delete_keys)
            self._delete_keys.append(dkey)
            self._scrubs_by_delete.append(tuple(edit.segments))
            self._scrubbed_after.clear()
        elif edit.op == "correct":
            if mid in self.deleted and not mid.startswith("trait:"):
                # A correction that raced the deletion and was logged after it (the LPM
                # refuses those now): it changes nothing, and keeps no text.
                edit = _erased(edit, everything=True)
            else:
                self.corrected[mid] = edit
            self.edits.append(edit)
        else:
            self.edits.append(edit)
        return True

    def _erase(self, mid: str, *, everything: bool) -> None:
        """Erase the values of ``mid`` from the edits before the newest: the old ones
        only (``everything`` False: a correction's new value is the memory's text)."""
        for i, earlier in enumerate(self.edits[:-1]):
            if earlier.memory_id == mid:
                erased = _erased(earlier, everything=everything)
                self.edits[i] = erased
                if self.corrected.get(mid) is earlier:
                    self.corrected[mid] = erased

    def to_state(self) -> list[dict[str, Any]]:
        """The edits as maps, for a snapshot or an export."""
        return [encode_edit_state(e) for e in self.edits]

    @classmethod
    def from_recovered(
        cls,
        state: Mapping[str, Any] | None,
        records: Iterable[tuple[int, Mapping[str, Any] | WalRecord]],
    ) -> EditLog:
        """The edits of a snapshot's LPM state plus those in the WAL tail after it (typed
        records, or the maps the WAL holds)."""
        log = cls(((state or {}).get("lpm") or {}).get("edits") or ())
        for lsn, rec in records:
            edit = rec if isinstance(rec, EditRecord) else _edit_or_none(rec)
            if edit is not None:
                log.add(dataclasses.replace(edit, lsn=lsn))
        return log

    def history_of(self, memory_id: str) -> list[EditRecord]:
        """The edits of ``memory_id``, oldest first: its own, and the deletions that took
        it along (their :attr:`~EditRecord.memory_id` is the deleted page's)."""
        return [
            e
            for e in self.edits
            if e.memory_id == memory_id or any(entry[0] == memory_id for entry in e.derived)
        ]

    def history(self, memory_id: str) -> list[dict[str, Any]]:
        """:meth:`history_of`, as the maps a snapshot keeps."""
        return [encode_edit_state(e) for e in self.history_of(memory_id)]

    def is_deleted(self, memory_id: str) -> bool:
        """Whether ``memory_id`` was deleted."""
        return memory_id in self.deleted

    def gone(self, memory_id: str) -> bool:
        """Whether ``memory_id`` names a memory that was deleted and cannot come back: a
        page (itself or with its segment), a segment, a fact or an agent trait. A trait is
        never gone: one of the 90 dimensions can be learned or set again."""
        if memory_id.startswith("trait:"):
            return False
        if memory_id in self.deleted:
            return True
        seq = _page_seq(memory_id[len("page:") :]) if memory_id.startswith("page:") else None
        return seq is not None and seq in self.deleted_pages

    def scrubbed(self, chain_id: str, seq: int) -> bool:
        """Whether the chain summary of page ``seq`` of chain ``chain_id`` may quote a
        deleted page (and must be cleared)."""
        ranges = self.scrub_chains.get(chain_id, ()) if chain_id else ()
        return any(first < seq <= upto for first, upto in ranges)

    def scrub_page(self, page: Mapping[str, Any]) -> Mapping[str, Any]:
        """A page's map (``Page.to_dict``) with its chain summary cleared if it may quote a
        deleted page (the map itself when not)."""
        return scrub_page_map(page, self.scrubbed)

    @property
    def deletions(self) -> int:
        """How many deletions the log holds (each counted once)."""
        return len(self._scrubs_by_delete)

    def segments_scrubbed_after(self, seen: int) -> set[str]:
        """The segments named by the deletions after the first ``seen`` (a tier's state
        that has seen ``seen`` deletions holds no summary older than those)."""
        return set(self._after(seen))

    def _after(self, seen: int) -> frozenset[str]:
        seen = max(seen, 0)
        found = self._scrubbed_after.get(seen)
        if found is None:
            found = frozenset(s for segs in self._scrubs_by_delete[seen:] for s in segs)
            self._scrubbed_after[seen] = found
        return found

    def deletion_key(self, seen: int) -> tuple[int, str, float] | None:
        """The key (``lsn``, ``memory_id``, ``ts``) of the ``seen``-th deletion (None for
        0): what an archived segment records of the deletions its summary had seen."""
        if seen <= 0:
            return None
        if seen > len(self._delete_keys):
            raise ValueError(f"the log holds {len(self._delete_keys)} deletions, not {seen}")
        return self._delete_keys[seen - 1]

    def segments_scrubbed_since(self, key: tuple[int, str, float] | None) -> frozenset[str]:
        """The segments named by the deletions after the one of ``key``: all of them for
        None, and for a key this log does not hold (a record from another user's log,
        through an import): the safe side."""
        place = self._delete_place.get(key) if key is not None else None
        return self._after(0 if place is None else place + 1)

    def deleted_segments(self) -> set[str]:
        """Ids of the segments deleted whole (``s3``)."""
        return {m[len("segment:") :] for m in self.deleted if m.startswith("segment:")}

    def page_deleted(self, seq: int) -> bool:
        """Whether the page of turn ``seq`` was deleted (itself or with its segment)."""
        return seq in self.deleted_pages

    # -- archive records ---------------------------------------------------------------------

    def apply_record(self, record: ArchiveRecord) -> ArchiveRecord | None:
        """``record`` as the edits leave it: None when nothing of it is left, the record
        itself when no edit touches it, else an edited copy."""
        if not self.edits:
            return record
        if isinstance(record, ArchivedSegment):
            if f"segment:{record.segment_id}" in self.deleted:
                return None
            return record.edited(
                self.deleted_pages,
                self.scrub_page,
                # Only deletions its summary had not seen when it was archived: one asked
                # for after a deletion (from the pages left) is kept.
                scrub_summary=record.segment_id
                in self.segments_scrubbed_since(record.scrubbed_through),
            )
        if isinstance(record, ArchivedPage):
            if record.seq in self.deleted_pages:
                return None
            scrubbed = self.scrub_page(record.page)
            return record if scrubbed is record.page else record.with_page(scrubbed)
        mid = record.memory_id
        if mid in self.deleted:
            return None
        fix = self.corrected.get(mid)
        if fix is None:
            return record
        return record.corrected(str(fix.new), fix.emb)

    def apply(self, record: dict[str, Any]) -> dict[str, Any] | None:
        """:meth:`apply_record` on an archive map: the map itself when no edit touches it
        (or it holds no item), None when nothing of it is left, else an edited map."""
        if not self.edits:
            return record
        typed = decode_archived(record)
        if typed is None:
            return record
        out = self.apply_record(typed)
        if out is None:
            return None
        return record if out is typed else out.encode()

    def apply_all(
        self, records: Iterable[tuple[int, dict[str, Any]]]
    ) -> Iterator[tuple[int, dict[str, Any]]]:
        """``(seq, map)`` pairs with the edits applied; records left empty are skipped."""
        for seq, rec in records:
            out = self.apply(rec)
            if out is not None:
                yield seq, out

    def apply_records(
        self, records: Iterable[tuple[int, ArchiveRecord]]
    ) -> Iterator[tuple[int, ArchiveRecord]]:
        """``(seq, record)`` pairs with the edits applied; records left empty are skipped."""
        for seq, rec in records:
            out = self.apply_record(rec)
            if out is not None:
                yield seq, out

    def page_ids(self) -> set[str]:
        """Page ids of the deleted pages."""
        return {f"p{s}" for s in self.deleted_pages}


def _erased(edit: EditRecord, *, everything: bool) -> EditRecord:
    """``edit`` without its old value (and, ``everything``, its new one too)."""
    if everything:
        return dataclasses.replace(edit, old="", new=None, emb=None, evidence=None)
    return dataclasses.replace(edit, old="")


def _edit_or_none(rec: Mapping[str, Any] | WalRecord) -> EditRecord | None:
    if isinstance(rec, Mapping):
        typed = decode_wal(rec)
        return typed if isinstance(typed, EditRecord) else None
    return rec if isinstance(rec, EditRecord) else None


def page_seq(page_id: str) -> int | None:
    """The turn seq of a page id ``p<seq>`` (None for anything else)."""
    return _page_seq(page_id)
