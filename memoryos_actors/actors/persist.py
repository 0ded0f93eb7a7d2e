"""Snapshot and WAL bookkeeping shared by the tier actors of one user.

One snapshot holds all three tiers at a consistent cut (see ``STMActor._snapshot``). It
covers the WAL up to the record before the first one it does not cover:

* ``turn`` records from ``keep_from_seq`` on: the pages still in STM, which MTM must be able
  to replay if it restarts on its own;
* LPM records (profiles, persona updates) with an LSN above the one the LPM state covers.

The store keeps the WAL back to the *previous* snapshot, so a damaged newest snapshot falls
back a generation without losing anything. Replay is idempotent in every tier (by turn seq
for STM and MTM, by LSN for LPM), so records a snapshot already covers are skipped.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..store.userstore import Recovered, UserStore

__all__ = [
    "SCHEMA_VERSION",
    "import_state",
    "last_turn_seq",
    "recover",
    "save_snapshot",
    "turn_records",
]

#: Version of the snapshot layout written by this module.
SCHEMA_VERSION = 1


def recover(store: UserStore) -> Recovered:
    """The newest readable snapshot of the user and the WAL records after it."""
    return store.load(schema_version=SCHEMA_VERSION)


def save_snapshot(
    store: UserStore, state: dict[str, Any], *, keep_from_seq: int, lpm_lsn: int
) -> int:
    """Write ``state`` durably as covering the WAL up to the LSN returned."""
    cut: int | None = None
    for lsn, rec in store.wal.read():
        if rec.get("t") == "turn":
            if int(rec["seq"]) >= keep_from_seq:
                cut = lsn
                break
        elif lsn > lpm_lsn:
            cut = lsn
            break
    cover = store.wal.last_lsn if cut is None else cut - 1
    store.checkpoint(state, wal_lsn=cover, schema_version=SCHEMA_VERSION)
    return cover


def turn_records(store: UserStore, after_seq: int, upto_seq: int) -> Iterator[dict[str, Any]]:
    """WAL ``turn`` records with ``after_seq < seq <= upto_seq``, in order."""
    for _lsn, rec in store.wal.read():
        if rec.get("t") == "turn":
            seq = int(rec["seq"])
            if after_seq < seq <= upto_seq:
                yield rec


def last_turn_seq(records: tuple[tuple[int, dict[str, Any]], ...], snapshot_seq: int) -> int:
    """The highest turn seq among ``records`` and the snapshot."""
    last = snapshot_seq
    for _lsn, rec in records:
        if rec.get("t") == "turn":
            last = max(last, int(rec["seq"]))
    return last


def import_state(store: UserStore, state: dict[str, Any]) -> None:
    """Make ``state`` (an export's tiers) the user's snapshot over an empty WAL.

    LSNs of the exporting store mean nothing here, so the LPM state is marked as covering
    none of this store's WAL.
    """
    lpm = dict(state["lpm"])
    lpm["lsn"] = 0
    store.checkpoint({**state, "lpm": lpm}, wal_lsn=store.wal.last_lsn,
                     schema_version=SCHEMA_VERSION)
