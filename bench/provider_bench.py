"""Background throughput against a provider that answers after a fixed latency.

The memory system runs with its default config apart from the provider: the litellm
backend pointed at the tests' fake OpenAI-compatible server (``tests/gateway/fakeserver.py``)
started in a separate process with ``--latency-ms`` per request, and
``llm_max_concurrency`` set to the provider's in-flight limit (``--provider-limit``).
Embeddings use the default in-process hashing embedder.

Two workloads, each with users holding distinct dialogues (their own words and topics):

* ``load``: ``--users`` users each add ``--turns`` turns as fast as ``add_turn`` acknowledges
  them (from ``--threads`` feeder threads); then :meth:`MemoryOS.flush` waits until the
  background work (chain meta, placement, summaries, persona updates) has settled.
* ``paced``: ``--paced-users`` users each add one turn per second for ``--paced-turns``
  turns (light load), then flush.

Reported per workload: acknowledged turns/s (turns / time until the last ``add_turn``
returned), settled turns/s (turns / time until ``flush`` returned), LLM calls per stored
turn (chat completions the gateway made, by prompt kind; cache hits excluded), the peak of
provider calls in flight, process CPU seconds per stored turn and per LLM call (the whole
memory system's CPU; ``bench/client_cpu.py`` isolates the client's share).

Run: ``python bench/provider_bench.py --latency-ms 200`` (and ``--latency-ms 1000``).
Results: ``bench/results/provider_<latency>ms.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/_out.py
from _out import add_out_dir  # noqa: E402
from _out import out_dir as bench_out_dir  # noqa: E402

_HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(_HERE.parent))
sys.path.insert(0, str(_HERE))

from client_cpu import start_server  # noqa: E402

KEY_ENV = "BENCH_FAKE_LLM_KEY"

_SUBJECTS = [
    "garden",
    "violin",
    "marathon",
    "sourdough",
    "telescope",
    "chess",
    "kayak",
    "pottery",
    "python",
    "salsa",
    "beekeeping",
    "origami",
    "climbing",
    "jazz",
    "knitting",
    "photography",
    "surfing",
    "tea",
    "poetry",
    "robotics",
]
_VERBS = [
    "practised",
    "planned",
    "fixed",
    "studied",
    "shared",
    "finished",
    "started",
    "improved",
    "discussed",
    "tried",
]


def dialogue(user: int, turns: int) -> list[tuple[str, str]]:
    """A user's own dialogue: topics in runs of 4-8 turns, words seeded by the user."""
    rng = random.Random(user)
    out: list[tuple[str, str]] = []
    while len(out) < turns:
        subject = rng.choice(_SUBJECTS)
        for _ in range(rng.randint(4, 8)):
            i = len(out)
            verb = rng.choice(_VERBS)
            out.append(
                (
                    f"Today I {verb} my {subject} project, step {i}, user{user} detail "
                    f"{rng.randint(0, 10**6)}.",
                    f"Nice progress on {subject}; what is the next step after {i}?",
                )
            )
    return out[:turns]


def make_config(base_url: str, provider_limit: int, overrides: dict[str, Any] | None = None) -> Any:
    """The bench's config: the fake provider, its in-flight limit, and ``overrides``."""
    from memoryos_actors.config import MemoryConfig

    os.environ.setdefault(KEY_ENV, "sk-fake-bench")
    return MemoryConfig(
        **{
            "llm_backend": "litellm",
            "llm_model": "openai/fake-model",
            "llm_base_url": base_url,
            "llm_api_key_env": KEY_ENV,
            "llm_max_concurrency": provider_limit,
            "log_level": "error",
            **(overrides or {}),
        }
    )


