"""The Ray backend next to the in-process one: throughput, latency, overhead, recovery.

For the in-process system and for Ray clusters of 1, 2 and 4 shards (on this machine),
U users x T turns are stored from ``--threads`` writer threads through the public API
(offline backends, fsync ``interval``). Reported per backend: acknowledged turns/s (all
``add_turn`` calls returned), settled turns/s (after ``flush``: background work done),
``add_turn`` p50/p95/p99, and each shard process's resident memory.

Then, with one shard: the per-call overhead of the Ray path (a no-op call to the shard
through the facade: its latency and the CPU it costs in the facade's and the shard's
process; and one user's sequential ``add_turn`` against the in-process system, measured
in the same run), and the recovery time after a shard is SIGKILLed (from the
kill until an ``add_turn`` for a user of that shard returns: Ray's restart, the shard
reopening its data directory, and the user's recovery from snapshot + WAL).

Ray runs on loopback only (``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``) with its files in a
temporary directory that is deleted at the end.

    python bench/ray_bench.py --users 100 --turns 100 --threads 16
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import signal
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/_out.py
from _out import add_out_dir  # noqa: E402
from _out import out_dir as bench_out_dir  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.throughput import pct, turn


def _rss_mb(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return float("nan")


def _cpu_s(pid: int) -> float:
    """CPU seconds (user + system) process ``pid`` has used so far."""
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _config() -> Any:
    from memoryos_actors import MemoryConfig

    return MemoryConfig(fsync="interval", log_level="error", max_active_users=1000)


def _open(data_dir: Path, shards: int) -> Any:
    from memoryos_actors import MemoryOS

    if shards == 0:
        return MemoryOS.open(data_dir, _config())
    from memoryos_actors.cluster import RayCluster

    return MemoryOS.open(data_dir, _config(), cluster=RayCluster(shards=shards))


def load(shards: int, users: int, turns: int, threads: int, root: Path) -> dict[str, Any]:
    """One ingest run: ``shards`` = 0 is the in-process backend."""
    lat: list[float] = []
    lock = threading.Lock()
    mem = _open(root / f"load-{shards}", shards)
    try:

        def user_job(u: int) -> None:
            local = []
            for i in range(1, turns + 1):
                q, r = turn(u, i)
                t0 = time.perf_counter()
                mem.add_turn(f"user-{u}", q, r)
                local.append(time.perf_counter() - t0)
            with lock:
                lat.extend(local)

        t0 = time.perf_counter()
        with ThreadPoolExecutor(threads) as pool:
            list(pool.map(user_job, range(users)))
        ack_s = time.perf_counter() - t0
        mem.flush(timeout=3600)
        settle_s = time.perf_counter() - t0
        rss = [_rss_mb(i.pid) for i in mem.shard_info()] if shards else []
    finally:
        mem.close()
    total = users * turns
    return {
        "backend": "in-process" if shards == 0 else f"ray, {shards} shard(s)",
        "shards": shards,
        "turns_total": total,
        "ack_turns_per_s": total / ack_s,
        "settled_turns_per_s": total / settle_s,
        "add_turn_ms": {f"p{p}": pct(lat, p) * 1000.0 for p in (50, 95, 99)},
        "shard_rss_mb": rss,
    }


def overhead(calls: int, root: Path) -> dict[str, Any]:
    """Per-call cost of the Ray path, against the in-process system in the same run."""
    out: dict[str, Any] = {"calls": calls}
    for shards in (0, 1):
        mem = _open(root / f"overhead-{shards}", shards)
        try:
            mem.add_turn("warm", "warm up", "ok")
            adds = []
            for i in range(calls):
                q, r = turn(1, i)
                t0 = time.perf_counter()
                mem.add_turn("solo", q, r)
                adds.append(time.perf_counter() - t0)
                if i % 50 == 49:
                    mem.flush()  # keep the background queue short: measure the call
            key = "in_process" if shards == 0 else "ray"
            out[f"{key}_add_turn_ms"] = {f"p{p}": pct(adds, p) * 1000.0 for p in (50, 99)}
            if shards:
                pings = []
                shard_pid = mem.shard_info()[0].pid
                cpu0, shard0 = time.process_time(), _cpu_s(shard_pid)
                for _ in range(calls):
                    t0 = time.perf_counter()
                    mem._calls.call(0, "ping", retry=False)
                    pings.append(time.perf_counter() - t0)
                cpu1, shard1 = time.process_time(), _cpu_s(shard_pid)
                out["ray_noop_call_ms"] = {f"p{p}": pct(pings, p) * 1000.0 for p in (50, 99)}
                # CPU a call costs, whatever the machine's load does to its wall time.
                out["ray_noop_call_cpu_ms"] = {
                    "facade_process": (cpu1 - cpu0) / calls * 1000.0,
                    "shard_process": (shard1 - shard0) / calls * 1000.0,
                }
        finally:
            mem.close()
    out["ray_minus_in_process_add_turn_p50_ms"] = (
        out["ray_add_turn_ms"]["p50"] - out["in_process_add_turn_ms"]["p50"]
    )
    return out


def recovery(trials: int, turns_before: int, root: Path, split: bool = False) -> dict[str, Any]:
    """Seconds from SIGKILL of the shard until an add_turn for one of its users returns.

    With ``split``, also the two parts: until the restarted shard answers, and the user's
    first call after that.
    """
    mem = _open(root / "recovery", 1)
    times, restarts, user_recoveries = [], [], []
    try:
        for i in range(1, turns_before + 1):
            mem.add_turn("rec", *turn(2, i))
        for trial in range(trials):
            pid = mem.shard_info()[0].pid
            t0 = time.perf_counter()
            os.kill(pid, signal.SIGKILL)
            if split:
                # Until the new process answers (Ray's restart and the shard reopening its
                # directory), then the user's first call (recovery from snapshot + WAL).
                while mem.shard_info()[0].pid == pid:
                    time.sleep(0.01)
                restarts.append(time.perf_counter() - t0)
            t1 = time.perf_counter()
            mem.add_turn("rec", f"after kill {trial}", "ok")
            if split:
                user_recoveries.append(time.perf_counter() - t1)
            times.append(time.perf_counter() - t0)
        ids = mem.stored_page_ids("rec")
        expected = turns_before + trials
        intact = sorted(ids, key=lambda p: int(p[1:])) == [f"p{i}" for i in range(1, expected + 1)]
    finally:
        mem.close()
    out: dict[str, Any] = {
        "trials": trials,
        "user_turns_before_kill": turns_before,
        "seconds": {"p50": statistics.median(times), "max": max(times), "min": min(times)},
        "all_turns_stored_once": intact,
    }
    if split:
        out["shard_restart_seconds"] = {"p50": statistics.median(restarts), "max": max(restarts)}
        out["user_first_call_seconds"] = {
            "p50": statistics.median(user_recoveries),
            "max": max(user_recoveries),
        }
    return out


def _write_recovery(
    args: argparse.Namespace,
    rec: dict[str, Any],
    init_s: float,
    load_before: tuple[float, float, float],
) -> None:
    import ray

    result = {
        "bench": "ray_recovery",
        "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        "machine": {
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "ray": ray.__version__,
        },
        "command": "python bench/ray_bench.py " + " ".join(sys.argv[1:]),
        "ray_init_s": init_s,
        "load_average_1min": {"before": load_before[0], "after": os.getloadavg()[0]},
        "recovery": rec,
    }
    out = bench_out_dir(args)
    out.mkdir(parents=True, exist_ok=True)
    (out / "ray_recovery.json").write_text(json.dumps(result, indent=2) + "\n")
    s, r, u = rec["seconds"], rec["shard_restart_seconds"], rec["user_first_call_seconds"]
    print(
        f"kill -> next add_turn: p50 {s['p50']:.2f} s, max {s['max']:.2f} s; shard restart "
        f"p50 {r['p50']:.2f} s, max {r['max']:.2f} s; user's first call p50 {u['p50']:.2f} s, "
        f"max {u['max']:.2f} s ({rec['trials']} kills; all turns stored once: "
        f"{rec['all_turns_stored_once']})"
    )


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--users", type=int, default=100)
    p.add_argument("--turns", type=int, default=100)
    p.add_argument("--threads", type=int, default=16)
    p.add_argument("--shards", default="0,1,2,4", help="0 = in-process backend")
    p.add_argument("--overhead-calls", type=int, default=500)
    p.add_argument("--recovery-trials", type=int, default=5)
    p.add_argument(
        "--recovery-only",
        action="store_true",
        help="only the recovery trials, split into the shard's restart and the "
        "user's first call (writes ray_recovery.json)",
    )
    add_out_dir(p)
    args = p.parse_args(argv)

    tmp = tempfile.mkdtemp(prefix="mos-raybench-")
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"  # before Ray is imported
    os.environ["RAY_TMPDIR"] = tmp
    import ray

    load_before = os.getloadavg()
    t0 = time.perf_counter()
    ray.init(num_cpus=os.cpu_count() or 2, include_dashboard=False, log_to_driver=False)
    init_s = time.perf_counter() - t0
    try:
        root = Path(tmp) / "data"
        root.mkdir()
        if args.recovery_only:
            rec = recovery(args.recovery_trials, 200, root, split=True)
            _write_recovery(args, rec, init_s, load_before)
            return 0
        runs = [
            load(int(s), args.users, args.turns, args.threads, root) for s in args.shards.split(",")
        ]
        over = overhead(args.overhead_calls, root)
        rec = recovery(args.recovery_trials, 200, root)
    finally:
        ray.shutdown()
        shutil.rmtree(tmp, ignore_errors=True)
    result = {
        "bench": "ray",
        "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        "machine": {
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "ray": ray.__version__,
        },
        "command": "python bench/ray_bench.py " + " ".join(sys.argv[1:] if argv is None else argv),
        "users": args.users,
        "turns_per_user": args.turns,
        "threads": args.threads,
        "ray_init_s": init_s,
        # The machine is shared: its 1-minute load average before and after the run.
        "load_average_1min": {"before": load_before[0], "after": os.getloadavg()[0]},
        "runs": runs,
        "overhead": over,
        "recovery": rec,
    }
    out = bench_out_dir(args)
    out.mkdir(parents=True, exist_ok=True)
    (out / "ray.json").write_text(json.dumps(result, indent=2) + "\n")
    print(
        "| backend | ack turns/s | settled turns/s | add_turn p50 / p95 / p99 ms | shard RSS MiB |"
    )
    print("| --- | ---: | ---: | --- | --- |")
    for r in runs:
        a = r["add_turn_ms"]
        rss = ", ".join(f"{x:.0f}" for x in r["shard_rss_mb"]) or "-"
        print(
            f"| {r['backend']} | {r['ack_turns_per_s']:.0f} | {r['settled_turns_per_s']:.0f} | "
            f"{a['p50']:.1f} / {a['p95']:.1f} / {a['p99']:.1f} | {rss} |"
        )
    o = over
    print(
        f"\nno-op call through Ray p50/p99: {o['ray_noop_call_ms']['p50']:.2f} / "
        f"{o['ray_noop_call_ms']['p99']:.2f} ms"
    )
    c = o["ray_noop_call_cpu_ms"]
    print(
        f"CPU per no-op call: facade process {c['facade_process']:.2f} ms, "
        f"shard process {c['shard_process']:.2f} ms"
    )
    print(
        f"sequential add_turn p50: in-process {o['in_process_add_turn_ms']['p50']:.2f} ms, "
        f"Ray {o['ray_add_turn_ms']['p50']:.2f} ms"
    )
    s = rec["seconds"]
    print(
        f"recovery after SIGKILL (kill -> next add_turn returns): p50 {s['p50']:.2f} s, "
        f"max {s['max']:.2f} s over {rec['trials']} trials; "
        f"all turns stored once: {rec['all_turns_stored_once']}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
