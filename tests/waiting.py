"""The one way tests wait for something to happen: poll a condition until a deadline.

A test that needs another thread, actor or process to have done something polls for that
thing with :func:`wait_until` instead of sleeping "long enough": it goes on as soon as the
condition holds, and on a loaded machine it waits longer instead of failing. The timeout
is a liveness guard that stops a hung test, never a timing assertion.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

__all__ = ["WAIT_S", "wait_until"]

T = TypeVar("T")

#: Default deadline of a wait, seconds: long enough for a slow, shared machine.
WAIT_S = 30.0


def wait_until(
    predicate: Callable[[], T],
    what: str | Callable[[], str],
    timeout: float = WAIT_S,
    interval: float = 0.005,
) -> T:
    """Poll ``predicate()`` every ``interval`` seconds until it returns something truthy,
    and return that value.

    Fails the test with an :class:`AssertionError` naming ``what`` (the thing awaited,
    e.g. ``"the server to accept the new key"``) once ``timeout`` seconds have passed;
    ``what`` may be a function, called only then, so the message can show the state the
    wait ended in. An exception raised by ``predicate`` (an assertion on a side condition,
    say) ends the wait at once and propagates.
    """
    deadline = time.monotonic() + timeout
    while True:
        got = predicate()
        if got:
            return got
        if time.monotonic() >= deadline:
            text = what() if callable(what) else what
            raise AssertionError(f"timed out after {timeout:g} s waiting for {text}")
        time.sleep(interval)
