"""Helpers of the graceful-stop tests: what a clean close leaves on disk, whether the data
directory opens again, and the output of a process read while it runs."""

from __future__ import annotations

import subprocess
import threading
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import IO, Any

from waiting import wait_until

#: Seconds a stopping process, or an awaited line of output, may take before the test fails.
WAIT_S = 90.0


def assert_closed_cleanly(data_dir: Path, users: Iterable[str]) -> None:
    """Each user's newest snapshot was taken after its last turn, so opening the user again
    replays no turn from the WAL: what ``MemoryOS.close`` leaves behind. A process killed
    before closing leaves its recent turns only in the WAL (and a new user no snapshot)."""
    from memoryos_actors.store.userstore import UserStore, list_users

    users = list(users)
    assert set(users) <= set(list_users(data_dir)), list_users(data_dir)
    for user in users:
        with UserStore(data_dir, user, create=False) as store:
            found = store.load()
        assert found.state is not None, f"{user}: no snapshot at all"
        covered = int(found.state["seq"])
        newer = [
            int(rec["seq"])
            for _lsn, rec in found.records
            if rec.get("t") == "turn" and int(rec["seq"]) > covered
        ]
        assert not newer, f"{user}: turns {newer} are only in the WAL, after the snapshot"


def assert_reopens_with(data_dir: Path, turns: Mapping[str, int]) -> None:
    """The data directory opens (its lock was released) and each user has ``turns[user]``
    turns."""
    from memoryos_actors import MemoryOS

    with MemoryOS.open(data_dir) as mem:
        found = {user: mem.user_state(user).turns for user in turns}
    assert found == dict(turns)


class Lines:
    """The lines a pipe of a running process gives, collected by a thread of their own."""

    def __init__(self, stream: IO[str]) -> None:
        self._lines: list[str] = []
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self._thread.start()

    def _read(self, stream: IO[str]) -> None:
        with stream:
            for line in stream:
                with self._lock:
                    self._lines.append(line)

    @property
    def lines(self) -> list[str]:
        with self._lock:
            return list(self._lines)

    @property
    def text(self) -> str:
        return "".join(self.lines)

    def wait_for(
        self,
        found: Callable[[list[str]], bool],
        what: str,
        proc: subprocess.Popen[Any] | None = None,
    ) -> None:
        """Wait until ``found(lines)``; fail after :data:`WAIT_S` seconds, or as soon as
        ``proc`` has exited without it."""

        def seen() -> bool:
            if found(self.lines):
                return True
            code = None if proc is None else proc.poll()
            if code is not None:
                self.join()  # the rest of the output, then judge
                assert found(self.lines), (
                    f"the process exited ({code}) before {what}: {self.text[-3000:]}"
                )
                return True
            return False

        wait_until(seen, lambda: f"{what} (output so far: {self.text[-3000:]})", WAIT_S, 0.02)

    def join(self) -> None:
        """Wait for the end of the stream (the process has exited)."""
        self._thread.join(WAIT_S)


def stop_and_wait(proc: subprocess.Popen[Any], sig: int) -> int:
    """Send ``sig`` to ``proc`` and return its exit code (killed after :data:`WAIT_S`)."""
    proc.send_signal(sig)
    return wait_exit(proc)


def wait_exit(proc: subprocess.Popen[Any]) -> int:
    """The exit code of ``proc``; killed (and the test failed) after :data:`WAIT_S` s."""
    try:
        return proc.wait(WAIT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise AssertionError(f"the process did not exit within {WAIT_S} s") from None


def kill_if_running(proc: subprocess.Popen[Any], *readers: Lines) -> None:
    """Leave no process or thread behind, whatever the test did (``readers`` close the
    pipes they read)."""
    if proc.poll() is None:
        proc.kill()
    proc.wait()
    if proc.stdin is not None:
        try:
            proc.stdin.close()
        except BrokenPipeError:
            pass
    for reader in readers:
        reader.join()
