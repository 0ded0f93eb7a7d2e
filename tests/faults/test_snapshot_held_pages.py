"""Pages that only a snapshot holds survive the next crash (#41, items 1 and 2).

A snapshot's STM can hold pages whose WAL ``turn`` records exist nowhere: an import writes
its state as a snapshot over an empty WAL, a repair cuts a damaged WAL record the snapshot
still holds, and a machine crash can leave a WAL that ends before its snapshot. When later
turns push those pages out of STM and the process dies before the next snapshot, recovery
must place them from the snapshot, not look for them in the WAL only.

Each scenario ends in a child process that stores turns, flushes and exits without closing
(``os._exit``: no shutdown snapshot, as after kill -9); the parent reopens the data
directory and compares every acknowledged page with what is held.
"""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import msgpack
from faultutil import check_ledger, small_config, turn_query

from memoryos_actors import MemoryOS
from memoryos_actors.store._frames import HEADER_SIZE
from memoryos_actors.store.userstore import WAL_FILE, UserStore, user_path

_REPO = Path(__file__).resolve().parents[2]
_FRAME = struct.Struct(">IIQ")
USER = "held"
#: No snapshot but the ones each scenario takes on purpose (close, passivation, import).
_CFG: dict[str, Any] = {"fsync": "always", "snapshot_every_turns": 10_000}


def _config() -> Any:
    return small_config(**_CFG)


def _write_and_die(data_dir: Path, first: int, n: int) -> dict[str, str]:
    """Store turns ``first..first+n-1`` of :data:`USER` in a child that flushes and exits
    without closing; return its ledger (page id -> query)."""
    script = textwrap.dedent("""
        import json, os, sys
        sys.path[:0] = [sys.argv[3]]
        from faultutil import small_config, turn_query
        from memoryos_actors import MemoryOS
        mem = MemoryOS.open(sys.argv[1], small_config(**json.loads(sys.argv[2])))
        first, n, user = int(sys.argv[4]), int(sys.argv[5]), sys.argv[6]
        ledger = {mem.add_turn(user, turn_query(user, i), "ok"): turn_query(user, i)
                  for i in range(first, first + n)}
        mem.flush()
        print(json.dumps(ledger), flush=True)
        os._exit(0)  # no close: no shutdown snapshot, as after kill -9
    """)
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            script,
            str(data_dir),
            json.dumps(_CFG),
            str(Path(__file__).parent),
            str(first),
            str(n),
            USER,
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**os.environ, "PYTHONPATH": str(_REPO)},
    )
    assert done.returncode == 0, done.stderr
    ledger: dict[str, str] = json.loads(done.stdout.splitlines()[-1])
    return ledger


def _store(mem: MemoryOS, first: int, n: int) -> dict[str, str]:
    return {
        mem.add_turn(USER, turn_query(USER, i), "ok"): turn_query(USER, i)
        for i in range(first, first + n)
    }


def _problems(data_dir: Path, ledger: dict[str, str]) -> list[str]:
    with MemoryOS.open(data_dir, _config()) as mem:
        return check_ledger(mem, USER, ledger)


def _wal_frames(path: Path) -> list[tuple[int, int, dict[str, Any]]]:
    """``(offset, frame length, record)`` of every frame of an undamaged WAL."""
    data = path.read_bytes()
    out, at = [], HEADER_SIZE
    while at < len(data):
        length, _crc, _seq = _FRAME.unpack_from(data, at)
        payload = data[at + _FRAME.size : at + _FRAME.size + length]
        out.append((at, _FRAME.size + length, msgpack.unpackb(payload, raw=False)))
        at += _FRAME.size + length
    return out


def _turn_frame(wal: Path, seq: int) -> tuple[int, int]:
    """Offset and length of the WAL frame of turn ``seq``."""
    for at, length, rec in _wal_frames(wal):
        if rec.get("t") == "turn" and int(rec["seq"]) == seq:
            return at, length
    raise AssertionError(f"no turn record of seq {seq} in {wal}")


