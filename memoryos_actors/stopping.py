"""Stopping on SIGTERM and SIGINT: stop taking work, finish or refuse the work in flight,
close the memory system, exit.

The long-running commands (``serve``, ``mcp``, ``chat``, ``ingest``) own both signals while
they run, through :class:`StopSignals`, instead of leaving them to Python's defaults:
SIGTERM would end the process before :meth:`MemoryOS.close` runs (no shutdown snapshot, no
final WAL sync), and SIGINT would raise ``KeyboardInterrupt`` wherever the main thread
happens to be, half way through a call.

1. The first signal asks for a graceful stop: the command takes no new work, lets the work
   in flight finish (each command says what that is), then closes the memory system.
2. A second signal stops waiting for the work in flight; closing still happens.
3. While the memory system is closing, further signals only say so: closing snapshots every
   active user, syncs the WAL, drains the gateway and releases the data directory, within
   ``--shutdown-timeout`` seconds (:data:`DEFAULT_SHUTDOWN_TIMEOUT_S`). Only SIGKILL skips
   it, and loses nothing acknowledged: the next start replays the WAL.

Exit codes after a stop: 0, or 130 for SIGINT where a command says so (``chat``,
``ingest``: an interactive command cut short by Ctrl-C).

While a command owns the stop signals, SIGUSR1 (where the platform has it) prints the
stack of every thread on stderr and changes nothing else: what a stop that takes long is
waiting for.
"""

from __future__ import annotations

import contextlib
import faulthandler
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, Self, TypeVar

__all__ = ["DEFAULT_SHUTDOWN_TIMEOUT_S", "StopRequested", "StopSignals"]

T = TypeVar("T")

DEFAULT_SHUTDOWN_TIMEOUT_S = 30.0
"""Default of ``--shutdown-timeout``: seconds for each stage of a stop (the work in flight,
then closing the memory system)."""

_SIGNALS = (signal.SIGINT, signal.SIGTERM)
#: Prints every thread's stack on stderr (POSIX only).
_DUMP_SIGNAL: int | None = getattr(signal, "SIGUSR1", None)
_POLL_S = 0.05
"""How often a wait for work in flight looks at the signals received, seconds. A signal
handler cannot safely wake a thread (it may interrupt the very lock it would take)."""


class StopRequested(BaseException):
    """Raised in the main thread, inside :meth:`StopSignals.interruptible`, when a stop
    signal arrives: it leaves a blocking read of input at once.

    A ``BaseException``, like ``KeyboardInterrupt``, so that no ``except Exception``
    on the way swallows it.
    """


def _say(text: str) -> None:
    # os.write, not print: a signal handler may interrupt a print to stderr in progress,
    # and a buffered stream refuses a reentrant write.
    try:
        os.write(2, f"memoryos: {text}\n".encode("utf-8", "replace"))
    except OSError:
        pass


