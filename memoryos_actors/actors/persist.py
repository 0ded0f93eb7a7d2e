"""Snapshot and WAL bookkeeping shared by the tier actors of one user.

One snapshot holds all three tiers at a consistent cut (see ``STMActor._snapshot``). After
it is durable, the WAL is cut before the first record the snapshot does not cover:

* ``turn`` records from ``keep_from_seq`` on: the pages still in STM, which MTM must be able
  to replay if it restarts on its own;
* LPM records (profiles, persona updates) with an LSN above the one the LPM state covers.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from ..store.snapshot import read_latest, write_snapshot

if TYPE_CHECKING:
    from ..store.userstore import UserStore

__all__ = ["SCHEMA_VERSION", "load_snapshot", "save_snapshot", "turn_records"]

#: Version of the snapshot layout written by this module.
SCHEMA_VERSION = 1


def load_snapshot(store: UserStore) -> tuple[dict[str, Any], int] | None:
    """The newest valid snapshot of the user, as ``(state, wal_lsn)``, or None."""
    return read_latest(store.snapshot_dir, schema_version=SCHEMA_VERSION)


def save_snapshot(
    store: UserStore, state: dict[str, Any], *, keep_from_seq: int, lpm_lsn: int
) -> int:
    """Write ``state`` durably, then cut the WAL before what it covers; return the cut LSN."""
    wal = store.wal
    cut: int | None = None
    for lsn, rec in wal.read():
        if rec.get("t") == "turn":
            if int(rec["seq"]) >= keep_from_seq:
                cut = lsn
                break
        elif lsn > lpm_lsn:
            cut = lsn
            break
    if cut is None:
        cut = wal.last_lsn + 1
    write_snapshot(store.snapshot_dir, state, wal_lsn=cut, schema_version=SCHEMA_VERSION)
    wal.truncate_before(cut)
    return cut


def turn_records(store: UserStore, after_seq: int, upto_seq: int) -> Iterator[dict[str, Any]]:
    """WAL ``turn`` records with ``after_seq < seq <= upto_seq``, in order."""
    for _lsn, rec in store.wal.read():
        if rec.get("t") == "turn":
            seq = int(rec["seq"])
            if after_seq < seq <= upto_seq:
                yield rec


def last_turn_seq(store: UserStore, snapshot_seq: int) -> int:
    """The highest turn seq durable for the user (WAL or snapshot)."""
    last = snapshot_seq
    for _lsn, rec in store.wal.read():
        if rec.get("t") == "turn":
            last = max(last, int(rec["seq"]))
    return last


def import_state(store: UserStore, state: dict[str, Any]) -> None:
    """Make ``state`` (an export's tiers) the user's newest snapshot, with an empty WAL tail."""
    write_snapshot(
        store.snapshot_dir, state, wal_lsn=store.wal.last_lsn + 1, schema_version=SCHEMA_VERSION
    )
