"""Damaged files, as media damage leaves them: bytes flipped in the middle of a user's WAL,
archive or snapshots. Opening refuses (naming the file, the byte offset and how many
intact records follow) and changes nothing; a repair keeps every intact record; read-only
commands never change a file; one user's damage never stops the others being counted.

Users are written by a process that exits without closing (as a killed daemon leaves
them): every acknowledged turn is in the WAL, no shutdown snapshot covers them.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import msgpack
import pytest
from faultutil import check_ledger, small_config, turn_query
from inprocess import Ran, run_cli

from memoryos_actors import (
    CorruptDataError,
    ManualClock,
    MemoryOS,
    ReadOnlyError,
    UnknownUser,
    UserProfile,
)
from memoryos_actors.store._frames import HEADER_SIZE
from memoryos_actors.store.snapshot import list_snapshots
from memoryos_actors.store.userstore import (
    ARCHIVE_FILE,
    SNAPSHOT_DIR,
    WAL_FILE,
    user_exists,
    user_path,
)

VIC, ANN, BOB = "vic", "ann", "bob"
_REPO = Path(__file__).resolve().parents[2]
_FRAME = struct.Struct(">IIQ")


def _config(**changes: Any) -> Any:
    return small_config(**{"fsync": "always", "snapshot_every_turns": 10_000, **changes})


def _write_and_die(data_dir: Path, turns: dict[str, int], **config: Any) -> dict[str, dict]:
    """Store ``turns[user]`` turns per user in a child process that then exits without
    closing; return each user's ledger (page id -> query)."""
    script = textwrap.dedent("""
        import json, os, sys
        sys.path[:0] = [sys.argv[3]]
        from faultutil import small_config, turn_query
        from memoryos_actors import ManualClock, MemoryOS
        cfg = small_config(**json.loads(sys.argv[2]))
        mem = MemoryOS.open(sys.argv[1], cfg, clock=ManualClock(1_700_000_000.0))
        ledgers = {}
        for user, n in json.loads(sys.argv[4]).items():
            ledgers[user] = {mem.add_turn(user, turn_query(user, i), "ok"): turn_query(user, i)
                             for i in range(1, n + 1)}
        mem.flush()
        print(json.dumps(ledgers), flush=True)
        os._exit(0)  # no close: no shutdown snapshot, as after kill -9
    """)
    cfg = {"fsync": "always", "snapshot_every_turns": 10_000, **config}
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            script,
            str(data_dir),
            json.dumps(cfg),
            str(Path(__file__).parent),
            json.dumps(turns),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**os.environ, "PYTHONPATH": str(_REPO)},
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def _frames(path: Path) -> list[tuple[int, int, int, dict]]:
    """``(seq, offset, frame length, record)`` of every frame of an undamaged log."""
    data = path.read_bytes()
    out, at = [], HEADER_SIZE
    while at < len(data):
        length, _crc, seq = _FRAME.unpack_from(data, at)
        payload = data[at + _FRAME.size : at + _FRAME.size + length]
        out.append((seq, at, _FRAME.size + length, msgpack.unpackb(payload, raw=False)))
        at += _FRAME.size + length
    return out


def _flip(path: Path, offset: int, n: int = 16) -> None:
    data = bytearray(path.read_bytes())
    for i in range(offset, offset + n):
        data[i] ^= 0xFF
    path.write_bytes(bytes(data))


def _damage_frame(path: Path, index: int) -> tuple[int, int, int, dict]:
    """Flip 16 bytes inside the payload of frame ``index``; return that frame."""
    frame = _frames(path)[index]
    assert frame[2] > _FRAME.size + 20, "the frame is too short to damage inside"
    _flip(path, frame[1] + _FRAME.size + 2)
    return frame


