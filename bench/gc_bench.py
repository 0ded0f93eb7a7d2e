"""What the held pages cost the cyclic garbage collector: the full collections during a
flood, and one full collection's time once the process is quiet.

``--users`` x ``--turns`` turns (the throughput bench's) are stored from ``--threads``
writer threads through the public API (offline, default config) and flushed. Reported:
the collections by generation during the flood (count, total and longest time: a full
collection holds the interpreter lock throughout, so every user's calls wait it out);
then, with every page placed and nothing running, the time of a full collection
(median of ``--collections``), the objects the collector tracks, and the most frequent
of them by type. The pages the tiers hold are most of them, so a full collection's time
grows with the pages held.

    python bench/gc_bench.py --users 100 --turns 100
    python bench/gc_bench.py --users 200 --turns 400
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/_out.py, throughput.py
from _gcwatch import GCWatch  # noqa: E402
from _out import add_out_dir, run_header, write_result  # noqa: E402
from throughput import turn  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def run(users: int, turns: int, threads: int, collections: int) -> dict[str, Any]:
    """Store the turns, then time full collections in a quiet process; the numbers."""
    from memoryos_actors import MemoryConfig, MemoryOS

    cfg = MemoryConfig(log_level="error", max_active_users=max(500, users + 1))
    with tempfile.TemporaryDirectory(prefix="memoryos-bench-") as tmp:
        with MemoryOS.open(Path(tmp), cfg) as mem:

            def user_job(u: int) -> None:
                for i in range(1, turns + 1):
                    q, r = turn(u, i)
                    mem.add_turn(f"user-{u}", q, r)

            watch = GCWatch().start()
            t0 = time.perf_counter()
            with ThreadPoolExecutor(threads) as pool:
                list(pool.map(user_job, range(users)))
            mem.flush()
            elapsed = time.perf_counter() - t0
            during = watch.stop()
            time.sleep(0.5)  # the last timers and hand-offs settle
            took = []
            for _ in range(max(1, collections)):
                t1 = time.perf_counter()
                gc.collect()
                took.append((time.perf_counter() - t1) * 1000.0)
            tracked = gc.get_objects()
            by_type = Counter(type(o).__name__ for o in tracked).most_common(12)
            n_tracked = len(tracked)
            del tracked
    return {
        "users": users,
        "turns_per_user": turns,
        "threads": threads,
        "settled_turns_per_s": users * turns / elapsed,
        "during_flood": during,
        "quiet_full_collection_ms": {
            "median": statistics.median(took),
            "min": min(took),
            "runs": took,
        },
        "tracked_objects": n_tracked,
        "tracked_by_type": dict(by_type),
    }


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--users", type=int, default=100)
    p.add_argument("--turns", type=int, default=100)
    p.add_argument("--threads", type=int, default=16)
    p.add_argument("--collections", type=int, default=5, help="quiet full collections timed")
    p.add_argument("--name", default="gc", help="the result file's stem")
    add_out_dir(p)
    args = p.parse_args(argv)
    result = {
        **run_header("gc"),
        **run(args.users, args.turns, args.threads, args.collections),
    }
    path = write_result(args, f"{args.name}.json", result)
    full = result["during_flood"]["gen2"]
    quiet = result["quiet_full_collection_ms"]
    print("| metric | value |\n| --- | --- |")
    print(f"| settled turns/s | {result['settled_turns_per_s']:.0f} |")
    print(
        f"| full collections during the flood: count, total ms, longest ms | "
        f"{full['collections']}, {full['total_ms']:.0f}, {full['max_ms']:.0f} |"
    )
    print(
        f"| a full collection when quiet, ms (median / min of {len(quiet['runs'])}) | "
        f"{quiet['median']:.1f} / {quiet['min']:.1f} |"
    )
    print(f"| tracked objects | {result['tracked_objects']} |")
    top = ", ".join(f"{k} {v}" for k, v in list(result["tracked_by_type"].items())[:6])
    print(f"| most tracked | {top} |")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
