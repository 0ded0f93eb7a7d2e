"""Threads and memory per active user.

Opens a memory system with room for ``--users`` active users, writes ``--turns`` turns to
each (so every user's actor group is running), then reports the process's threads and
resident memory before and after, per active user and per 1,000 active users.

    python bench/footprint.py --users 1000
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _out import add_out_dir  # noqa: E402
from _out import out_dir as bench_out_dir  # noqa: E402
from throughput import turn  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def rss_mb() -> float:
    """Resident memory of this process now, MiB (Linux /proc; peak RSS elsewhere)."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def run(args: argparse.Namespace) -> dict[str, Any]:
    from memoryos_actors import MemoryConfig, MemoryOS

    cfg = MemoryConfig(log_level="error", max_active_users=args.users + 10)
    with tempfile.TemporaryDirectory(prefix="memoryos-bench-") as tmp:
        with MemoryOS.open(Path(tmp), cfg) as mem:
            mem.add_turn("warm-up", "hello", "hi")
            mem.flush()
            threads0, rss0 = threading.active_count(), rss_mb()
            t0 = time.perf_counter()
            for u in range(args.users):
                for i in range(1, args.turns + 1):
                    q, r = turn(u, i)
                    mem.add_turn(f"user-{u}", q, r)
            mem.flush()
            elapsed = time.perf_counter() - t0
            threads1, rss1 = threading.active_count(), rss_mb()
            active = mem.stats()["active_users"]
    per_user_threads = (threads1 - threads0) / args.users
    per_user_mb = (rss1 - rss0) / args.users
    return {
        "bench": "footprint",
        "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count()},
        "command": "python bench/footprint.py " + " ".join(sys.argv[1:]),
        "users": args.users,
        "turns_per_user": args.turns,
        "active_users": active,
        "threads_before": threads0,
        "threads_after": threads1,
        "threads_per_user": per_user_threads,
        "threads_per_1000_users": per_user_threads * 1000,
        "rss_mb_before": rss0,
        "rss_mb_after": rss1,
        "rss_mb_per_1000_users": per_user_mb * 1000,
        "seconds": elapsed,
    }


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--users", type=int, default=1000)
    p.add_argument("--turns", type=int, default=10)
    add_out_dir(p)
    args = p.parse_args(argv)
    r = run(args)
    out = bench_out_dir(args)
    out.mkdir(parents=True, exist_ok=True)
    (out / "footprint.json").write_text(json.dumps(r, indent=2) + "\n")
    print(json.dumps(r, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
