"""Supervisor benchmarks: restart latency and ask throughput overhead.

Restart latency: a child of a one_for_one supervisor is killed with ``supervisor.kill``;
the clock stops when the registry resolves its name to the new, live ref (kill -> new ref
registered). Ask throughput: sequential ``ref.ask`` round trips to a SupervisedActor and
to a plain ``pykka.ThreadingActor`` with the same handler, in alternating rounds within
one run; the ratio of the medians is reported.

Run ``python bench/supervisor_bench.py [--kills N] [--asks N] [--rounds N]``; writes
``bench/results/supervisor.json`` and prints a markdown table.
"""

from __future__ import annotations

import argparse
import json
import logging
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/_out.py
import pykka
import structlog
from _out import add_out_dir  # noqa: E402
from _out import out_dir as bench_out_dir  # noqa: E402

import supervisor as sv

RESULTS = Path(__file__).resolve().parent / "results" / "supervisor.json"


class PlainEcho(pykka.ThreadingActor):
    """Baseline: returns what it is asked."""

    def on_receive(self, message: Any) -> Any:
        return message


class SupervisedEcho(sv.SupervisedActor):
    """Same handler on a SupervisedActor."""

    def on_receive(self, message: Any) -> Any:
        return message


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    k = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[k]


def restart_latency(kills: int, children: int = 20) -> dict[str, float]:
    """Kill -> new ref registered, in milliseconds, over ``kills`` kills."""
    registry = sv.Registry()
    names = [f"w{i}" for i in range(children)]
    sup = sv.Supervisor.start(
        [sv.ChildSpec(n, SupervisedEcho.start, name=n) for n in names],
        max_restarts=kills * 10,
        max_seconds=1.0,
        registry=registry,
    )
    samples: list[float] = []
    try:
        for i in range(kills):
            name = names[i % children]
            old = registry.require(name)
            t0 = time.perf_counter()
            sv.kill(old, "bench")
            while True:
                ref = registry.lookup(name)
                if ref is not None and ref is not old:
                    break
                time.sleep(0)  # yield the GIL to the supervisor
            samples.append((time.perf_counter() - t0) * 1000.0)
    finally:
        sv.stop(sup, timeout=30)
    return {
        "kills": kills,
        "p50_ms": statistics.median(samples),
        "p99_ms": _percentile(samples, 99),
        "max_ms": max(samples),
        "mean_ms": statistics.fmean(samples),
    }


def _asks_per_second(ref: pykka.ActorRef[Any], asks: int) -> float:
    ask = ref.ask
    t0 = time.perf_counter()
    for i in range(asks):
        ask(i)
    return asks / (time.perf_counter() - t0)


def ask_throughput(asks: int, rounds: int) -> dict[str, Any]:
    """Median asks/s of a plain and a supervised actor over alternating rounds."""
    plain_ref = PlainEcho.start()
    sup_ref = SupervisedEcho.start()
    plain: list[float] = []
    supervised: list[float] = []
    try:
        _asks_per_second(plain_ref, asks // 10)  # warm up both
        _asks_per_second(sup_ref, asks // 10)
        for r in range(rounds):
            order = [(plain_ref, plain), (sup_ref, supervised)]
            if r % 2:
                order.reverse()
            for ref, out in order:
                out.append(_asks_per_second(ref, asks))
    finally:
        plain_ref.stop()
        sv.stop(sup_ref, timeout=10)
    plain_med = statistics.median(plain)
    sup_med = statistics.median(supervised)
    return {
        "asks_per_round": asks,
        "rounds": rounds,
        "plain_asks_per_s": plain_med,
        "supervised_asks_per_s": sup_med,
        "ratio": sup_med / plain_med,
        "plain_rounds": plain,
        "supervised_rounds": supervised,
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run both benchmarks, write the JSON results and print a markdown table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=500)
    parser.add_argument("--asks", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=7)
    add_out_dir(parser)
    args = parser.parse_args(argv)

    # The library never configures structlog; the bench silences it below warnings (kills
    # log at warning, so drop those too) and restores the caller's configuration.
    saved = structlog.get_config()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.CRITICAL))
    try:
        restart = restart_latency(args.kills)
        throughput = ask_throughput(args.asks, args.rounds)
    finally:
        structlog.configure(**saved)

    result = {
        "benchmark": "supervisor",
        "python": platform.python_version(),
        "machine": platform.machine(),
        "restart": restart,
        "ask_throughput": throughput,
        "targets": {"restart_p99_ms": 10.0, "ask_ratio": 0.9},
    }
    (bench_out_dir(args) / RESULTS.name).write_text(json.dumps(result, indent=2) + "\n")

    print("| metric | value | target |")
    print("| --- | --- | --- |")
    print(f"| restart p50 (kill -> new ref registered) | {restart['p50_ms']:.3f} ms | |")
    print(f"| restart p99 | {restart['p99_ms']:.3f} ms | < 10 ms |")
    print(f"| restart max | {restart['max_ms']:.3f} ms | |")
    print(f"| plain pykka ask/s (median) | {throughput['plain_asks_per_s']:,.0f} | |")
    print(f"| SupervisedActor ask/s (median) | {throughput['supervised_asks_per_s']:,.0f} | |")
    print(f"| supervised / plain | {throughput['ratio']:.3f} | >= 0.90 |")
    return result


if __name__ == "__main__":
    main(sys.argv[1:])
