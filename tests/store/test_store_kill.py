"""Kill -9 while appending: every acknowledged record survives, exactly once, in order.

Each trial forks a child (already importing the store, so a trial costs milliseconds, not an
interpreter start) that appends to the same WAL and writes each acknowledged LSN to its
stdout, a pipe. The parent SIGKILLs it at a random moment and reopens the WAL. With
``fsync="interval"`` nothing may be lost either: a killed process leaves its writes in the
page cache; only a machine crash may lose the last interval.
"""

from __future__ import annotations

import os
import random
import signal
import sys
import time
from pathlib import Path

import pytest

from memoryos_actors.store.wal import WAL

pytestmark = pytest.mark.skipif(
    sys.platform == "win32" or not hasattr(os, "fork"), reason="needs fork and SIGKILL"
)

TRIALS = 20


def _child(path: Path, policy: str, out_fd: int) -> None:
    """Append forever, acknowledging each LSN on ``out_fd``; never returns."""
    try:
        os.dup2(out_fd, 1)
        wal = WAL(path, fsync=policy, interval=0.005)
        expected = wal.last_lsn
        rng = random.Random(os.getpid())
        while True:
            expected += 1
            lsn = wal.append({"k": expected, "pad": "x" * rng.randrange(0, 400)})
            if lsn != expected:
                os._exit(3)
            os.write(1, f"{lsn}\n".encode())
    finally:
        os._exit(2)


def _trial(path: Path, policy: str, rng: random.Random) -> list[int]:
    """Run one child, kill it at a random moment, return the LSNs it acknowledged."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child
        os.close(read_fd)
        _child(path, policy, write_fd)
    os.close(write_fd)
    chunks = [os.read(read_fd, 65536)]  # the child is running and has acknowledged something
    # Interval appends are ~100x faster than fsynced ones: a shorter window keeps the WAL
    # (re-read after every trial) small while still landing kills mid-append.
    # Not synchronisation: the kill lands at a random moment of the child's appends.
    time.sleep(rng.uniform(0.0, 0.02 if policy == "always" else 0.004))
    os.kill(pid, signal.SIGKILL)
    while chunk := os.read(read_fd, 65536):
        chunks.append(chunk)
    os.close(read_fd)
    _, status = os.waitpid(pid, 0)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL, status
    text = b"".join(chunks).decode()
    complete = text[: text.rfind("\n") + 1]  # a line cut by the kill was not fully reported
    return [int(line) for line in complete.split()]


@pytest.mark.parametrize("policy", ["always", "interval"])
def test_sigkill_never_loses_an_acknowledged_record(tmp_path: Path, policy: str) -> None:
    path = tmp_path / "wal.log"
    rng = random.Random(1234)
    acked_total: list[int] = []
    for _ in range(TRIALS):
        acked = _trial(path, policy, rng)
        assert acked, "the child acknowledged nothing"
        acked_total.extend(acked)
        with WAL(path, fsync="never") as wal:
            stored = list(wal.read())
        lsns = [lsn for lsn, _ in stored]
        assert lsns == list(range(1, len(lsns) + 1))  # in order, no gaps, no duplicates
        assert all(record["k"] == lsn for lsn, record in stored)  # each record is its own
        assert set(acked_total) <= set(lsns)
    assert acked_total == sorted(acked_total)  # children continued the same LSN sequence
