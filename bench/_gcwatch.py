"""The cyclic garbage collector's collections during a run, by generation, timed from the
collector's own start and stop callbacks (``gc.callbacks``). A full (generation 2)
collection holds the interpreter lock from start to stop: every thread waits it out."""

from __future__ import annotations

import gc
import threading
import time
from typing import Any

__all__ = ["GCWatch"]


class GCWatch:
    """Counts and times collections while :meth:`start`-ed (until :meth:`stop`)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._started = 0.0
        self._count = [0, 0, 0]
        self._total_s = [0.0, 0.0, 0.0]
        self._max_s = [0.0, 0.0, 0.0]

    def _callback(self, phase: str, info: dict[str, Any]) -> None:
        # The collector runs in whichever thread triggered it, holding the lock throughout.
        if phase == "start":
            self._started = time.perf_counter()
            return
        took = time.perf_counter() - self._started
        g = int(info["generation"])
        with self._lock:
            self._count[g] += 1
            self._total_s[g] += took
            self._max_s[g] = max(self._max_s[g], took)

    def start(self) -> GCWatch:
        gc.callbacks.append(self._callback)
        return self

    def stop(self) -> dict[str, Any]:
        """Stop watching; per generation: collections, their total and longest ms."""
        if self._callback in gc.callbacks:
            gc.callbacks.remove(self._callback)
        with self._lock:
            return {
                f"gen{g}": {
                    "collections": self._count[g],
                    "total_ms": self._total_s[g] * 1000.0,
                    "max_ms": self._max_s[g] * 1000.0,
                }
                for g in range(3)
            }
