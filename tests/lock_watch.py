"""Watching for a thread letting go of the interpreter lock, without timing anything.

:func:`lock_watcher` starts a thread that counts each time it gets the lock and gives it
back at once (``time.sleep(0)``), and sets a one-second switch interval, so the counting
thread can only run when the other threads let go of the lock. A test reads
:attr:`LockWatcher.runs` before and after some work: if it moved, the work let go.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from collections.abc import Iterator

__all__ = ["LockWatcher", "lock_watcher"]


class LockWatcher:
    """How often the counting thread has had the lock (:attr:`runs`)."""

    def __init__(self) -> None:
        self.runs = 0
        self._stop = threading.Event()

    def _spin(self) -> None:
        while not self._stop.is_set():
            self.runs += 1
            time.sleep(0)


@contextlib.contextmanager
def lock_watcher() -> Iterator[LockWatcher]:
    """A :class:`LockWatcher` whose thread runs (and the switch interval is one second)
    inside the ``with`` block; both are undone on the way out."""
    watcher = LockWatcher()
    old = sys.getswitchinterval()
    sys.setswitchinterval(1.0)
    t = threading.Thread(target=watcher._spin, name="lock-watcher", daemon=True)
    t.start()
    try:
        yield watcher
    finally:
        watcher._stop.set()
        sys.setswitchinterval(old)
        t.join(timeout=10)
