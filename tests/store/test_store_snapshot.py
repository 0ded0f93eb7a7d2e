"""Snapshots: atomic generations, fallback to the previous one, versions, hostile files."""

from __future__ import annotations

from pathlib import Path

import pytest

from memoryos_actors.errors import CorruptDataError, InvalidInput
from memoryos_actors.store import NewerFormatError
from memoryos_actors.store.snapshot import (
    list_snapshots,
    read_latest,
    read_latest_snapshot,
    read_snapshot,
    write_snapshot,
)

STATE = {"stm": [{"page_id": "p1", "query": "hi"}], "emb": b"\x00\x01" * 256, 7: "int key"}


def flip_byte(path: Path, offset: int) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x5A
    path.write_bytes(bytes(data))


def test_a_written_snapshot_reads_back_with_its_wal_lsn(tmp_path: Path) -> None:
    write_snapshot(tmp_path, STATE, 42)
    assert read_latest(tmp_path) == (STATE, 42)


def test_an_empty_directory_has_no_snapshot(tmp_path: Path) -> None:
    assert read_latest(tmp_path) is None
    assert read_latest(tmp_path / "missing") is None


def test_only_the_two_newest_generations_are_kept(tmp_path: Path) -> None:
    for i in range(5):
        write_snapshot(tmp_path, {"n": i}, i)
    gens = [g for g, _ in list_snapshots(tmp_path)]
    assert gens == [5, 4]
    assert read_latest(tmp_path) == ({"n": 4}, 4)
    assert not list(tmp_path.glob("*.tmp"))


@pytest.mark.parametrize("offset", [0, 10, 30, 35, -1])
def test_a_damaged_newest_snapshot_falls_back_to_the_previous_one(
    tmp_path: Path, offset: int
) -> None:
    write_snapshot(tmp_path, {"n": 1}, 10)
    newest = write_snapshot(tmp_path, {"n": 2}, 20)
    flip_byte(newest, offset if offset >= 0 else newest.stat().st_size - 1)
    assert read_latest(tmp_path) == ({"n": 1}, 10)


def test_a_truncated_newest_snapshot_falls_back_to_the_previous_one(tmp_path: Path) -> None:
    write_snapshot(tmp_path, {"n": 1}, 10)
    newest = write_snapshot(tmp_path, {"n": 2, "big": "x" * 1000}, 20)
    newest.write_bytes(newest.read_bytes()[:500])
    snap = read_latest_snapshot(tmp_path)
    assert snap is not None and snap.state == {"n": 1} and snap.generation == 1


def test_when_every_generation_is_damaged_the_error_names_each_file(tmp_path: Path) -> None:
    a = write_snapshot(tmp_path, {"n": 1}, 1)
    b = write_snapshot(tmp_path, {"n": 2}, 2)
    flip_byte(a, 35)
    b.write_bytes(b"garbage")
    with pytest.raises(CorruptDataError) as err:
        read_latest(tmp_path)
    assert a.name in str(err.value) and b.name in str(err.value)


def test_a_snapshot_from_a_newer_schema_is_refused_not_skipped(tmp_path: Path) -> None:
    write_snapshot(tmp_path, {"n": 1}, 1, schema_version=1)
    write_snapshot(tmp_path, {"n": 2}, 2, schema_version=3)
    with pytest.raises(NewerFormatError, match="schema version 3"):
        read_latest(tmp_path, schema_version=2)
    assert read_latest(tmp_path, schema_version=3) == ({"n": 2}, 2)


def test_a_snapshot_from_a_newer_format_is_refused(tmp_path: Path) -> None:
    path = write_snapshot(tmp_path, {"n": 1}, 1)
    data = bytearray(path.read_bytes())
    data[8:10] = (99).to_bytes(2, "big")
    # Recompute the checksum so only the version is "wrong": the refusal must be about it.
    import zlib

    payload = bytes(data[34:])
    data[30:34] = zlib.crc32(payload, zlib.crc32(bytes(data[:30]))).to_bytes(4, "big")
    path.write_bytes(bytes(data))
    with pytest.raises(NewerFormatError, match="format version 99"):
        read_snapshot(path)
    assert issubclass(NewerFormatError, CorruptDataError)


def test_a_huge_length_field_is_rejected_without_reading(tmp_path: Path) -> None:
    path = write_snapshot(tmp_path, {"n": 1}, 1)
    data = bytearray(path.read_bytes())
    data[22:30] = (2**62).to_bytes(8, "big")
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptDataError, match=path.name):
        read_snapshot(path)


def test_unencodable_state_is_invalid_input(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput):
        write_snapshot(tmp_path, {"x": object()}, 1)
    with pytest.raises(InvalidInput):
        write_snapshot(tmp_path, {"x": 1}, -1)
    assert list_snapshots(tmp_path) == []


def test_a_leftover_temp_file_does_not_count_as_a_snapshot(tmp_path: Path) -> None:
    write_snapshot(tmp_path, {"n": 1}, 1)
    (tmp_path / "snapshot-000000000002.msgpack.tmp").write_bytes(b"partial")
    assert read_latest(tmp_path) == ({"n": 1}, 1)
    write_snapshot(tmp_path, {"n": 2}, 2)
    assert not list(tmp_path.glob("*.tmp"))
