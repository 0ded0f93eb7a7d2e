"""A kill leaves the interpreter as it found it: no asynchronous-exception flag left set.

Clearing a pending ``Killed`` with ``PyThreadState_SetAsyncExc(tid, NULL)`` left CPython
3.11's interpreter-wide "asynchronous exception pending" flag set, after which any call
made under ``sys.settrace`` (coverage, a debugger, a profiler) never returned. Run in a
child process: on the failure the child hangs, and the parent's timeout says so.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

_ROOT = Path(__file__).resolve().parents[2]

_CHILD = textwrap.dedent(
    """
    import sys, threading
    import supervisor as sv

    class Spinner(sv.SupervisedActor):
        def on_receive(self, message):
            entered, release = message
            entered.set()
            while not release.is_set():  # Python bytecode: a Killed lands here
                pass

    def traced_call():
        return "returned"

    for _ in range(3):
        entered, release = threading.Event(), threading.Event()
        ref = Spinner.start()
        future = ref.ask((entered, release), block=False)
        assert entered.wait(10)
        assert sv.kill(ref, "test") is True
        try:
            future.get(timeout=10)
        except sv.Killed:
            pass
        assert sv.wait_exit(ref, timeout=10) is not None
        release.set()
    sys.settrace(lambda *args: None)
    print(traced_call())
    sys.settrace(None)
    """
)


def test_a_call_under_settrace_returns_after_actors_were_killed(tmp_path: Path) -> None:
    # The timeout only keeps the failure from stalling the suite: the child needs well
    # under a second.
    done = subprocess.run(
        [sys.executable, "-c", _CHILD],
        cwd=_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1:] == ["returned"]
