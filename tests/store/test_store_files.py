"""The store's one atomic file write."""

from __future__ import annotations

from pathlib import Path
from typing import BinaryIO

import pytest

from memoryos_actors.errors import StorageError
from memoryos_actors.store._files import atomic_write
from memoryos_actors.store._files import tmp_path as staged_path


def test_atomic_write_replaces_the_whole_file(tmp_path: Path) -> None:
    target = tmp_path / "meta.json"
    target.write_bytes(b"old content, longer than the new one")
    atomic_write(target, b"new", "meta")
    assert target.read_bytes() == b"new"
    assert not staged_path(target).exists()


def test_a_failed_write_keeps_the_old_file_and_removes_the_temp_file(tmp_path: Path) -> None:
    target = tmp_path / "wal.log"
    target.write_bytes(b"old")

    def half_then_fail(f: BinaryIO) -> None:
        f.write(b"half of the new")
        raise OSError("disk full")

    with pytest.raises(StorageError, match="writing WAL failed: disk full"):
        atomic_write(target, half_then_fail, "WAL")
    assert target.read_bytes() == b"old"
    assert not staged_path(target).exists()


def test_a_streamed_write_is_written_in_full(tmp_path: Path) -> None:
    target = tmp_path / "copy.bin"

    def chunks(f: BinaryIO) -> None:
        for i in range(5):
            f.write(bytes([i]) * 1000)

    atomic_write(target, chunks, "copy")
    assert target.read_bytes() == b"".join(bytes([i]) * 1000 for i in range(5))


@pytest.mark.parametrize("length", [252, 300])
def test_a_name_the_file_system_refuses_is_a_storage_error(tmp_path: Path, length: int) -> None:
    # 252 characters: the name itself fits (255 at most on Linux) but its temp file
    # ("<name>.tmp") does not; 300: neither does. Cleaning up the temp file fails the same
    # way, and that second OSError must not escape in place of the typed error.
    target = tmp_path / ("x" * length)
    with pytest.raises(StorageError, match="writing export failed"):
        atomic_write(target, b"data", "export")
    assert sorted(p.name for p in tmp_path.iterdir()) == []
