"""One process per data directory.

:class:`DataDirLock` takes an exclusive, non-blocking ``flock`` on ``<data dir>/LOCK`` and
writes the holder's pid into it. A second process (or a second lock in the same process) gets
:class:`~memoryos_actors.errors.DataDirLocked` naming the holder's pid at once instead of
corrupting the first one's files. The kernel drops the lock when the holder exits, even on
``kill -9``, so a stale lock file never blocks a restart. The file itself is left in place:
deleting it would let two processes lock two different inodes of the "same" file.

Front doors (several server processes over one sharded data directory, see
:mod:`memoryos_actors.cluster.doors`) do not take that lock: each holds a shared ``flock``
on ``<data dir>/doors.lock`` (:class:`SharedDoorsLock`) and an exclusive one on its own
file under ``<data dir>/doors/``. :class:`DataDirLock` on a directory with front doors is
refused while any of them lives, naming them; a shared open is refused while a
:class:`DataDirLock` holds the directory.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Self

from memoryos_actors.errors import DataDirLocked, StorageError
from memoryos_actors.prerequisites import WINDOWS_NOTE, MissingPrerequisite

try:
    import fcntl
except ImportError:  # Windows: the first import that needs flock says so, in one line
    raise MissingPrerequisite(WINDOWS_NOTE) from None

__all__ = [
    "DOORS_DIR",
    "DOORS_LOCK_FILE",
    "LOCK_FILE_NAME",
    "SERVER_FILE",
    "DataDirLock",
    "SharedDoorsLock",
    "describe_doors",
    "lock_file",
    "lock_holder",
    "read_doors",
    "sweep_dead_doors",
]

LOCK_FILE_NAME = "LOCK"
"""Name of the lock file inside the data directory."""

SERVER_FILE = "SERVER"
"""File a running ``memoryos serve`` writes at the top of its data directory, beside the
lock it holds: where it listens (JSON: ``url``, ``pid``, ``mcp``), so that a command
refused by the lock can say how to reach it. Removed when the server stops; trusted only
while its pid holds the lock."""


DOORS_LOCK_FILE = "doors.lock"
"""File every front door of a data directory holds a shared ``flock`` on while it runs."""

DOORS_DIR = "doors"
"""Directory of the front doors' files (``<pid>-<token>.json``), each locked by its door."""


