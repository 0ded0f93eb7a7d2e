"""Synchronisation that a :func:`~supervisor.kill` cannot break.

``kill`` raises ``Killed`` asynchronously in the actor's thread; CPython delivers it at
the next check between bytecodes. ``threading.Condition``'s ``__enter__`` and ``__exit__``
are Python functions: a ``Killed`` delivered inside ``__enter__`` just after its lock was
taken, or inside ``__exit__`` just before it is given back, leaves the lock held for
ever, and every thread that later wants it hangs (seen: the process-wide timer scheduler,
while tier actors were killed under load). :class:`SafeCondition`'s ``with`` calls its
lock's own C methods, with no Python frame of its own around them, so the exception can
only land before the lock is taken or inside the block, whose exit then releases it.
"""

from __future__ import annotations

import queue
import threading
from typing import Any

import pykka

__all__ = ["SafeCondition", "SafeEvent", "SafeFuture", "new_inbox"]


class SafeCondition(threading.Condition):
    """A ``threading.Condition`` whose ``with`` statement enters and leaves its lock by the
    lock's C methods directly (see the module's note). Otherwise the same."""

    # ``with`` looks these up on the type and binds them through the descriptor protocol:
    # a property hands back the lock's own bound methods.
    @property
    def __enter__(self) -> Any:
        return self._lock.__enter__  # type: ignore[attr-defined]

    @property
    def __exit__(self) -> Any:  # noqa: PLE0302 - a property: returns the 4-argument method
        return self._lock.__exit__  # type: ignore[attr-defined]


class SafeEvent(threading.Event):
    """A ``threading.Event`` on a :class:`SafeCondition`: a thread killed while it sets or
    clears the event cannot leave its waiters unable to wait."""

    def __init__(self) -> None:
        super().__init__()
        self._cond = SafeCondition(threading.Lock())


class SafeFuture(pykka.ThreadingFuture[Any]):
    """pykka's ThreadingFuture with a :class:`SafeCondition`: an actor killed while it
    sets a reply leaves the asker a future it can still wait on (with its timeout)."""

    def __init__(self) -> None:
        super().__init__()
        self._condition = SafeCondition()


def new_inbox() -> queue.SimpleQueue[Any]:
    """An actor inbox with no Python-level lock: ``put`` and ``get`` are single C calls,
    so a sender killed mid-``tell`` cannot leave the receiver's inbox locked (and a
    message costs less than through ``queue.Queue``'s condition variables)."""
    return queue.SimpleQueue()
