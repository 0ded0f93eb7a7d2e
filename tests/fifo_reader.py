"""A reader of a FIFO on a thread, for tests that write into one."""

from __future__ import annotations

import os
import select
import threading
import time
from pathlib import Path

__all__ = ["FifoReader"]


class FifoReader:
    """Read ``path`` (a FIFO) on a thread until its writer closes it, at most ``timeout``
    seconds. Opened without blocking before the thread starts, so a writer's blocking open
    finds a reader; ``data`` is everything read once :meth:`join` returns. A FIFO never
    written (say, replaced by a regular file) ends the thread at the timeout."""

    def __init__(self, path: Path, timeout: float = 60.0) -> None:
        self._fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        self._deadline = time.monotonic() + timeout
        self._chunks: list[bytes] = []
        self._thread = threading.Thread(target=self._run, name="fifo-reader", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        started = False  # before a writer opens it, an empty read means nothing yet
        try:
            while time.monotonic() < self._deadline:
                select.select([self._fd], [], [], 0.05)
                try:
                    chunk = os.read(self._fd, 1 << 16)
                except BlockingIOError:
                    started = True  # a writer has it open; nothing to read just now
                    continue
                if chunk:
                    started = True
                    self._chunks.append(chunk)
                elif started:
                    return  # the writer closed it
                else:
                    time.sleep(0.01)
        finally:
            os.close(self._fd)

    def join(self) -> bytes:
        """Everything read, once the writer closed the FIFO (or the time ran out)."""
        self._thread.join()
        return b"".join(self._chunks)
