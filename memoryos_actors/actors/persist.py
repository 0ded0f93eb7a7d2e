"""Snapshot and WAL bookkeeping shared by the tier actors of one user: the WAL records of
a turn and of its meta data (:func:`turn_record`, :func:`meta_record`, read back by
:func:`page_from_record`), the snapshot, and recovery.

One snapshot holds all three tiers at a consistent cut (see ``STMActor._snapshot``). It
covers the WAL up to the record before the first one it does not cover:

* ``turn`` and ``meta`` records from ``keep_from_seq`` on: the pages still in STM or in its
  outbox, which MTM must be able to replay if it restarts on its own;
* LPM records (profiles, persona updates) with an LSN above the one the LPM state covers.

The store keeps the WAL back to the *previous* snapshot, so a damaged newest snapshot falls
back a generation without losing anything. Replay is idempotent in every tier (by turn seq
for STM and MTM, by LSN for LPM), so records a snapshot already covers are skipped.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from ..messages import Page
from ..store.formats import MetaRecord, TurnRecord, WalRecord

if TYPE_CHECKING:
    from ..store.snapshot import Recovered
    from ..store.userstore import UserStore

__all__ = [
    "SCHEMA_VERSION",
    "import_state",
    "last_turn_seq",
    "meta_record",
    "recover",
    "save_snapshot",
    "page_from_record",
    "rebind_user",
    "snapshot_stm_pages",
    "turn_record",
    "wal_pages",
]

#: Version of the snapshot layout written by this module.
SCHEMA_VERSION = 1


def turn_record(page: Page, turn_key: str = "") -> TurnRecord:
    """The WAL record of one turn."""
    return TurnRecord.of_page(page, turn_key)


def meta_record(page: Page) -> MetaRecord:
    """The WAL record of a page's dialogue-chain meta data."""
    return MetaRecord.of_page(page)


def recover(store: UserStore) -> Recovered:
    """The newest readable snapshot of the user and the WAL records after it."""
    return store.load(schema_version=SCHEMA_VERSION)


def save_snapshot(
    store: UserStore, state: dict[str, Any], *, keep_from_seq: int, lpm_lsn: int
) -> int:
    """Write ``state`` durably as covering the WAL up to the LSN returned."""
    cut: int | None = None
    for lsn, rec in store.wal.records():
        # Records that belong to a page are kept while the page may still need replay.
        if isinstance(rec, (TurnRecord, MetaRecord)):
            if rec.seq >= keep_from_seq:
                cut = lsn
                break
        elif lsn > lpm_lsn:
            cut = lsn
            break
    cover = store.wal.last_lsn if cut is None else cut - 1
    store.checkpoint(state, wal_lsn=cover, schema_version=SCHEMA_VERSION)
    return cover


def page_from_record(user_id: str, rec: TurnRecord) -> Page:
    """Rebuild the page of a WAL ``turn`` record (without meta data)."""
    return rec.page(user_id)


def wal_pages(
    store: UserStore,
    after_seq: int,
    upto_seq: int,
    stm_capacity: int,
    records: Iterable[tuple[int, WalRecord]] | None = None,
    held: Mapping[int, Page] | None = None,
) -> list[tuple[Page, float]]:
    """Pages of the turns with ``after_seq < seq <= upto_seq``, in turn order, each with
    its meta data when the WAL has it and with its MTM insert time: the time of the turn
    ``stm_capacity`` later, which pushed it out of STM (its own time if that turn is not
    in the WAL).

    A page comes from its WAL ``turn`` record or, when no WAL record holds it, from
    ``held``: the pages the snapshot's STM held. Those may have no turn record anywhere
    (an import writes its state over an empty WAL; a repair cuts a damaged record the
    snapshot still holds; a machine crash can leave a WAL that ends before its snapshot),
    and a page pushed out of STM since must still reach MTM. One read of the WAL; none
    when ``records`` (the WAL tail loaded at activation) already holds every page asked
    for."""
    if records is not None:
        pages = _wal_pages(store.user_id, records, after_seq, upto_seq, stm_capacity, held)
        if len(pages) == max(0, upto_seq - after_seq):
            return pages
    return _wal_pages(store.user_id, store.wal.records(), after_seq, upto_seq, stm_capacity, held)


