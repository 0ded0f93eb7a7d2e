"""Kill -9 trials: acknowledged turns must survive a process kill at any moment.

Each trial starts a child process that opens a memory system (fsync ``always``) and stores
turns for a few users, printing each acknowledged page id. The parent kills it with SIGKILL
after a random delay, reopens the data directory, and checks that every acknowledged turn
is present exactly once, in order, across STM, MTM and the archive. Trials reuse the data
directory, so later trials also recover from earlier kills.

    python bench/crash_bench.py --trials 200
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/_out.py
from _out import add_out_dir, run_header  # noqa: E402
from _out import out_dir as bench_out_dir  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

USERS = ("crash-a", "crash-b", "crash-c")

_CHILD = r"""
import sys
from memoryos_actors import MemoryConfig, MemoryOS
cfg = MemoryConfig(fsync="always", mtm_capacity=8, segment_max_pages=4,
                   snapshot_every_turns=25, log_level="critical")
users = sys.argv[2].split(",")
with MemoryOS.open(sys.argv[1], cfg) as mem:
    print("ready", flush=True)
    i = 0
    while True:
        i += 1
        user = users[i % len(users)]
        pid = mem.add_turn(user, f"{user} says number {i} about topic {i % 7}",
                           f"ack {i}")
        print(f"{user} {pid}", flush=True)
"""


def expected_pages(mem: Any, user: str) -> list[str]:
    """Every page id of ``user`` across STM, MTM and archive."""
    return list(mem.stored_page_ids(user))


def trial(data_dir: Path, rng: random.Random, max_delay_s: float = 1.0) -> dict[str, Any]:
    """One kill -9 trial; returns counts and the verification result."""
    from memoryos_actors import MemoryConfig, MemoryOS

    proc = subprocess.Popen(
        [sys.executable, "-c", _CHILD, str(data_dir), ",".join(USERS)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert proc.stdout is not None
    ready = proc.stdout.readline().strip()
    if ready != "ready":
        proc.kill()
        proc.wait()
        raise RuntimeError(f"child did not start: {ready!r}")
    time.sleep(rng.uniform(0.0, max_delay_s))
    proc.send_signal(signal.SIGKILL)
    out, _ = proc.communicate()
    acked: dict[str, list[str]] = {u: [] for u in USERS}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] in acked:
            acked[parts[0]].append(parts[1])
    t0 = time.perf_counter()
    cfg = MemoryConfig(
        fsync="always",
        mtm_capacity=8,
        segment_max_pages=4,
        snapshot_every_turns=25,
        log_level="critical",
    )
    lost = duplicated = 0
    with MemoryOS.open(data_dir, cfg) as mem:
        for user in USERS:
            mem.add_turn(user, "probe after restart", "ok")  # activates and recovers
        recovery_ms = (time.perf_counter() - t0) * 1000.0
        mem.flush()
        for user in USERS:
            ids = expected_pages(mem, user)
            seqs = sorted(int(p[1:]) for p in ids)
            duplicated += len(seqs) - len(set(seqs))
            have = set(ids)
            lost += sum(1 for pid in acked[user] if pid not in have)
            # In order and without gaps: seqs are exactly 1..n.
            if seqs != list(range(1, len(seqs) + 1)):
                lost += 1
    return {
        "acked": sum(len(v) for v in acked.values()),
        "lost": lost,
        "duplicated": duplicated,
        "recovery_ms": recovery_ms,
    }


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--trials", type=int, default=200)
    p.add_argument("--max-delay", type=float, default=1.0, help="seconds before the kill")
    p.add_argument("--seed", type=int, default=1)
    add_out_dir(p)
    args = p.parse_args(argv)
    rng = random.Random(args.seed)
    results = []
    with tempfile.TemporaryDirectory(prefix="memoryos-crash-") as tmp:
        for n in range(args.trials):
            r = trial(Path(tmp), rng, args.max_delay)
            results.append(r)
            print(
                f"trial {n + 1}: acked {r['acked']} lost {r['lost']} "
                f"duplicated {r['duplicated']} recovery {r['recovery_ms']:.1f} ms",
                flush=True,
            )
    rec = sorted(r["recovery_ms"] for r in results)
    summary = {
        **run_header("crash"),
        "trials": len(results),
        "acknowledged_turns": sum(r["acked"] for r in results),
        "turns_lost": sum(r["lost"] for r in results),
        "turns_duplicated": sum(r["duplicated"] for r in results),
        "recovery_ms_p50": rec[len(rec) // 2],
        "recovery_ms_p99": rec[min(len(rec) - 1, int(len(rec) * 0.99))],
    }
    out = bench_out_dir(args)
    out.mkdir(parents=True, exist_ok=True)
    (out / "crash.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(json.dumps(summary, indent=2))
    return 0 if summary["turns_lost"] == 0 and summary["turns_duplicated"] == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
