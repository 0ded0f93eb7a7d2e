"""Damaged logs: refused at open with where and how much is intact; a repair keeps every
intact record, each at its own seq, and keeps the damaged original."""

from __future__ import annotations

import hashlib
import struct
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memoryos_actors import CorruptDataError, ReadOnlyError, RepairReport
from memoryos_actors.repair import repair_user
from memoryos_actors.store import UserStore
from memoryos_actors.store._frames import HEADER_SIZE
from memoryos_actors.store.userstore import user_path

_FRAME = struct.Struct(">IIQ")


def frames(path: Path) -> list[tuple[int, int, int]]:
    """``(seq, offset, frame length)`` of every frame of an undamaged log."""
    data = path.read_bytes()
    out, at = [], HEADER_SIZE
    while at < len(data):
        length, _crc, seq = _FRAME.unpack_from(data, at)
        out.append((seq, at, _FRAME.size + length))
        at += _FRAME.size + length
    return out


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def write_wal(root: Path, records: list[dict]) -> Path:
    with UserStore(root, "u", fsync="never", archive=False) as store:
        for rec in records:
            store.wal.append(rec)
    return user_path(root, "u") / "wal.log"


record_lists = st.lists(
    st.fixed_dictionaries({"t": st.just("x"), "v": st.binary(min_size=1, max_size=60)}),
    min_size=3,
    max_size=30,
)


@given(records=record_lists, data=st.data())
@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
def test_every_record_outside_the_damage_survives_a_repair_at_its_own_seq(
    tmp_path_factory: pytest.TempPathFactory, records: list[dict], data: st.DataObject
) -> None:
    root = tmp_path_factory.mktemp("repair")
    wal = write_wal(root, records)
    fr = frames(wal)
    # Damage a run of whole-or-partial frames that ends before the last frame: media
    # damage in the middle, with intact records after it.
    first = data.draw(st.integers(0, len(fr) - 2), label="first damaged frame")
    last = data.draw(st.integers(first, len(fr) - 2), label="last damaged frame")
    start = data.draw(st.integers(fr[first][1], fr[first][1] + fr[first][2] - 1))
    end = data.draw(st.integers(start, fr[last][1] + fr[last][2] - 1))
    if end < fr[last][1]:
        last = max(i for i, f in enumerate(fr) if f[1] <= end)
    raw = bytearray(wal.read_bytes())
    for i in range(start, end + 1):
        raw[i] ^= 0xA5
    wal.write_bytes(bytes(raw))
    damaged_seqs = {fr[i][0] for i in range(first, last + 1)}

    with pytest.raises(CorruptDataError) as err:
        UserStore(root, "u", fsync="never", archive=False)
    assert err.value.path == str(wal)
    assert err.value.offset == fr[first][1]
    assert err.value.intact_after == len(fr) - 1 - last
    assert wal.read_bytes() == bytes(raw)  # the refusal changed nothing

    report = repair_user(root, "u")
    assert isinstance(report, RepairReport) and report.changed
    (changed,) = report.files
    assert Path(changed.backup).read_bytes() == bytes(raw)  # the original, kept
    assert changed.lost_records == len(damaged_seqs)
    assert changed.kept_records == len(records) - len(damaged_seqs)
    assert changed.damaged_bytes[0][0] == fr[first][1]
    with UserStore(root, "u", fsync="never", archive=False) as store:
        got = dict(store.load().records)
        # Numbering continues after the last record: nothing renumbered.
        assert store.wal.append({"t": "x", "v": b"next"}) == len(records) + 1
    for seq, rec in enumerate(records, start=1):
        if seq in damaged_seqs:
            assert got[seq]["t"] == "lost"
        else:
            assert got[seq] == rec
    assert repair_user(root, "u").changed is False  # once repaired, nothing to do


def _cut_write(wal: Path) -> None:
    with open(wal, "ab") as f:
        f.write(b"\x00\x00\x00\x30half a frame")  # an append cut short


def test_a_torn_tail_is_left_alone_read_only_and_cut_by_a_writer(tmp_path: Path) -> None:
    wal = write_wal(tmp_path, [{"t": "x", "v": i} for i in range(5)])
    end = wal.stat().st_size
    _cut_write(wal)
    kept = 5
    (wal.parent / "wal.log.tmp").write_bytes(b"someone else's temp file")
    before = {p.name: digest(p) for p in wal.parent.iterdir()}
    # Read-only (another process may be appending): nothing changes, the tail is not read.
    with UserStore(tmp_path, "u", read_only=True) as store:
        assert [r["v"] for _, r in store.load().records] == list(range(kept))
        assert store.wal.append({"t": "x", "v": 99}) == kept + 1  # kept in memory
        assert [r["v"] for _, r in store.wal.read(after_lsn=kept - 1)] == [kept - 1, 99]
        store.archive.append({"t": "page", "page": {"seq": 1}})
        assert len(store.archive) == 1
        with pytest.raises(ReadOnlyError, match="read-only"):
            store.checkpoint({"s": 1})
    assert {p.name: digest(p) for p in wal.parent.iterdir()} == before
    # A writer cuts the tail, as after a crash, and keeps every record before it.
    with UserStore(tmp_path, "u", fsync="never", archive=False) as store:
        assert [r["v"] for _, r in store.load().records] == list(range(kept))
    assert wal.stat().st_size == end


def test_a_whole_but_damaged_last_record_is_refused_by_readers_and_writers(
    tmp_path: Path,
) -> None:
    # Whole but wrong is not a crash's torn write: nobody cuts it without a repair.
    wal = write_wal(tmp_path, [{"t": "x", "v": i} for i in range(5)])
    _seq, at, length = frames(wal)[-1]
    raw = bytearray(wal.read_bytes())
    raw[at + length - 2] ^= 0xFF
    wal.write_bytes(bytes(raw))
    before = {p.name: digest(p) for p in wal.parent.iterdir()}
    for read_only in (True, False):
        with pytest.raises(CorruptDataError, match=r"memoryos repair u\)"):
            UserStore(tmp_path, "u", read_only=read_only, fsync="never", archive=False)
    assert {p.name: digest(p) for p in wal.parent.iterdir()} == before
    assert frames_before_last(wal) == at
    report = repair_user(tmp_path, "u")
    assert report.changed
    with UserStore(tmp_path, "u", fsync="never", archive=False) as store:
        assert [r["v"] for _, r in store.load().records] == list(range(4))


def frames_before_last(wal: Path) -> int:
    """Where the last frame of ``wal`` starts (valid up to its damaged last frame)."""
    data = wal.read_bytes()
    at, last = HEADER_SIZE, HEADER_SIZE
    while at + _FRAME.size <= len(data):
        length = _FRAME.unpack_from(data, at)[0]
        last, at = at, at + _FRAME.size + length
    return last
