"""Damaged files in one user's directory: the user's data comes back intact, or a typed
error names the damaged file; the system never starts that user empty, and every other
user keeps being served."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from faultutil import check_ledger, small_config, turn_query

from memoryos_actors import CorruptDataError, ManualClock, MemoryConfig, MemoryOS, MemoryOSError
from memoryos_actors.store.snapshot import list_snapshots, read_snapshot, write_snapshot
from memoryos_actors.store.userstore import META_FILE, SNAPSHOT_DIR, WAL_FILE, user_path

VICTIM, BYSTANDER = "victim", "bystander"
CLOCK_START = 1_700_000_000.0


def _config() -> MemoryConfig:
    return small_config(snapshot_every_turns=30)


def _populate(data_dir: Path) -> dict[str, dict[str, str]]:
    """Store turns for both users and close cleanly; return the ledgers."""
    ledgers: dict[str, dict[str, str]] = {VICTIM: {}, BYSTANDER: {}}
    with MemoryOS.open(data_dir, _config(), clock=ManualClock(CLOCK_START)) as mem:
        for n in range(1, 101):
            ledgers[VICTIM][mem.add_turn(VICTIM, turn_query(VICTIM, n), "ok")] = turn_query(
                VICTIM, n
            )
            if n <= 30:
                ledgers[BYSTANDER][mem.add_turn(BYSTANDER, turn_query(BYSTANDER, n), "ok")] = (
                    turn_query(BYSTANDER, n)
                )
    return ledgers


def _flip(path: Path, offset: int, n: int = 4) -> None:
    data = bytearray(path.read_bytes())
    for i in range(offset, min(offset + n, len(data))):
        data[i] ^= 0xFF
    path.write_bytes(bytes(data))


def truncate_wal_tail(udir: Path) -> None:
    wal = udir / WAL_FILE
    data = wal.read_bytes()
    wal.write_bytes(data[:-5])


def flip_wal_middle(udir: Path) -> None:
    wal = udir / WAL_FILE
    _flip(wal, wal.stat().st_size // 2)


def flip_newest_snapshot(udir: Path) -> None:
    snaps = list_snapshots(udir / SNAPSHOT_DIR)
    assert len(snaps) >= 2, "the scenario needs a previous generation to fall back on"
    newest = snaps[0][1]
    _flip(newest, newest.stat().st_size - 40)


def remove_snapshot_dir(udir: Path) -> None:
    shutil.rmtree(udir / SNAPSHOT_DIR)


def newer_schema_snapshot(udir: Path) -> None:
    snap = read_snapshot(list_snapshots(udir / SNAPSHOT_DIR)[0][1], schema_version=2**31)
    write_snapshot(udir / SNAPSHOT_DIR, snap.state, snap.wal_lsn, snap.schema_version + 1)


def garbage_meta(udir: Path) -> None:
    (udir / META_FILE).write_bytes(b"\x00{not json at all")


Damage = Callable[[Path], None]

#: damage -> (must the data come back intact?, file name a refusal must name or None)
CASES: dict[str, tuple[Damage, bool, str | None]] = {
    "truncated_wal_tail": (truncate_wal_tail, True, None),
    "flipped_bytes_in_wal_middle": (flip_wal_middle, False, WAL_FILE),
    "flipped_bytes_in_newest_snapshot": (flip_newest_snapshot, True, None),
    "missing_snapshot_dir": (remove_snapshot_dir, False, WAL_FILE),
    "snapshot_from_newer_schema": (newer_schema_snapshot, False, "snapshot-"),
    "garbage_meta_json": (garbage_meta, False, META_FILE),
}
#: Damage that can only be refused (intact data is impossible).
MUST_REFUSE = {"snapshot_from_newer_schema", "garbage_meta_json"}


@pytest.mark.parametrize("case", sorted(CASES))
def test_damaged_user_files_come_back_intact_or_are_refused_naming_the_file(
    tmp_path: Path, case: str
) -> None:
    damage, must_be_intact, names = CASES[case]
    data_dir = tmp_path / "data"
    ledgers = _populate(data_dir)
    udir = user_path(data_dir, VICTIM)
    damage(udir)
    files_after_damage = sorted(p.name for p in udir.rglob("*"))

    with MemoryOS.open(data_dir, _config(), clock=ManualClock(CLOCK_START)) as mem:
        refused: MemoryOSError | None = None
        try:
            problems = check_ledger(mem, VICTIM, ledgers[VICTIM])
        except MemoryOSError as exc:
            refused = exc
        if refused is None:
            assert case not in MUST_REFUSE, f"{case}: damaged data was read without complaint"
            assert problems == [], f"{case}: started with wrong data instead of refusing"
        else:
            assert not must_be_intact, f"{case}: refused recoverable data: {refused}"
            assert isinstance(refused, CorruptDataError), repr(refused)
            assert names is not None and names in str(refused), str(refused)
            # Refusing is stable: a second call does not start the user empty.
            with pytest.raises(CorruptDataError):
                mem.add_turn(VICTIM, "after the damage", "ok")
            assert sorted(p.name for p in udir.rglob("*")) == files_after_damage
        # Other users are served as before.
        assert check_ledger(mem, BYSTANDER, ledgers[BYSTANDER]) == []
        assert mem.add_turn(BYSTANDER, "still here", "yes") == f"p{len(ledgers[BYSTANDER]) + 1}"
        assert mem.retrieve(BYSTANDER, "glacier hike").stm
        mem.export_user(BYSTANDER, tmp_path / "bystander.json")
        assert mem.import_user(tmp_path / "bystander.json", "bystander-copy") == "bystander-copy"
