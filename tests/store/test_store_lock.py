"""One process per data directory."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from memoryos_actors.errors import DataDirLocked
from memoryos_actors.store import DataDirLock

HOLDER = """
import sys
from memoryos_actors.store.lock import DataDirLock
lock = DataDirLock(sys.argv[1])
print("locked", flush=True)
sys.stdin.read()  # hold until the parent closes our stdin or kills us
"""


def test_a_second_process_gets_data_dir_locked_naming_the_holder_pid(tmp_path: Path) -> None:
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(tmp_path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        with pytest.raises(DataDirLocked, match=f"process {holder.pid}"):
            DataDirLock(tmp_path)
        holder.kill()  # even kill -9 releases the lock: the kernel drops it with the process
        holder.wait()
        with DataDirLock(tmp_path) as lock:
            assert lock.held
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()
        for stream in (holder.stdin, holder.stdout):
            if stream is not None:
                stream.close()


def test_a_second_lock_in_the_same_process_is_refused_until_the_first_closes(
    tmp_path: Path,
) -> None:
    first = DataDirLock(tmp_path / "data")
    with pytest.raises(DataDirLocked, match=str(tmp_path / "data")):
        DataDirLock(tmp_path / "data")
    first.release()
    first.close()  # idempotent
    assert not first.held
    DataDirLock(tmp_path / "data").close()


def test_different_data_directories_lock_independently(tmp_path: Path) -> None:
    with DataDirLock(tmp_path / "a"), DataDirLock(tmp_path / "b"):
        pass