def _wal_pages(
    user_id: str,
    records: Iterable[tuple[int, WalRecord]],
    after_seq: int,
    upto_seq: int,
    stm_capacity: int,
    held: Mapping[int, Page] | None = None,
) -> list[tuple[Page, float]]:
    turns: dict[int, TurnRecord] = {}
    metas: dict[int, MetaRecord] = {}
    times: dict[int, float] = {}
    for _lsn, rec in records:
        if isinstance(rec, TurnRecord):
            if after_seq < rec.seq:
                times[rec.seq] = float(rec.timestamp)
            if after_seq < rec.seq <= upto_seq:
                turns[rec.seq] = rec
        elif isinstance(rec, MetaRecord) and after_seq < rec.seq <= upto_seq:
            metas[rec.seq] = rec
    out = []
    for seq in sorted(turns.keys() | _held_seqs(held, turns, after_seq, upto_seq)):
        turn = turns.get(seq)
        if turn is not None:
            page = turn.page(user_id)
        else:
            assert held is not None  # _held_seqs gives none without it
            page = held[seq]
        meta = metas.get(seq)
        if meta is not None:
            page = dataclasses.replace(
                page,
                meta_chain=meta.meta_chain,
                chain_id=meta.chain_id,
                keywords=frozenset(meta.keywords),
            )
        out.append((page, times.get(seq + stm_capacity, page.timestamp)))
    return out


def _held_seqs(
    held: Mapping[int, Page] | None, turns: Mapping[int, Any], after_seq: int, upto_seq: int
) -> set[int]:
    """Seqs of ``held`` pages in ``(after_seq, upto_seq]`` that no WAL turn record holds."""
    if not held:
        return set()
    return {seq for seq in held if after_seq < seq <= upto_seq and seq not in turns}


def snapshot_stm_pages(state: Mapping[str, Any] | None) -> dict[int, Page]:
    """The pages a snapshot's STM held, by seq (none without a snapshot)."""
    if state is None:
        return {}
    pages = (Page.from_dict(p) for p in state["stm"]["pages"])
    return {page.seq: page for page in pages}


def last_turn_seq(records: Iterable[tuple[int, WalRecord]], snapshot_seq: int) -> int:
    """The highest turn seq among ``records`` and the snapshot."""
    last = snapshot_seq
    for _lsn, rec in records:
        if isinstance(rec, TurnRecord):
            last = max(last, rec.seq)
    return last


def rebind_user(obj: Any, old: str, new: str) -> Any:
    """A copy of ``obj`` (an export's state or archive record) in which every
    ``"user_id": old`` entry says ``new``: pages and the persona name their owner."""
    if isinstance(obj, dict):
        return {
            k: (new if k == "user_id" and v == old else rebind_user(v, old, new))
            for k, v in obj.items()
        }
    if isinstance(obj, list):
        return [rebind_user(v, old, new) for v in obj]
    return obj


def import_state(store: UserStore, state: dict[str, Any]) -> None:
    """Make ``state`` (an export's tiers) the user's snapshot over an empty WAL.

    LSNs of the exporting store mean nothing here, so the LPM state is marked as covering
    none of this store's WAL.
    """
    lpm = dict(state["lpm"])
    lpm["lsn"] = 0
    # Edits keep their history; their LSNs were the exporting store's.
    lpm["edits"] = [{**e, "lsn": 0} for e in lpm.get("edits") or ()]
    store.checkpoint(
        {**state, "lpm": lpm}, wal_lsn=store.wal.last_lsn, schema_version=SCHEMA_VERSION
    )