def _try_lock(fd: int, shared: bool = False) -> bool:
    try:
        fcntl.flock(fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def lock_file(fd: int) -> None:
    """Take an exclusive ``flock`` on the open file ``fd``, waiting for it if need be."""
    fcntl.flock(fd, fcntl.LOCK_EX)


class _HeldFlock:
    """An open lock file this process holds an ``flock`` on, until :meth:`close`."""

    _fd: int | None = None

    @property
    def held(self) -> bool:
        """Whether this object still holds the lock."""
        return self._fd is not None

    def close(self) -> None:
        """Release the lock; idempotent."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def _read_pid(fd: int) -> int | None:
    """The pid a lock file holds (None when unreadable)."""
    try:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


class DataDirLock(_HeldFlock):
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
            holder = _read_pid(fd)
            os.close(fd)
            who = f"process {holder}" if holder is not None else "another process"
            raise DataDirLocked(
                f"data directory {self.path} is in use by {who} (lock file {self.lock_path}); "
                "stop it or use another data directory"
            )
        self._fd: int | None = fd
        doors = _doors_in_the_way(self.path)
        if doors is not None:
            self.close()
            raise DataDirLocked(
                f"data directory {self.path} is served by {doors}; stop them first (a command "
                "that needs the directory alone waits for every front door to stop)"
            )
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
        except OSError:
            pass  # the pid is advice for error messages; the flock is what protects
        self.pid = os.getpid()

    def release(self) -> None:
        """The same as :meth:`close`."""
        self.close()

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
            fcntl.flock(fd, fcntl.LOCK_UN)
            return (False, None)
        return (True, _read_pid(fd))
    finally:
        os.close(fd)


def read_doors(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The live front doors of data directory ``path``: the content of each door file
    whose door still holds its lock (pid, url, generation, started_at), by start time.

    A door killed with SIGKILL leaves its file behind, but the kernel dropped its lock:
    it is not counted (and the next door to open removes the file).
    """
    folder = Path(path) / DOORS_DIR
    try:
        names = sorted(p for p in folder.iterdir() if p.suffix == ".json")
    except OSError:
        return []
    found = []
    for name in names:
        try:
            fd = os.open(name, os.O_RDONLY)
        except OSError:
            continue  # closed meanwhile
        try:
            if _try_lock(fd, shared=True):
                continue  # nobody holds it: a door that died
            raw = os.pread(fd, 4096, 0)
        finally:
            os.close(fd)
        try:
            doc = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            doc = None  # being rewritten this instant: it is alive all the same
        found.append(doc if isinstance(doc, dict) else {"file": name.name})
    return sorted(found, key=lambda d: float(d.get("started_at") or 0.0))


def sweep_dead_doors(path: str | os.PathLike[str]) -> None:
    """Remove the files of data directory ``path``'s front doors that died without closing
    (nobody holds their lock: the kernel dropped it with the process)."""
    for name in (Path(path) / DOORS_DIR).glob("*.json"):
        try:
            fd = os.open(name, os.O_RDONLY)
        except OSError:
            continue  # closed meanwhile
        try:
            if _try_lock(fd):
                name.unlink(missing_ok=True)
        finally:
            os.close(fd)


def describe_doors(doors: list[dict[str, Any]]) -> str:
    """``doors`` (from :func:`read_doors`) in a few words for an error message."""
    parts = []
    for doc in doors:
        where = doc.get("url") or "no url yet"
        parts.append(f"pid {doc.get('pid', '?')} at {where}")
    count = f"{len(doors)} front door{'s' if len(doors) != 1 else ''}"
    return f"{count} ({'; '.join(parts)})" if parts else count


def _doors_in_the_way(path: Path) -> str | None:
    """Who keeps a :class:`DataDirLock` holder from having ``path`` alone: ``None`` when
    no front door holds ``doors.lock`` (also when the directory never had one)."""
    lock_path = path / DOORS_LOCK_FILE
    try:
        fd = os.open(lock_path, os.O_RDONLY)
    except OSError:
        return None
    try:
        if _try_lock(fd):
            fcntl.flock(fd, fcntl.LOCK_UN)
            return None
    finally:
        os.close(fd)
    # A door between taking doors.lock and writing its file is still a door.
    doors = read_doors(path)
    return describe_doors(doors) if doors else "a front door starting up"


class SharedDoorsLock(_HeldFlock):
    """The shared lock a front door holds on ``<path>/doors.lock`` for its lifetime.

    Refused with :class:`DataDirLocked` while a process holds the data directory alone
    (a :class:`DataDirLock`: a non-shared facade, a rebalance, a maintenance command).
    The kernel drops it when the process dies, SIGKILL included.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        lock_path = self.path / DOORS_LOCK_FILE
        try:
            self.path.mkdir(parents=True, exist_ok=True)
            fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise StorageError(f"{lock_path}: cannot open lock file: {exc}") from exc
        if not _try_lock(fd, shared=True):
            os.close(fd)
            _held, pid = lock_holder(self.path)
            who = f"process {pid}" if pid is not None else "another process"
            raise DataDirLocked(
                f"data directory {self.path} is held alone by {who}; a front door opens it "
                "once that process stops"
            )
        self._fd: int | None = fd
        # Taken in the other order by DataDirLock: whichever comes second is refused.
        held, pid = lock_holder(self.path)
        if held:
            self.close()
            who = f"process {pid}" if pid is not None else "another process"
            raise DataDirLocked(
                f"data directory {self.path} is in use by {who}, which holds it alone (a "
                "facade opened without shared, or a maintenance command); stop it first"
            )