def run_workload(cfg: Any, users: int, turns: int, threads: int, pace_s: float) -> dict[str, Any]:
    from memoryos_actors.system import MemoryOS

    dialogues = {u: dialogue(u, turns) for u in range(users)}
    with tempfile.TemporaryDirectory() as tmp, MemoryOS.open(tmp, cfg) as mem:
        for u in range(users):  # activate every user before the clock starts
            mem.retrieve(f"user{u}", "warm-up")
        g0 = mem.gateway_service.stats()
        cpu0 = time.process_time()
        t0 = time.perf_counter()
        errors: list[BaseException] = []

        def feed(mine: list[int]) -> None:
            try:
                for i in range(turns):
                    start = time.perf_counter()
                    for u in mine:
                        mem.add_turn(f"user{u}", *dialogues[u][i])
                    if pace_s:
                        time.sleep(max(0.0, pace_s - (time.perf_counter() - start)))
            except BaseException as exc:  # noqa: BLE001 - reported below
                errors.append(exc)

        groups = [list(range(users))[k::threads] for k in range(min(threads, users))]
        ts = [threading.Thread(target=feed, args=(g,)) for g in groups]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        acked = time.perf_counter() - t0
        mem.flush(timeout=600.0)
        settled = time.perf_counter() - t0
        cpu = time.process_time() - cpu0
        g1 = mem.gateway_service.stats()
        if errors:
            raise errors[0]
    n = users * turns
    calls = g1["calls"] - g0["calls"]
    by_kind = {
        k: v["calls"] - g0["by_kind"].get(k, {}).get("calls", 0) for k, v in g1["by_kind"].items()
    }
    return {
        "users": users,
        "turns_per_user": turns,
        "turns": n,
        "pace_s": pace_s,
        "acked_s": round(acked, 3),
        "settled_s": round(settled, 3),
        "acked_turns_per_s": round(n / acked, 1),
        "settled_turns_per_s": round(n / settled, 1),
        "llm_calls": calls,
        "llm_calls_per_turn": round(calls / n, 3),
        "llm_calls_per_turn_by_kind": {k: round(v / n, 3) for k, v in sorted(by_kind.items())},
        "degraded": g1["degraded"] - g0["degraded"],
        "errors": g1["errors"] - g0["errors"],
        # .get: the same script also measures older checkouts without these figures.
        "invalid_answers": g1.get("invalid_answers", 0) - g0.get("invalid_answers", 0),
        "in_flight_peak": g1["concurrency"]["peak"],
        "jobs_peak": g1["concurrency"].get("jobs_peak"),
        "provider_latency_p50_ms": g1["latency"]["p50_ms"],
        "cpu_s": round(cpu, 3),
        "cpu_ms_per_turn": round(1000 * cpu / n, 3),
        "cpu_ms_per_llm_call": round(1000 * cpu / calls, 3) if calls else None,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--latency-ms", type=float, default=200.0)
    p.add_argument(
        "--provider-limit",
        type=int,
        default=128,
        help="the provider's in-flight limit (llm_max_concurrency)",
    )
    p.add_argument("--users", type=int, default=100)
    p.add_argument("--turns", type=int, default=30)
    p.add_argument("--threads", type=int, default=16)
    p.add_argument("--paced-users", type=int, default=10)
    p.add_argument("--paced-turns", type=int, default=30)
    p.add_argument("--workloads", default="load,paced")
    add_out_dir(p)
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a MemoryConfig setting for this run (repeatable)",
    )
    args = p.parse_args(argv)
    from memoryos_actors.config import parse_settings

    overrides = parse_settings(args.set)
    proc, base_url = start_server(args.latency_ms / 1000.0)
    results: dict[str, Any] = {}
    try:
        cfg = make_config(base_url, args.provider_limit, overrides)
        if "load" in args.workloads:
            results["load"] = run_workload(cfg, args.users, args.turns, args.threads, 0.0)
            print("load ", json.dumps(results["load"]), flush=True)
        if "paced" in args.workloads:
            results["paced"] = run_workload(
                cfg, args.paced_users, args.paced_turns, args.paced_users, 1.0
            )
            print("paced", json.dumps(results["paced"]), flush=True)
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(10)
    out = {
        "command": "python bench/provider_bench.py "
        + " ".join(argv if argv is not None else sys.argv[1:]),
        "latency_ms": args.latency_ms,
        "provider_limit": args.provider_limit,
        "settings": overrides,
        "cpu_count": os.cpu_count(),
        "results": results,
    }
    path = bench_out_dir(args) / f"provider_{int(args.latency_ms)}ms.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
