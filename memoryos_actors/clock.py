"""Clocks: the only source of time for the memory tiers.

Every pure core takes a :class:`Clock` so that tests and replays are deterministic. Time is
always seconds since the Unix epoch as a ``float``.
"""

from __future__ import annotations

import math
import threading
import time
from typing import Protocol, runtime_checkable

from memoryos_actors.errors import InvalidInput

__all__ = ["Clock", "ManualClock", "SystemClock"]


@runtime_checkable
class Clock(Protocol):
    """Anything with ``now() -> float`` (seconds since the Unix epoch)."""

    def now(self) -> float:
        """Return the current time in seconds since the Unix epoch."""
        ...


class SystemClock:
    """The wall clock (:func:`time.time`), in seconds since the Unix epoch."""

    __slots__ = ()

    def now(self) -> float:
        """Return the wall-clock time in seconds since the Unix epoch."""
        return time.time()

    def __repr__(self) -> str:
        return "SystemClock()"


def _check_time(value: float, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidInput(f"{what} must be a number of seconds, got {type(value).__name__}")
    value = float(value)
    if not math.isfinite(value):
        raise InvalidInput(f"{what} must be finite, got {value!r}")
    return value


class ManualClock:
    """A clock that moves only when told to; safe to share between threads.

    Args:
        start: initial time in seconds since the Unix epoch.
    """

    __slots__ = ("_lock", "_t")

    def __init__(self, start: float = 0.0) -> None:
        self._lock = threading.Lock()
        self._t = _check_time(start, "start")

    def now(self) -> float:
        """Return the current manual time in seconds."""
        with self._lock:
            return self._t

    def advance(self, seconds: float) -> float:
        """Move time forward by ``seconds`` (>= 0) and return the new time in seconds."""
        seconds = _check_time(seconds, "seconds")
        if seconds < 0:
            raise InvalidInput(f"a clock only advances forward; got {seconds!r} seconds")
        with self._lock:
            self._t += seconds
            return self._t

    def set(self, t: float) -> None:
        """Set the time to ``t`` seconds since the Unix epoch (may move backwards)."""
        t = _check_time(t, "t")
        with self._lock:
            self._t = t

    def __repr__(self) -> str:
        return f"ManualClock({self.now()!r})"
