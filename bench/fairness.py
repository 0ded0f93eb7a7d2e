"""Fairness between users: one quiet user beside a flood of many others.

``--threads`` writer threads store ``--turns`` turns for each of ``--users`` users as fast
as they can (one task per user, as in ``bench/throughput.py``) while one *quiet* user adds
a turn every ``--quiet-interval-ms``. Reported: the quiet user's ``add_turn`` latency
(p50/p99/max), the settle lag of every user (seconds from the turn that pushed a page out
of STM to that page's placement in MTM: ``stats(user)["settle_lag_ms"]``) and of the quiet
user alone, the flood's acknowledged and settled turns/s, every error by type (a fair load must
see none), and the garbage collector's collections during the run (a full one stops
every thread). Offline by default; ``--llm-latency-ms 200`` runs the LLM against a
loopback OpenAI-compatible server that answers after that delay.

    python bench/fairness.py                       # offline
    python bench/fairness.py --llm-latency-ms 200  # a slow provider
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
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _gcwatch import GCWatch  # noqa: E402
from _out import add_out_dir  # noqa: E402
from _out import out_dir as bench_out_dir  # noqa: E402
from throughput import fake_llm, pct, rss_peak_mb, turn  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

QUIET = "quiet-user"


def run(args: argparse.Namespace) -> dict[str, Any]:
    from memoryos_actors import MemoryConfig, MemoryOS

    overrides: dict[str, Any] = {"log_level": "error"}
    server = None
    if args.llm_latency_ms:
        server, llm = fake_llm(args.llm_latency_ms)
        overrides.update(llm)
    cfg = MemoryConfig(**overrides)
    errors: Counter[str] = Counter()
    quiet_errors: Counter[str] = Counter()
    quiet_lat: list[float] = []
    lock = threading.Lock()
    flood_done = threading.Event()
    with tempfile.TemporaryDirectory(prefix="memoryos-bench-") as tmp:
        with MemoryOS.open(Path(tmp), cfg) as mem:
            # The quiet user exists before the flood: its first activation is not measured.
            mem.add_turn(QUIET, "hello", "hi")

            def user_job(u: int) -> None:
                for i in range(1, args.turns + 1):
                    q, r = turn(u, i)
                    try:
                        mem.add_turn(f"user-{u}", q, r)
                    except Exception as exc:  # noqa: BLE001 - counted, the finding
                        with lock:
                            errors[type(exc).__name__] += 1

            def quiet_job() -> None:
                i = 0
                nxt = time.perf_counter()
                while not flood_done.is_set():
                    i += 1
                    q, r = turn(10_000, i)
                    t0 = time.perf_counter()
                    try:
                        mem.add_turn(QUIET, q, r)
                        quiet_lat.append(time.perf_counter() - t0)
                    except Exception as exc:  # noqa: BLE001 - counted, the finding
                        quiet_errors[type(exc).__name__] += 1
                    nxt += args.quiet_interval_ms / 1000.0
                    time.sleep(max(0.0, nxt - time.perf_counter()))

            quiet = threading.Thread(target=quiet_job, name="quiet-user")
            watch = GCWatch().start()
            t0 = time.perf_counter()
            quiet.start()
            with ThreadPoolExecutor(args.threads) as pool:
                list(pool.map(user_job, range(args.users)))
            ack_s = time.perf_counter() - t0
            flood_done.set()
            quiet.join()
            mem.flush()
            settle_s = time.perf_counter() - t0
            collections = watch.stop()
            everyone = mem.stats()
            mine = mem.stats(QUIET)
    if server is not None:
        server.stop()
    total = args.users * args.turns
    ms = 1000.0
    return {
        "bench": "fairness",
        "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        "machine": {
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
        },
        "command": "python bench/fairness.py " + " ".join(sys.argv[1:]),
        "users": args.users,
        "turns_per_user": args.turns,
        "threads": args.threads,
        "quiet_interval_ms": args.quiet_interval_ms,
        "llm_latency_ms": args.llm_latency_ms,
        "quiet_turns": len(quiet_lat),
        "quiet_add_ms": {
            "p50": pct(quiet_lat, 50) * ms,
            "p99": pct(quiet_lat, 99) * ms,
            "max": max(quiet_lat, default=0.0) * ms,
        },
        "quiet_settle_lag_ms": mine.get("settle_lag_ms"),
        "settle_lag_ms": {f"p{p}": everyone.get(f"settle_lag_ms_p{p}") for p in (50, 95, 99)},
        "errors": dict(errors),
        "quiet_errors": dict(quiet_errors),
        "ack_turns_per_s": total / ack_s,
        "settled_turns_per_s": total / settle_s,
        "threads_peak_seen": everyone.get("threads"),
        # Full collections stop every thread: a quiet turn in flight waits them out.
        "gc_collections": collections,
        "peak_rss_mb": rss_peak_mb(),
    }


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--users", type=int, default=100)
    p.add_argument("--turns", type=int, default=100)
    p.add_argument("--threads", type=int, default=16)
    p.add_argument("--quiet-interval-ms", type=float, default=50.0)
    p.add_argument("--llm-latency-ms", type=float, default=0.0)
    p.add_argument("--label", default="", help="suffix of the result file's name")
    add_out_dir(p)
    args = p.parse_args(argv)
    r = run(args)
    out = bench_out_dir(args)
    out.mkdir(parents=True, exist_ok=True)
    name = "fairness" + ("_llm" if args.llm_latency_ms else "") + args.label + ".json"
    (out / name).write_text(json.dumps(r, indent=2) + "\n")
    print(json.dumps({k: r[k] for k in r if k not in ("machine", "date")}, indent=1))
    return 0 if not r["errors"] and not r["quiet_errors"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