def _hashes(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def _cli(*args: str, data_dir: Path) -> Ran:
    # The command's output and exit code are what is checked: run in this process.
    return run_cli(*args, data_dir=data_dir, env={"MEMORYOS_LOG_LEVEL": "critical"})


# -- refusal -------------------------------------------------------------------------------


def test_wal_damage_in_the_middle_is_refused_naming_file_offset_and_count(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    ledgers = _write_and_die(data_dir, {VIC: 60, ANN: 5})
    wal = user_path(data_dir, VIC) / WAL_FILE
    frames = _frames(wal)
    middle = len(frames) // 2
    _seq, offset, _len, _rec = _damage_frame(wal, middle)
    before = _hashes(data_dir)

    with MemoryOS.open(data_dir, _config(), clock=ManualClock(1.8e9)) as mem:
        with pytest.raises(CorruptDataError) as err:
            mem.user_state(VIC)
        assert err.value.path == str(wal) and err.value.user_id == VIC
        assert err.value.offset == offset
        assert err.value.intact_after == len(frames) - middle - 1
        message = str(err.value)
        assert str(wal) in message and f"byte {offset}" in message
        assert f"{len(frames) - middle - 1} intact records after it" in message
        assert "memoryos repair vic" in message
        with pytest.raises(CorruptDataError):  # stable: never started empty
            mem.add_turn(VIC, "after the damage", "ok")
        assert mem.stats()["damaged_users"] == 1 and VIC in mem.stats()["damaged"]
        # Other users are served.
        assert check_ledger(mem, ANN, ledgers[ANN]) == []
        assert mem.add_turn(ANN, "still here", "yes") == "p6"
    # Nothing was cut, rewritten or copied, by the refusal or by the close.
    after = _hashes(data_dir)
    after.pop("LOCK")
    before.pop("LOCK")
    assert {k: v for k, v in after.items() if not k.startswith(f"users/u-{ANN}")} == {
        k: v for k, v in before.items() if not k.startswith(f"users/u-{ANN}")
    }


def test_a_whole_last_wal_record_with_flipped_bytes_is_refused_and_repair_cuts_it(
    tmp_path: Path,
) -> None:
    """Media damage in the WAL's last record (a turn, written whole and fsynced) is not a
    crash's torn write: reads and writers refuse and offer the repair, which cuts it
    (#41 item 14)."""
    data_dir = tmp_path / "data"
    _write_and_die(data_dir, {VIC: 12, ANN: 3})
    wal = user_path(data_dir, VIC) / WAL_FILE
    frames = _frames(wal)
    # As a process that died right after storing turn 12 leaves it: its record is last.
    index = next(i for i, f in enumerate(frames) if f[3].get("t") == "turn" and f[3]["seq"] == 12)
    _seq, offset, length, _rec = frames[index]
    with open(wal, "r+b") as f:
        f.truncate(offset + length)
    _damage_frame(wal, index)
    damaged = wal.read_bytes()
    before = _hashes(user_path(data_dir, VIC))

    refused = _cli("stats", "--user", VIC, data_dir=data_dir)
    assert refused.returncode == 2 and "CorruptDataError" in refused.stderr
    assert f"damaged at byte {offset} (checksum mismatch)" in refused.stderr
    assert "memoryos repair vic" in refused.stderr
    with MemoryOS.open(data_dir, _config()) as mem:
        with pytest.raises(CorruptDataError, match="memoryos repair vic") as err:
            mem.user_state(VIC)
        assert err.value.path == str(wal) and err.value.offset == offset
        assert mem.user_state(ANN).turns == 3  # the others are served
    assert _hashes(user_path(data_dir, VIC)) == before  # nothing cut, nothing copied

    done = _cli("repair", VIC, data_dir=data_dir)
    assert done.returncode == 0, done.stderr
    assert f"damaged end cut at byte {offset}" in done.stdout
    (backup,) = wal.parent.glob("wal.log.corrupt-*")
    assert backup.read_bytes() == damaged
    with MemoryOS.open(data_dir, _config()) as mem:
        assert sorted(mem.stored_page_ids(VIC), key=lambda p: int(p[1:])) == [
            f"p{i}" for i in range(1, 12)
        ]


def test_archive_damage_in_the_middle_is_refused_and_nothing_is_changed(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    _write_and_die(data_dir, {VIC: 120})
    archive = user_path(data_dir, VIC) / ARCHIVE_FILE
    frames = _frames(archive)
    assert len(frames) >= 6, "the scenario needs evictions"
    middle = len(frames) // 2
    _seq, offset, _len, _rec = _damage_frame(archive, middle)
    before = _hashes(user_path(data_dir, VIC))

    with MemoryOS.open(data_dir, _config()) as mem:
        with pytest.raises(CorruptDataError, match="archive.log") as err:
            mem.retrieve(VIC, "glacier hike")
        assert err.value.offset == offset
        assert err.value.intact_after == len(frames) - middle - 1
    assert _hashes(user_path(data_dir, VIC)) == before


# -- repair --------------------------------------------------------------------------------


def test_repair_keeps_every_intact_turn_before_and_after_a_lost_one_and_a_backup(
    tmp_path: Path,
) -> None:
    """The CLI: `memoryos repair vic` after the WAL record of one turn was damaged."""
    data_dir = tmp_path / "data"
    ledger = _write_and_die(data_dir, {VIC: 60})[VIC]
    wal = user_path(data_dir, VIC) / WAL_FILE
    frames = _frames(wal)
    # Turn 57 is still in STM (the last 7 turns): its WAL record is its only copy.
    index = next(i for i, f in enumerate(frames) if f[3].get("t") == "turn" and f[3]["seq"] == 57)
    _damage_frame(wal, index)
    damaged = wal.read_bytes()
    refused = _cli("stats", "--user", VIC, data_dir=data_dir)
    assert refused.returncode == 2 and "CorruptDataError" in refused.stderr
    assert "memoryos repair vic" in refused.stderr

    done = _cli("repair", VIC, data_dir=data_dir)
    assert done.returncode == 0, done.stderr
    assert "turns lost: p57" in done.stdout
    assert f"kept {len(frames) - 1} intact records, lost 1" in done.stdout
    (backup,) = wal.parent.glob("wal.log.corrupt-*")
    assert backup.read_bytes() == damaged  # the damaged original, byte for byte

    lost = {"p57"}
    kept = {pid: q for pid, q in ledger.items() if pid not in lost}
    with MemoryOS.open(data_dir, _config()) as mem:
        held = {p.page_id: p.query for p in mem.user_state(VIC).stm}
        for seg in mem.user_state(VIC).segments:
            held.update((p.page_id, p.query) for p in seg.pages)
        for rec in mem.archive(VIC):
            pages = rec["segment"]["pages"] if rec["t"] == "segment" else [rec["page"]]
            held.update((p["page_id"], p["query"]) for p in pages)
        assert held == kept  # every intact turn, with its own text; only p57 is gone
        assert mem.add_turn(VIC, "after the repair", "ok") == "p61"  # numbering goes on
        mem.passivate(VIC)  # a snapshot over the repaired WAL
    with MemoryOS.open(data_dir, _config()) as mem:
        ids = set(mem.stored_page_ids(VIC))
    assert ids == set(kept) | {"p61"}
    again = _cli("repair", VIC, data_dir=data_dir)
    assert again.returncode == 0 and "nothing to repair" in again.stdout


def test_repair_user_on_a_running_system_brings_the_user_back_whole(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    ledgers = _write_and_die(data_dir, {VIC: 40, ANN: 3})
    wal = user_path(data_dir, VIC) / WAL_FILE
    # A meta record (a turn's chain meta data): every turn stays.
    index = next(
        i for i, f in enumerate(_frames(wal)) if f[3].get("t") == "meta" and f[3]["seq"] == 20
    )
    _damage_frame(wal, index)
    with MemoryOS.open(data_dir, _config()) as mem:
        with pytest.raises(CorruptDataError):
            mem.user_state(VIC)
        report = mem.repair_user(VIC)
        assert report.changed and report.lost_records == 1 and report.lost_turns == ()
        (wal_file,) = report.files
        assert wal_file.path == str(wal) and Path(wal_file.backup).exists()
        assert wal_file.kept_records == len(_frames(wal)) - 1
        assert mem.stats()["damaged_users"] == 0
        assert check_ledger(mem, VIC, ledgers[VIC]) == []
        assert mem.add_turn(VIC, "and on", "ok") == "p41"
        assert mem.repair_user(ANN).changed is False  # a healthy user is left alone
        with pytest.raises(UnknownUser):
            mem.repair_user("nobody")


def test_repair_salvages_an_archive_damaged_in_the_middle(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    ledger = _write_and_die(data_dir, {VIC: 120})[VIC]
    archive = user_path(data_dir, VIC) / ARCHIVE_FILE
    frames = _frames(archive)
    rec_seq, _off, _len, _rec = _damage_frame(archive, len(frames) // 2)
    with MemoryOS.open(data_dir, _config()) as mem:
        report = mem.repair_user(VIC)
        assert Path(report.files[0].path).name == ARCHIVE_FILE
        assert report.files[0].kept_records == len(frames) - 1
        assert report.files[0].lost_seqs == ((rec_seq, rec_seq),)
        held = mem.stored_page_ids(VIC)
        # Every archived page kept; the damaged record's pages come back from the WAL,
        # which still holds their turns; none is held twice.
        assert sorted(held) == sorted(ledger)


def test_repair_moves_unreadable_snapshots_aside_and_keeps_what_the_wal_holds(
    tmp_path: Path,
) -> None:
    data_dir = tmp_path / "data"
    with MemoryOS.open(data_dir, _config(snapshot_every_turns=20)) as mem:
        for n in range(1, 51):
            mem.add_turn(VIC, turn_query(VIC, n), "ok")
    snaps = list_snapshots(user_path(data_dir, VIC) / SNAPSHOT_DIR)
    assert len(snaps) == 2
    for _gen, path in snaps:
        _flip(path, path.stat().st_size // 2)
    with MemoryOS.open(data_dir, _config()) as mem:
        with pytest.raises(CorruptDataError, match="no readable snapshot"):
            mem.user_state(VIC)
        report = mem.repair_user(VIC)
        moved = [f for f in report.files if f.action == "moved_aside"]
        assert sorted(Path(f.path).name for f in moved) == sorted(p.name for _g, p in snaps)
        assert all(Path(f.backup).exists() for f in moved)
        state = mem.user_state(VIC)  # opens again, with the turns the WAL still holds
        assert state.turns == 50 and state.stm
        assert mem.add_turn(VIC, "again", "ok") == "p51"


# -- read-only -----------------------------------------------------------------------------


def test_read_only_commands_change_no_file_and_leave_a_torn_tail_to_the_writer(
    tmp_path: Path,
) -> None:
    data_dir = tmp_path / "data"
    _write_and_die(data_dir, {VIC: 30, ANN: 4})
    wal = user_path(data_dir, VIC) / WAL_FILE
    intact = wal.stat().st_size
    with open(wal, "ab") as f:  # a torn last write, as a crash mid-append leaves it
        f.write(_FRAME.pack(400, 0, len(_frames(wal)) + 1) + b"half")
    before = _hashes(data_dir)

    for args in (
        ["stats", "--user", VIC],
        ["inspect", VIC],
        ["inspect", VIC, "--json"],
        ["export", VIC, str(tmp_path / "vic.json")],
        ["stats"],
        ["stats", "--prometheus"],
    ):
        done = _cli(*args, data_dir=data_dir)
        assert done.returncode == 0, (args, done.stderr)
        assert _hashes(data_dir) == before, f"{args} changed the data directory"
    stats = json.loads(_cli("stats", "--user", VIC, data_dir=data_dir).stdout)
    assert stats["turns"] == 30

    with MemoryOS.open(data_dir, _config()) as mem:  # a writer cuts the torn tail
        assert mem.user_state(VIC).turns == 30
    assert wal.stat().st_size == intact


def test_a_read_only_system_refuses_writes_and_reads_beside_a_writer(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    with pytest.raises(Exception, match="no data directory"):
        MemoryOS.open(data_dir, _config(), read_only=True)
    assert not data_dir.exists()
    with MemoryOS.open(data_dir, _config()) as writer:
        for n in range(1, 11):
            writer.add_turn(VIC, turn_query(VIC, n), "ok")
        writer.flush()
        with MemoryOS.open(data_dir, _config(), read_only=True) as reader:  # no lock
            assert reader.read_only
            assert reader.user_state(VIC).turns == 10
            for call in (
                lambda: reader.add_turn(VIC, "q", "r"),
                lambda: reader.chat(VIC, "hello"),
                lambda: reader.set_user_profile(VIC, UserProfile(name="V")),
                lambda: reader.forget_user(VIC),
                lambda: reader.import_user(tmp_path / "x.json"),
                lambda: reader.delete_memory(VIC, "page:p1"),
                lambda: reader.repair_user(VIC),
            ):
                with pytest.raises(ReadOnlyError, match="read-only"):
                    call()
            with pytest.raises(UnknownUser):
                reader.user_state("nobody")
            assert not user_exists(data_dir, "nobody")
        assert writer.add_turn(VIC, "the writer goes on", "ok") == "p11"


# -- one user's damage stays that user's ---------------------------------------------------


def test_global_stats_report_a_damaged_user_and_count_the_others(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    with MemoryOS.open(data_dir, _config(snapshot_every_turns=5)) as mem:
        for user, n in ((VIC, 12), (ANN, 7), (BOB, 3)):
            for i in range(1, n + 1):
                mem.add_turn(user, turn_query(user, i), "ok")
    for _gen, path in list_snapshots(user_path(data_dir, VIC) / SNAPSHOT_DIR):
        _flip(path, path.stat().st_size // 2)

    done = _cli("stats", data_dir=data_dir)
    assert done.returncode == 0, done.stderr
    stats = json.loads(done.stdout)
    assert list(stats["damaged"]) == [VIC] and stats["damaged_users"] == 1
    assert "snapshot" in stats["damaged"][VIC]
    assert stats["stored"]["users"] == 2 and stats["stored"]["turns"] == 10
    prom = _cli("stats", "--prometheus", data_dir=data_dir)
    assert prom.returncode == 0, prom.stderr
    assert 'memoryos_user_damaged{user="vic"} 1' in prom.stdout
    assert "memoryos_damaged_users 1" in prom.stdout


def test_repair_of_an_archive_record_the_wal_no_longer_backs_names_every_lost_turn(
    tmp_path: Path,
) -> None:
    data_dir = tmp_path / "data"
    # Snapshots every 40 turns: the WAL is cut behind the previous one, so the turns of
    # the first archive records are in no WAL any more; the archive alone holds them.
    ledger = _write_and_die(data_dir, {VIC: 160}, snapshot_every_turns=40)[VIC]
    wal_turns = {
        int(rec["seq"])
        for _s, _o, _l, rec in _frames(user_path(data_dir, VIC) / WAL_FILE)
        if rec.get("t") == "turn"
    }
    archive = user_path(data_dir, VIC) / ARCHIVE_FILE
    frames = _frames(archive)

    def seqs(rec: dict[str, Any]) -> set[int]:
        if rec.get("t") == "segment":
            return {int(p["seq"]) for p in rec["segment"]["pages"]}
        return {int(rec["page"]["seq"])} if rec.get("t") == "page" else set()

    damaged = next(f for f in frames[1:-1] if seqs(f[3]) and f[2] > _FRAME.size + 20)
    pages = seqs(damaged[3])
    assert not pages & wal_turns, "the damaged record's turns must be in no WAL"
    _damage_frame(archive, frames.index(damaged))
    with MemoryOS.open(data_dir, _config()) as mem:
        report = mem.repair_user(VIC)
        held = set(mem.stored_page_ids(VIC))
    lost = {pid for pid in ledger if pid not in held}
    assert lost == {f"p{seq}" for seq in pages}
    # The report names every acknowledged turn it could not bring back, and only those.
    assert set(report.lost_turns) == lost
    assert any("turns lost" in note for note in report.notes)
