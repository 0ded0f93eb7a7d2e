"""A full disk: ``add_turn`` raises ``StorageError``, no acknowledged turn is lost, no file
is left half-written, and writing resumes when there is room again.

Two ways: a real file system that fills up (a small tmpfs, mounted when the test may mount
one, else skipped), and a file layer whose ``pwrite`` runs out of room (always runs; it
does what a file system does when a write does not fit: writes what fits, then ENOSPC).
"""

from __future__ import annotations

import errno
import os
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from faultutil import check_ledger, small_config, turn_query

from memoryos_actors import MemoryOS, StorageError

#: Turns each user gets at most before the disk must be full; only stops a runaway test.
_MAX_TURNS = 3000


def _fill(
    mem: MemoryOS,
    users: tuple[str, ...],
    acked: dict[str, dict[str, str]],
    start: int,
    refusals: int,
) -> int:
    """Add turns round robin until ``refusals`` of them raised ``StorageError`` (any other
    error fails the test); returns the next turn number."""
    refused = 0
    n = start
    while refused < refusals:
        n += 1
        assert n < start + _MAX_TURNS, "the disk never filled up"
        for user in users:
            query = turn_query(user, n)
            try:
                acked[user][mem.add_turn(user, query, f"noted {n}")] = query
            except StorageError:
                refused += 1
    return n


def _corrupt_copies(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*.corrupt-*"))


# -- a real file system that fills up -----------------------------------------------------------


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    """A 512 KiB tmpfs at ``tmp_path/fs``, unmounted afterwards (skips when mounting is not
    permitted here)."""
    mnt = tmp_path / "fs"
    mnt.mkdir()
    try:
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=512k", "tmpfs", str(mnt)],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        pytest.skip(f"cannot mount a tmpfs here: {exc}")
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield mnt
    finally:
        done = subprocess.run(
            ["umount", str(mnt)], capture_output=True, text=True, timeout=30, check=False
        )
        if done.returncode != 0:  # something still holds a file there: a leak
            subprocess.run(["umount", "-l", str(mnt)], timeout=30, check=False)
            pytest.fail(f"a file on the full file system was left open: {done.stderr}")


def _remount(mnt: Path, size: str) -> None:
    subprocess.run(["mount", "-o", f"remount,size={size}", str(mnt)], check=True, timeout=30)


def test_a_full_file_system_refuses_turns_loses_none_and_writing_resumes(
    small_fs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Placement is slowed a little, so that MTM is still placing (and evicting to the
    # archive) pages queued before the disk filled while the turns are being refused: the
    # archive's refusal is then certain, not a matter of timing.
    import time

    from memoryos_actors.actors.mtm import MTMActor

    original = MTMActor._insert

    def lagging(self: MTMActor, *args: object) -> None:
        time.sleep(0.002)  # fault injection: a slower placement
        original(self, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(MTMActor, "_insert", lagging)
    data = small_fs / "data"
    users = ("ann", "bob")
    acked: dict[str, dict[str, str]] = {u: {} for u in users}
    config = small_config(fsync="always")
    with MemoryOS.open(data, config) as mem:
        n = _fill(mem, users, acked, 0, refusals=20)
        for user in users:
            mem.user_state(user)  # a barrier: every page handed to MTM is placed by now
        filler = small_fs / "filler"  # whatever room a cut write gave back, taken
        try:
            with filler.open("wb") as f:
                while True:
                    f.write(b"\0" * 4096)
                    f.flush()
        except OSError as exc:
            assert exc.errno == errno.ENOSPC
        with pytest.raises(StorageError):
            mem.add_turn("newbie", "hello", "hi")  # a new user cannot even be created
        assert mem.users() == ["ann", "bob"]
        assert not (data / "users" / "u-newbie").exists()

        filler.unlink(missing_ok=True)
        _remount(small_fs, "16m")
        for user in users:
            n += 1
            acked[user][mem.add_turn(user, turn_query(user, n), "back")] = turn_query(user, n)
        mem.add_turn("newbie", "hello again", "hi")
        mem.flush()
        for user in users:
            assert check_ledger(mem, user, acked[user]) == []
        assert mem.stats()["archive_writes_deferred"] > 0  # the archive was refused too
    with MemoryOS.open(data, config) as mem:
        for user in users:
            assert check_ledger(mem, user, acked[user]) == []
        assert mem.users() == ["ann", "bob", "newbie"]
    assert _corrupt_copies(data) == []


# -- the file layer runs out of room ------------------------------------------------------------


class _FullDisk:
    """``os.pwrite`` on a disk with ``free`` bytes left (None: room enough).

    A write that does not fit writes what fits and returns that count; the writer's next
    write raises ENOSPC, and the bytes of that cut write count as free again (the writer
    truncates them away). Thread-safe: every user's actors write at once.
    """

    def __init__(self) -> None:
        self.real = os.pwrite
        self.free: int | None = None
        self.refused = 0
        self._partial: dict[int, int] = {}
        self._lock = threading.Lock()

    def pwrite(self, fd: int, data: bytes | memoryview, offset: int) -> int:
        with self._lock:
            if self.free is None:
                return self.real(fd, data, offset)
            if len(data) <= self.free:
                self.free -= len(data)
                return self.real(fd, data, offset)
            if self.free == 0:
                self.free += self._partial.pop(fd, 0)
                self.refused += 1
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            fits = self.free
            self.free = 0
            self._partial[fd] = self._partial.get(fd, 0) + fits
            return self.real(fd, bytes(data[:fits]), offset)


def test_a_write_cut_short_by_a_full_disk_never_poisons_later_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    disk = _FullDisk()
    monkeypatch.setattr(os, "pwrite", disk.pwrite)
    data = tmp_path / "data"
    users = ("ann", "bob")
    acked: dict[str, dict[str, str]] = {u: {} for u in users}
    config = small_config()
    with MemoryOS.open(data, config) as mem:
        for n in range(1, 41):  # enough for MTM to be full: each page placed evicts one
            for user in users:
                query = turn_query(user, n)
                acked[user][mem.add_turn(user, query, f"noted {n}")] = query
        mem.flush()
        assert mem.stats()["evicted_pages"] > 0
        # Room for a few WAL records (138-686 bytes here), not for an archive record (1.4-1.9
        # KB): turns are stored while every page they push out of MTM finds the archive
        # full, until the WAL is refused too, with frames cut short on the way.
        disk.free = 1300
        n = _fill(mem, users, acked, n, refusals=20)
        for user in users:
            mem.user_state(user)  # a barrier: every page handed to MTM is placed by now
        assert disk.refused > 0 and mem.stats()["archive_writes_deferred"] > 0
        assert mem.passivate("ann")  # its snapshot carries the records the archive refused

        disk.free = None
        for user in users:
            n += 1
            acked[user][mem.add_turn(user, turn_query(user, n), "back")] = turn_query(user, n)
        mem.flush()
        for user in users:
            assert check_ledger(mem, user, acked[user]) == []
    with MemoryOS.open(data, config) as mem:
        for user in users:
            assert check_ledger(mem, user, acked[user]) == []
        assert mem.users() == list(users)
    assert _corrupt_copies(data) == []