def test_an_imported_user_keeps_its_stm_pages_through_the_next_crash(tmp_path: Path) -> None:
    with MemoryOS.open(tmp_path / "a", _config()) as mem:
        ledger = _store(mem, 1, 40)
        mem.flush()
        mem.export_user(USER, tmp_path / "export.json")
    with MemoryOS.open(tmp_path / "b", _config()) as mem:
        mem.import_user(tmp_path / "export.json")
    # Five turns push five of the imported STM pages (none of them in any WAL) out.
    ledger |= _write_and_die(tmp_path / "b", 41, 5)
    assert _problems(tmp_path / "b", ledger) == []


def test_an_imported_user_keeps_them_across_a_passivation_and_a_clean_restart(
    tmp_path: Path,
) -> None:
    with MemoryOS.open(tmp_path / "a", _config()) as mem:
        ledger = _store(mem, 1, 30)
        mem.flush()
        mem.export_user(USER, tmp_path / "export.json")
    with MemoryOS.open(tmp_path / "b", _config()) as mem:
        mem.import_user(tmp_path / "export.json")
        ledger |= _store(mem, 31, 3)
        mem.flush()
        assert mem.passivate(USER)
    ledger |= _write_and_die(tmp_path / "b", 34, 4)
    assert _problems(tmp_path / "b", ledger) == []


def test_a_page_whose_wal_record_repair_cut_survives_the_next_crash(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    with MemoryOS.open(data_dir, _config()) as mem:
        ledger = _store(mem, 1, 20)
    # The clean close took a snapshot whose STM holds p14..p20; their WAL records are
    # kept too. Damage p18's record: media damage in the middle, refused at open.
    wal = user_path(data_dir, USER) / WAL_FILE
    at, length = _turn_frame(wal, 18)
    data = bytearray(wal.read_bytes())
    for i in range(at + _FRAME.size + 2, at + length - 2):
        data[i] ^= 0xFF
    wal.write_bytes(bytes(data))
    with MemoryOS.open(data_dir, _config()) as mem:
        report = mem.repair_user(USER)
        # The snapshot holds p18: the repair loses no turn, and says so.
        assert report.lost_turns == ()
    ledger |= _write_and_die(data_dir, 21, 5)
    assert _problems(data_dir, ledger) == []


def test_pages_of_a_wal_that_ends_before_its_snapshot_survive_the_next_crash(
    tmp_path: Path,
) -> None:
    data_dir = tmp_path / "data"
    with MemoryOS.open(data_dir, _config()) as mem:
        ledger = _store(mem, 1, 20)
    # What a machine crash in interval mode could leave before the checkpoint made the WAL
    # durable first: the snapshot (STM p14..p20) is on disk, the WAL's last turns are not.
    wal = user_path(data_dir, USER) / WAL_FILE
    at, _length = _turn_frame(wal, 17)
    with wal.open("r+b") as f:
        f.truncate(at)
    ledger |= _write_and_die(data_dir, 21, 5)
    assert _problems(data_dir, ledger) == []


def test_a_checkpoint_makes_the_wal_durable_before_its_snapshot(
    tmp_path: Path, monkeypatch: Any
) -> None:
    import memoryos_actors.store.userstore as userstore

    store = UserStore(tmp_path, USER, fsync="never")
    try:
        for i in range(5):
            store.wal.append({"t": "note", "i": i})
        seen: list[tuple[int, int]] = []
        write = userstore.write_snapshot

        def watched(*args: Any, **kwargs: Any) -> Any:
            seen.append((store.wal._synced_seq, store.wal.last_lsn))  # noqa: SLF001
            return write(*args, **kwargs)

        monkeypatch.setattr(userstore, "write_snapshot", watched)
        store.checkpoint({"seq": 0})
        assert seen == [(5, 5)]
    finally:
        store.close()
