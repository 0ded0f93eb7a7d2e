"""``memoryos stats`` over many stored users: read from disk, no user activated.

Stores N users x T turns (or reuses ``--keep-data DIR``), closes the memory system, then
times: ``stored_stats`` in this process (what ``memoryos stats`` computes), the whole
``memoryos stats`` command in a subprocess (Python start-up included), and, with
``--activation``, the way it was done before issue #25: ``MemoryOS.stats(user)`` for every
user, which activates each one. Target: 1,000 users in under 1 s.

    python bench/stats_bench.py --users 1000 --turns 10 --activation

An A/B run of two checkouts on the same kept data, alternated (the machine is shared):

    PYTHONPATH=OTHER_CHECKOUT python bench/stats_bench.py --keep-data DIR --name stats_a --label a
    python bench/stats_bench.py --keep-data DIR --name stats_b --label b

(``PYTHONPATH`` puts the other checkout's ``memoryos_actors`` first, in this process and
in the ``memoryos stats`` subprocess; the bench's own helpers come from this checkout.)
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

# After PYTHONPATH and site-packages: an A/B run's PYTHONPATH chooses the memory system's
# code; this checkout supplies it otherwise, and the bench helpers always.
sys.path.append(str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _out import add_out_dir, write_result  # noqa: E402

import memoryos_actors  # noqa: E402
from memoryos_actors import MemoryConfig, MemoryOS  # noqa: E402
from memoryos_actors.disk_stats import stored_stats  # noqa: E402


def _fill(data: Path, users: int, turns: int) -> None:
    cfg = MemoryConfig(log_level="error")
    with MemoryOS.open(data, cfg) as mem:
        for u in range(users):
            for t in range(turns):
                mem.add_turn(
                    f"user-{u:05d}", f"turn {t}: I like topic {t % 7} and {u % 13}", "noted"
                )
        mem.flush()


def _children_cpu() -> float:
    """CPU seconds (user + system) of the finished child processes so far."""
    use = resource.getrusage(resource.RUSAGE_CHILDREN)
    return use.ru_utime + use.ru_stime


def _best_of(runs: int, fn: Any, clock: Any = time.perf_counter) -> tuple[float, Any]:
    best, value = float("inf"), None
    for _ in range(runs):
        t0 = clock()
        value = fn()
        best = min(best, clock() - t0)
    return best, value


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark; print and write ``<--name>.json`` (default ``stats.json``); return 0."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--users", type=int, default=1000)
    p.add_argument("--turns", type=int, default=10, help="turns per user")
    p.add_argument("--runs", type=int, default=3, help="timed runs of each (best is kept)")
    p.add_argument(
        "--activation",
        action="store_true",
        help="also time MemoryOS.stats(user) for every user (slow)",
    )
    p.add_argument("--keep-data", help="data directory to fill once and reuse")
    p.add_argument("--name", default="stats", help="stem of the results file (default: stats)")
    p.add_argument(
        "--label",
        default=None,
        help="what this run measures (e.g. main or branch), kept in the results",
    )
    add_out_dir(p)
    args = p.parse_args(argv)
    words = list(sys.argv[1:] if argv is None else argv)
    if args.keep_data:  # the command as a reader can repeat it, without this machine's path
        words = ["DIR" if w == args.keep_data else w for w in words]
    if args.out_dir and os.path.isabs(args.out_dir):
        words = ["OUT" if w == args.out_dir else w for w in words]
    command = "python bench/stats_bench.py " + " ".join(words)
    load_before = os.getloadavg()[0]
    scratch = None
    if args.keep_data:
        data = Path(args.keep_data)
    else:
        scratch = Path(tempfile.mkdtemp(prefix="memoryos-stats-bench-"))
        data = scratch / "data"
    try:
        t0 = time.perf_counter()
        if not (data / "users").is_dir():
            _fill(data, args.users, args.turns)
        fill_s = time.perf_counter() - t0
        disk_s, found = _best_of(args.runs, lambda: stored_stats(data))
        # CPU time too: on a shared machine the wall time counts other processes' turns.
        cpu_s, _ = _best_of(args.runs, lambda: stored_stats(data), clock=time.process_time)
        env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORYOS_")}
        cmd = [sys.executable, "-m", "memoryos_actors", "--data-dir", str(data), "stats"]
        # ``-m`` imports from the working directory first: run the command where the code
        # this process measured lives, so both parts measure the same checkout.
        code_root = Path(memoryos_actors.__file__).resolve().parent.parent

        def run_stats() -> Any:
            return subprocess.run(cmd, env=env, cwd=code_root, capture_output=True, check=True)

        cli_s, _ = _best_of(args.runs, run_stats)
        # The command's own CPU time (start-up included): best of the same number of runs.
        cli_cpu_s, _ = _best_of(args.runs, run_stats, clock=_children_cpu)
        load_after = os.getloadavg()[0]
        result: dict[str, Any] = {
            "users": found["stored"]["users"],
            "turns": found["stored"]["turns"],
            "fill_s": round(fill_s, 2),
            "stored_stats_s": round(disk_s, 3),
            "stored_stats_cpu_s": round(cpu_s, 3),
            "cli_stats_s": round(cli_s, 3),
            "cli_stats_cpu_s": round(cli_cpu_s, 3),
            "runs": args.runs,
            "cpus": os.cpu_count(),
            "load_avg_1m_before": round(load_before, 2),
            "load_avg_1m_after": round(load_after, 2),
            "date": time.strftime("%Y-%m-%d", time.gmtime()),
            "command": command,
            "python": platform.python_version(),
        }
        if args.label:
            result["label"] = args.label
        if args.activation:

            def activate_all() -> int:
                with MemoryOS.open(data, MemoryConfig(log_level="error"), read_only=True) as mem:
                    return sum(mem.stats(u)["turns"] for u in mem.users())

            act_s, turns = _best_of(1, activate_all)
            assert turns == found["stored"]["turns"], (turns, found["stored"])
            result["activation_stats_s"] = round(act_s, 3)
    finally:
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)
    path = write_result(args, f"{args.name}.json", result)
    for key, value in result.items():
        print(f"{key:>20}: {value}")
    print(
        f"target: {result['users']} users in under 1 s: "
        f"{'met' if result['stored_stats_s'] < 1.0 else 'MISSED'} (stored_stats), "
        f"{'met' if result['cli_stats_s'] < 1.0 else 'MISSED'} (the whole command)"
    )
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
