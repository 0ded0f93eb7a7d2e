"""One process per data directory.

:class:`DataDirLock` takes an exclusive, non-blocking ``flock`` on ``<data dir>/LOCK`` and
writes the holder's pid into it. A second process (or a second lock in the same process) gets
:class:`~memoryos_actors.errors.DataDirLocked` naming the holder's pid at once instead of
corrupting the first one's files. The kernel drops the lock when the holder exits, even on
``kill -9``, so a stale lock file never blocks a restart. The file itself is left in place:
deleting it would let two processes lock two different inodes of the "same" file.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Self

from memoryos_actors.errors import DataDirLocked, StorageError

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

__all__ = ["LOCK_FILE_NAME", "SERVER_FILE", "DataDirLock", "lock_holder"]

LOCK_FILE_NAME = "LOCK"
"""Name of the lock file inside the data directory."""

SERVER_FILE = "SERVER"
"""File a running ``memoryos serve`` writes at the top of its data directory, beside the
lock it holds: where it listens (JSON: ``url``, ``pid``, ``mcp``), so that a command
refused by the lock can say how to reach it. Removed when the server stops; trusted only
while its pid holds the lock."""


def _try_lock(fd: int) -> bool:
    if fcntl is not None:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True
    import msvcrt  # pragma: no cover - Windows

    try:  # pragma: no cover - Windows
        msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
    except OSError:  # pragma: no cover - Windows
        return False
    return True  # pragma: no cover - Windows


class DataDirLock:
    """An exclusive lock on the data directory ``path`` (created if missing), held until
    :meth:`close`. Usable as a context manager.

    Raises :class:`DataDirLocked` naming the holder's pid when another process (or another
    :class:`DataDirLock` in this process) holds it, :class:`StorageError` if the lock file
    cannot be opened.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.lock_path = self.path / LOCK_FILE_NAME
        try:
            self.path.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise StorageError(f"{self.lock_path}: cannot open lock file: {exc}") from exc
        if not _try_lock(fd):
            holder = self._read_pid(fd)
            os.close(fd)
            who = f"process {holder}" if holder is not None else "another process"
            raise DataDirLocked(
                f"data directory {self.path} is in use by {who} (lock file {self.lock_path}); "
                "stop it or use another data directory"
            )
        self._fd: int | None = fd
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
        except OSError:
            pass  # the pid is advice for error messages; the flock is what protects
        self.pid = os.getpid()

    @staticmethod
    def _read_pid(fd: int) -> int | None:
        try:
            text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
        except OSError:
            return None
        return int(text) if text.isdigit() else None

    @property
    def held(self) -> bool:
        """Whether this object still holds the lock."""
        return self._fd is not None

    def close(self) -> None:
        """Release the lock; idempotent."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        if fcntl is not None:
            fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)

    release = close

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"DataDirLock({str(self.path)!r}, held={self.held})"


def lock_holder(path: str | os.PathLike[str]) -> tuple[bool, int | None]:
    """Whether data directory ``path`` is locked now, and the holder's pid if it wrote one.

    A probe that changes nothing: it creates no file and writes no pid (a directory never
    opened has no lock file and is free), and releases the lock at once if it got it.
    Raises :class:`StorageError` when the lock file exists but cannot be opened.
    """
    lock_path = Path(path) / LOCK_FILE_NAME
    try:
        fd = os.open(lock_path, os.O_RDONLY)
    except FileNotFoundError:
        return (False, None)
    except OSError as exc:
        raise StorageError(f"{lock_path}: cannot open lock file: {exc}") from exc
    try:
        if _try_lock(fd):
            if fcntl is not None:
                fcntl.flock(fd, fcntl.LOCK_UN)
            return (False, None)
        return (True, DataDirLock._read_pid(fd))
    finally:
        os.close(fd)
