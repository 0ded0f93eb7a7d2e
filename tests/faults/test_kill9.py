"""A process killed with SIGKILL at a random moment loses no acknowledged turn.

A child process stores turns (and now and then a user profile) with ``fsync="always"`` and
prints each acknowledgement; the parent kills it after a random delay, reopens the data
directory and compares what was acknowledged with what was recovered. Trials reuse one data
directory, so later trials also recover data that earlier kills left behind.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
from pathlib import Path

from faultutil import check_ledger, small_config, turn_query

from memoryos_actors import MemoryOS

USERS = ("kill-a", "kill-b", "kill-c")
#: Every trial is a real SIGKILL of a real writer, at a random moment of its run; each
#: costs a child's start-up (about 2 s). Eight kills at random moments of one growing
#: data directory keep the scenario; the twenty of before repeated it at 2.5 times the
#: cost (#27).
TRIALS = 8
MAX_DELAY_S = 0.4
#: Background work for a few hundred turns settles far sooner; this only stops a hang.
FLUSH_GUARD_S = 20.0

# Kept tiny so most of each trial's time is spent storing turns, not starting up.
_CHILD = r"""
import sys
from memoryos_actors import MemoryConfig, MemoryOS, UserProfile
from faultutil import small_config, turn_query

data_dir, users, start = sys.argv[1], sys.argv[2].split(","), int(sys.argv[3])
with MemoryOS.open(data_dir, small_config(fsync="always", snapshot_every_turns=15)) as mem:
    print("ready", flush=True)
    k = start
    while True:
        k += 1
        user = users[k % len(users)]
        if k % 11 == 0:
            mem.set_user_profile(user, UserProfile(name=f"name-{k}"))
            print(f"profile {user} {k}", flush=True)
        else:
            pid = mem.add_turn(user, turn_query(user, k), f"ack {k}")
            print(f"turn {user} {pid} {k}", flush=True)
"""


def _run_child(data_dir: Path, start: int, delay_s: float) -> list[list[str]]:
    """Run the writer, SIGKILL it after ``delay_s`` seconds; return its acknowledgements."""
    proc = subprocess.Popen(
        [sys.executable, "-c", _CHILD, str(data_dir), ",".join(USERS), str(start)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        cwd=Path(__file__).parent,  # so the child imports faultutil like the tests do
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parent)},
    )
    assert proc.stdout is not None
    try:
        ready = proc.stdout.readline().strip()
        assert ready == "ready", f"writer did not start: {ready!r}"
        try:
            proc.wait(timeout=delay_s)
        except subprocess.TimeoutExpired:
            pass
        proc.send_signal(signal.SIGKILL)
        out, _ = proc.communicate()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == -signal.SIGKILL, f"writer exited by itself ({proc.returncode})"
    return [line.split() for line in out.splitlines()]


def test_sigkill_at_random_moments_never_loses_or_duplicates_an_acknowledged_turn(
    tmp_path: Path,
) -> None:
    rng = random.Random(20250607)
    data_dir = tmp_path / "data"
    acked: dict[str, dict[str, str]] = {u: {} for u in USERS}
    # The newest acknowledged profile per user, by the op number that set it.
    profile_k: dict[str, int] = {}
    total_acked = 0
    for trial in range(TRIALS):
        start = (trial + 1) * 1_000_000
        lines = _run_child(data_dir, start, rng.uniform(0.0, MAX_DELAY_S))
        for parts in lines:
            if len(parts) == 4 and parts[0] == "turn":
                _, user, pid, k = parts
                assert pid not in acked[user], f"trial {trial}: {pid} acknowledged twice"
                acked[user][pid] = turn_query(user, int(k))
                total_acked += 1
            elif len(parts) == 3 and parts[0] == "profile":
                profile_k[parts[1]] = int(parts[2])
        with MemoryOS.open(data_dir, small_config(fsync="always", snapshot_every_turns=15)) as mem:
            mem.flush(timeout=FLUSH_GUARD_S)
            problems = []
            for user in USERS:
                if not acked[user] and user not in mem.users():
                    continue
                problems += check_ledger(mem, user, acked[user])
                if user in profile_k:
                    name = mem.user_state(user).profile.name
                    got = int(name.rsplit("-", 1)[1]) if name else -1
                    # A later profile may have been written but not acknowledged.
                    if got < profile_k[user]:
                        problems.append(
                            f"{user}: profile {name!r} is older than the "
                            f"acknowledged name-{profile_k[user]}"
                        )
            assert problems == [], f"trial {trial}: {problems}"
    assert total_acked > TRIALS, "the writer acknowledged almost nothing; the test proves little"