class StopSignals:
    """Own SIGTERM and SIGINT in the main thread while the context is open (see the module
    docstring for what each signal does); the previous handlers come back on exit and no
    signal is raised again.

    ``stopping`` says what the first signal does (printed on stderr with the signal's name);
    ``on_signal(count)`` is called in the main thread, from the signal handler, with the
    number of signals received so far: it must only set flags or write to a pipe.
    Outside the main thread (where signals cannot be caught) the context does nothing.
    """

    def __init__(
        self,
        stopping: str,
        on_signal: Callable[[int], None] | None = None,
        *,
        shutdown_timeout: float = DEFAULT_SHUTDOWN_TIMEOUT_S,
    ) -> None:
        self.stopping = stopping
        self.on_signal = on_signal
        self.shutdown_timeout = shutdown_timeout
        #: The first stop signal received (``signal.SIGTERM`` or ``signal.SIGINT``), or None.
        self.signum: int | None = None
        #: How many stop signals arrived.
        self.count = 0
        #: ``time.monotonic()`` when the first one arrived.
        self.first_at: float | None = None
        self._closing = False
        self._armed = False
        self._previous: dict[int, Any] = {}
        self._dumps = False

    # -- state -------------------------------------------------------------------------------

    @property
    def requested(self) -> bool:
        """Whether a stop was asked for (one signal or more)."""
        return self.count > 0

    @property
    def hurry(self) -> bool:
        """Whether a second signal asked not to wait for the work in flight."""
        return self.count > 1

    @property
    def name(self) -> str:
        """The first signal's name (``"SIGTERM"``), or ``""``."""
        return signal.Signals(self.signum).name if self.signum is not None else ""

    def exit_code(self, sigint: int = 0) -> int:
        """0, or ``sigint`` when the stop came from SIGINT."""
        return sigint if self.signum == signal.SIGINT else 0

    def closing(self) -> None:
        """Say that the memory system is closing now: later signals only say so."""
        self._closing = True

    # -- signals -----------------------------------------------------------------------------

    def __enter__(self) -> Self:
        if threading.current_thread() is threading.main_thread():
            for sig in _SIGNALS:
                self._previous[sig] = signal.signal(sig, self._handle)
            if _DUMP_SIGNAL is not None and signal.getsignal(_DUMP_SIGNAL) in (
                signal.SIG_DFL,
                None,
            ):
                # Written by the interpreter itself, whatever the threads are doing, to
                # file descriptor 2 (sys.stderr may be a stream with none).
                faulthandler.register(_DUMP_SIGNAL, file=2, all_threads=True, chain=False)
                self._dumps = True
        return self

    def __exit__(self, exc_type: object, *_exc: object) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous.clear()
        if self._dumps and _DUMP_SIGNAL is not None:
            faulthandler.unregister(_DUMP_SIGNAL)
            self._dumps = False
        if self.requested and self._closing and exc_type is None:
            _say(f"stopped on {self.name}; the memory system is closed")

    def _handle(self, signum: int, _frame: object) -> None:
        self.count += 1
        name = signal.Signals(signum).name
        if self.count == 1:
            self.signum = signum
            self.first_at = time.monotonic()
        # What the signal does is done before it is announced: whoever reads the notice
        # can count on it.
        if self.on_signal is not None:
            self.on_signal(self.count)
        if self._closing:
            _say(
                f"{name}: closing the memory system (snapshots, WAL sync; its waits end "
                f"within {self.shutdown_timeout:g} s); SIGKILL would skip that"
            )
        elif self.count == 1:
            _say(
                f"{name}: stopping: {self.stopping}; send it again to stop waiting for work "
                "in flight"
            )
        elif self.count == 2:
            _say(f"{name} again: no longer waiting for work in flight; closing the memory system")
        if self._armed:
            self._armed = False  # one raise per arming, whatever happens next
            raise StopRequested(name)

    @contextlib.contextmanager
    def interruptible(self) -> Iterator[None]:
        """Within the block, a stop signal raises :class:`StopRequested` at once (also when
        one arrived before it): for blocking reads of input, never for library calls."""
        self._armed = True
        try:
            if self.requested:
                self._armed = False
                raise StopRequested(self.name)
            yield
        finally:
            self._armed = False

    # -- waiting for work in flight ------------------------------------------------------------

    def call(
        self, fn: Callable[..., T], *args: Any, give_up_at: int = 2, **kwargs: Any
    ) -> tuple[bool, T | None]:
        """Run ``fn(*args, **kwargs)`` in a worker thread and wait for it, unless
        ``give_up_at`` stop signals have arrived (before or meanwhile) or the first one
        arrived more than ``shutdown_timeout`` seconds ago.

        Returns ``(True, result)``, or ``(False, None)`` when the wait was given up (the
        call goes on in its thread; closing the memory system waits for calls in flight
        within its timeout, or refuses them). An exception of ``fn`` is raised here.
        """
        if self._give_up(give_up_at):
            return False, None
        done = threading.Event()
        box: dict[str, Any] = {}

        def run() -> None:
            try:
                box["result"] = fn(*args, **kwargs)
            except BaseException as exc:  # noqa: BLE001 - handed to the waiting thread
                box["error"] = exc
            finally:
                done.set()

        threading.Thread(target=run, name="memoryos-stoppable", daemon=True).start()
        while not done.wait(_POLL_S):
            if self._give_up(give_up_at):
                return False, None
        if "error" in box:
            raise box["error"]
        return True, box["result"]

    def _give_up(self, at: int) -> bool:
        if self.count >= at:
            return True
        first = self.first_at
        return first is not None and time.monotonic() - first > self.shutdown_timeout
