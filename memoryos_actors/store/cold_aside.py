"""A second, read-only connection to a cold index file, under its own lock.

The index's main connection (:class:`~memoryos_actors.store.cold.ColdIndex`) writes and
answers MTM's searches for pages under one lock; LPM searches the same file for archived
facts and traits at the same time, for the same retrieve. On the main connection LPM's
search waited for MTM's (and SQLite's work, which runs without the GIL, did not overlap);
on this one it does not wait, and each connection keeps its own pages in its cache.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

__all__ = ["ASIDE_CACHE_KIB", "BUSY_TIMEOUT_S", "AsideReader"]

_T = TypeVar("_T")

ASIDE_CACHE_KIB = 1024
"""SQLite page cache of the second connection, KiB (it reads only what searches for
archived facts and traits need)."""

BUSY_TIMEOUT_S = 30.0
"""How long a statement waits for another connection's lock on the file, seconds: a write
of the main connection waits for a read of this one (or another process's copy of the
file) to end rather than fail with "database is locked", which would read as damage."""


class AsideReader:
    """A read-only connection to the SQLite file at ``path``, opened on first use."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._db: sqlite3.Connection | None = None
        self._lock = threading.Lock()

    def run(self, fn: Callable[[sqlite3.Connection], _T]) -> _T:
        """``fn(connection)`` under this reader's lock. A SQLite error closes the
        connection (the next call opens it again) and is raised: the caller's main
        connection decides whether the file is damaged."""
        with self._lock:
            if self._db is None:
                self._db = self._connect()
            try:
                return fn(self._db)
            except sqlite3.DatabaseError:
                self._close()
                raise

    def close(self) -> None:
        """Close the connection (a rebuild deletes the file; a passive user's index is
        closed); the next :meth:`run` opens it again. Idempotent."""
        with self._lock:
            self._close()

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(
            self._path.resolve().as_uri() + "?mode=ro",
            uri=True,
            check_same_thread=False,
            isolation_level=None,
            timeout=BUSY_TIMEOUT_S,
        )
        db.execute(f"PRAGMA cache_size=-{ASIDE_CACHE_KIB}")
        return db

    def _close(self) -> None:
        if self._db is not None:
            with contextlib.suppress(sqlite3.Error):
                self._db.close()
            self._db = None
