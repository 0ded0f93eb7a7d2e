"""The one background thread that fsyncs dirty record logs in ``interval`` mode.

This module is private; :class:`memoryos_actors.store._framing.RecordLog` registers with
:data:`FLUSHER`.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memoryos_actors.store._framing import RecordLog

__all__ = ["FLUSHER"]


class _Flusher:
    """The one background thread that fsyncs dirty logs in ``interval`` mode.

    It runs only while at least one such log is open: the last ``unregister`` stops and joins it.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._logs: set[RecordLog] = set()
        self._thread: threading.Thread | None = None
        self._stop: threading.Event | None = None

    def register(self, rlog: RecordLog) -> None:
        with self._lock:
            self._logs.add(rlog)
            if self._thread is None:
                stop = threading.Event()
                thread = threading.Thread(
                    target=self._run, args=(stop,), name="memoryos-wal-flusher", daemon=True
                )
                self._thread, self._stop = thread, stop
                thread.start()

    def unregister(self, rlog: RecordLog) -> None:
        with self._lock:
            self._logs.discard(rlog)
            if self._logs or self._thread is None or self._stop is None:
                return
            thread, stop = self._thread, self._stop
            self._thread = self._stop = None
            stop.set()
        if thread is not threading.current_thread():
            thread.join()

    def running(self) -> bool:
        """Whether the flusher thread is currently running."""
        with self._lock:
            return self._thread is not None

    def _period(self) -> float:
        with self._lock:
            return min((rl.interval for rl in self._logs), default=0.1)

    def _run(self, stop: threading.Event) -> None:
        while not stop.wait(self._period()):
            with self._lock:
                logs = list(self._logs)
            for rlog in logs:
                rlog.sync_if_dirty()


FLUSHER = _Flusher()
