"""Many users, few live: passivation keeps memory and threads bounded.

N users x T turns from a thread pool with ``max_active_users`` live groups at most. Each
worker takes a user and stores its turns as one session, so users activate, go idle and are
passivated (least recently used first) as the run moves on; a second pass revisits a
fraction of the users, which reactivates them from their snapshots. Reports turns/s, peak
RSS, peak live thread count, and activation latency p50/p99: over every activation, and
for the first pass and the revisit apart.

    python bench/scale_bench.py --users 10000 --turns 50 --max-active 500
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/_out.py
from _out import add_out_dir, run_header  # noqa: E402
from _out import out_dir as bench_out_dir  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from throughput import pct, turn  # noqa: E402


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--users", type=int, default=10000)
    p.add_argument("--turns", type=int, default=50)
    p.add_argument("--max-active", type=int, default=500)
    p.add_argument("--threads", type=int, default=16)
    p.add_argument("--revisit", type=float, default=0.1, help="fraction of users revisited")
    add_out_dir(p)
    args = p.parse_args(argv)

    from memoryos_actors import MemoryConfig, MemoryOS

    cfg = MemoryConfig(
        max_active_users=args.max_active, log_level="error", snapshot_every_turns=1000
    )
    peak_threads = threading.active_count()
    stop = threading.Event()

    def sample() -> None:
        nonlocal peak_threads
        while not stop.wait(0.05):
            peak_threads = max(peak_threads, threading.active_count())

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    done = 0
    lock = threading.Lock()
    with tempfile.TemporaryDirectory(prefix="memoryos-scale-") as tmp:
        with MemoryOS.open(Path(tmp), cfg) as mem:

            def session(u: int) -> None:
                nonlocal done
                for i in range(1, args.turns + 1):
                    mem.add_turn(f"user-{u}", *turn(u, i))
                with lock:
                    done += 1
                    if done % 1000 == 0:
                        print(
                            f"{done} users, {threading.active_count()} threads, "
                            f"{mem.stats()['active_users']} active",
                            flush=True,
                        )

            t0 = time.perf_counter()
            with ThreadPoolExecutor(args.threads) as pool:
                list(pool.map(session, range(args.users)))
            first_pass_s = time.perf_counter() - t0
            # The facade keeps its last 10,000 activation times (stats() percentiles): the
            # first pass's are copied now, the revisit's are the newest ones at the end.
            first_acts = mem._lifecycle.activation_samples()  # noqa: SLF001 - the bench reads raw samples
            first_n = mem.stats()["activations"]
            revisit = list(range(0, args.users, max(1, round(1 / args.revisit))))

            def again(u: int) -> None:
                mem.add_turn(f"user-{u}", "coming back after a while", "welcome back")

            with ThreadPoolExecutor(args.threads) as pool:
                list(pool.map(again, revisit))
            mem.flush()
            total_s = time.perf_counter() - t0
            stats = mem.stats()
            again_n = stats["activations"] - first_n
            again_acts = mem._lifecycle.activation_samples()[-again_n:] if again_n else []  # noqa: SLF001
    acts = first_acts + again_acts
    stop.set()
    sampler.join()
    turns = args.users * args.turns + len(revisit)
    result: dict[str, Any] = {
        **run_header("scale"),
        "users": args.users,
        "turns_per_user": args.turns,
        "max_active_users": args.max_active,
        "turns_total": turns,
        "turns_per_s_first_pass": args.users * args.turns / first_pass_s,
        "turns_per_s_overall": turns / total_s,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
        "peak_threads": peak_threads,
        "activations": stats["activations"],
        "passivations": stats["passivations"],
        "activation_ms_p50": pct(acts, 50),
        "activation_ms_p99": pct(acts, 99),
        "activation_samples": len(acts),
        "first_pass_activations": first_n,
        "first_pass_activation_ms_p50": pct(first_acts, 50),
        "first_pass_activation_ms_p99": pct(first_acts, 99),
        "revisit_activation_ms_p50": pct(again_acts, 50) if again_acts else None,
        "revisit_activation_ms_p99": pct(again_acts, 99) if again_acts else None,
    }
    out = bench_out_dir(args)
    out.mkdir(parents=True, exist_ok=True)
    (out / "scale.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    print(f"target RSS < 2 GiB: {'met' if result['peak_rss_mb'] < 2048 else 'MISSED'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
