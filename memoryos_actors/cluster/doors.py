"""Front doors: several processes serving one sharded data directory through shared shards.

A front door is a facade opened with ``shared`` (:class:`~memoryos_actors.cluster.RayCluster`
``(shared=True)``; ``memoryos serve --ray``). It holds no user state: the shards own their
directories and locks. Instead of the data directory's exclusive lock it holds

- a shared ``flock`` on ``<data dir>/doors.lock`` for its lifetime (the kernel drops it when
  the process dies, SIGKILL included), which keeps out anything that needs the directory
  alone (a non-shared facade, ``rebalance``, ``unshard``, the maintenance commands), and
- its door file ``<data dir>/doors/<pid>-<token>.json`` (pid, url once known, generation,
  start time), locked by the door itself so that only live doors count
  (:func:`live_doors`), removed when it closes.

Every facade also watches ``shards.json`` (:class:`LayoutWatch`): it records the generation
it opened, and at most once a second (a ``stat`` of the file, then a re-read if it
changed) checks it before routing a call. Another generation (a rebalance happened)
makes every call raise :class:`~memoryos_actors.errors.LayoutChanged`; the facade never
routes to the old shards again.
"""

from __future__ import annotations

import json
import os
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from memoryos_actors.errors import LayoutChanged, StorageError
from memoryos_actors.store.lock import (
    DOORS_DIR,
    SharedDoorsLock,
    describe_doors,
    lock_file,
    read_doors,
    sweep_dead_doors,
)

from ._placement import LAYOUT_FILE, read_layout

__all__ = ["FrontDoor", "LayoutWatch", "describe_doors", "live_doors", "read_doors"]

#: Seconds between two looks at shards.json (each look is one stat; a re-read if changed).
CHECK_INTERVAL_S = 1.0


def live_doors(data_dir: str | os.PathLike[str]) -> int:
    """How many front doors serve ``data_dir`` now (door files whose process holds their
    lock; a door killed with SIGKILL is not counted). Cheap: one ``open`` and one
    ``flock`` probe per door file; no round trip to any shard."""
    return len(read_doors(data_dir))


class FrontDoor:
    """This process's registration as a front door of ``data_dir`` (see the module doc);
    a context manager.

    Raises :class:`~memoryos_actors.errors.DataDirLocked` while a process holds the data
    directory alone.

    Args:
        data_dir: the sharded data directory.
    """

    def __init__(self, data_dir: str | os.PathLike[str]) -> None:
        self.data_dir = Path(data_dir)
        #: The layout generation this door routes by (set by :meth:`opened`).
        self.generation: int | None = None
        self._lock = SharedDoorsLock(self.data_dir)
        self._fd: int | None = None
        try:
            folder = self.data_dir / DOORS_DIR
            folder.mkdir(exist_ok=True)
            sweep_dead_doors(self.data_dir)
            self.path = folder / f"{os.getpid()}-{uuid.uuid4().hex[:12]}.json"
            # Locked under a name no reader looks at, then renamed (the lock stays with the
            # inode): a sweep by another door never sees it unlocked.
            fresh = self.path.with_name(self.path.name + ".new")
            fd = os.open(fresh, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
            self._fd = fd
            lock_file(fd)  # a fresh file: nobody else has it
            os.replace(fresh, self.path)
            self.doc: dict[str, Any] = {
                "pid": os.getpid(),
                "url": None,
                "generation": None,
                "started_at": time.time(),
            }
            self._write()
        except OSError as exc:
            self.close()
            raise StorageError(f"{self.data_dir}: cannot register a front door: {exc}") from exc
        except BaseException:
            self.close()
            raise

    def _write(self) -> None:
        # In place, on the locked file: a rename would put a new, unlocked file there.
        fd = self._fd
        if fd is None:
            return
        data = json.dumps(self.doc).encode("utf-8")
        os.ftruncate(fd, 0)
        os.pwrite(fd, data, 0)

    def opened(self, generation: int) -> None:
        """Record the layout generation this door opened."""
        self.generation = generation
        self.doc["generation"] = generation
        self._rewrite()

    def _rewrite(self) -> None:
        try:
            self._write()
        except OSError:
            pass  # the file is advice for error messages; the locks are what protect

    def set_url(self, url: str) -> None:
        """Record where this door listens (shown when a command is refused)."""
        self.doc["url"] = url
        self._rewrite()

    def __enter__(self) -> FrontDoor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Remove the door file and release the locks; idempotent."""
        fd, self._fd = self._fd, None
        if fd is not None:
            path = getattr(self, "path", None)
            if path is not None:
                path.unlink(missing_ok=True)
            os.close(fd)
        self._lock.close()


class LayoutWatch:
    """Checks, at most once a second, that ``data_dir``'s layout is still at
    ``generation``; thread-safe.

    :meth:`check` raises :class:`~memoryos_actors.errors.LayoutChanged` from the first
    time it sees another generation (or no layout file) on, every time.
    """

    def __init__(
        self,
        data_dir: str | os.PathLike[str],
        generation: int,
        interval: float = CHECK_INTERVAL_S,
    ) -> None:
        self.path = Path(data_dir) / LAYOUT_FILE
        self.data_dir = Path(data_dir)
        self.generation = generation
        self.interval = interval
        self._lock = threading.Lock()
        self._next = 0.0
        self._seen = self._signature()
        self._changed: str | None = None

    def _signature(self) -> tuple[int, int, int] | None:
        try:
            st = os.stat(self.path)
        except OSError:
            return None
        return (st.st_ino, st.st_mtime_ns, st.st_size)

    def check(self) -> None:
        """Raise :class:`LayoutChanged` if the layout is at another generation now."""
        if self._changed is None:
            now = time.monotonic()
            if now < self._next:
                return
            with self._lock:
                if now >= self._next and self._changed is None:
                    self._next = now + self.interval
                    self._look()
        if self._changed is not None:
            raise LayoutChanged(self._changed)

    def _look(self) -> None:
        sig = self._signature()
        if sig == self._seen and sig is not None:
            return
        self._seen = sig
        try:
            layout = read_layout(self.data_dir)
        except Exception as exc:  # noqa: BLE001 - an unreadable layout is no layout to route by
            new = f"unreadable ({exc})"
        else:
            if layout is not None and layout.generation == self.generation:
                return
            new = "none (unsharded)" if layout is None else str(layout.generation)
        self._changed = (
            f"{self.data_dir}: the shard layout changed, generation {self.generation} -> "
            f"{new}; this front door no longer routes calls: restart it"
        )
