"""Concurrency throughput and latency of the memory system through its public API.

U users x T turns are stored from a thread pool (one task per user, ``--threads`` workers),
offline backends, fsync ``interval``; then every user is asked ``--queries`` retrievals.
Reports turns/s, ``add_turn`` and ``retrieve`` latency percentiles, LLM calls per stored
turn, peak RSS, and the per-add time of the first and last 10% of each user's history.
With ``--llm-latency-ms`` the LLM runs against a loopback fake OpenAI-compatible server
that answers after that delay, to show that writes do not wait for the LLM.

    python bench/throughput.py --users 100 --turns 200
"""

from __future__ import annotations

import argparse
import json
import os
import platform
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

_SYLLABLES = (
    "ka",
    "lo",
    "mi",
    "ne",
    "ru",
    "ta",
    "vo",
    "si",
    "pe",
    "da",
    "go",
    "zu",
    "fi",
    "ba",
    "lu",
    "ro",
    "te",
    "no",
    "ha",
    "ki",
)


def _word(n: int) -> str:
    """A made-up but stable word for index ``n`` (three syllables)."""
    s = _SYLLABLES
    return s[n % 20] + s[(n // 20) % 20] + s[(n // 400) % 20]


COMMON = [_word(7919 * i % 8000) for i in range(40)]


TOPIC_WORDS = 12


def topic_words(topic: int) -> list[str]:
    """The words that belong to one topic (topics share no words)."""
    return [_word(topic * TOPIC_WORDS + j + 100) for j in range(TOPIC_WORDS)]


def turn(user: int, i: int, topic: int | None = None) -> tuple[str, str]:
    """A synthetic turn: a topic lasts 10 turns; 8 topic words and 4 common words each.

    Words are drawn deterministically from (user, i), so runs are repeatable, pages on one
    topic resemble each other and pages on different topics do not.
    """
    t = (i // 10 + user * 7) % 400 if topic is None else topic
    words = topic_words(t)
    pick = [words[(i * 7 + k * 5 + user) % TOPIC_WORDS] for k in range(8)]
    common = [COMMON[(i * 3 + k * 13 + user) % len(COMMON)] for k in range(4)]
    q = " ".join(pick[:5] + common[:2]) + f" number {i}"
    r = " ".join(pick[5:] + common[2:]) + "."
    return q.capitalize() + "?", r.capitalize()


def query_for(user: int, j: int) -> str:
    """A retrieval query about one of the user's topics."""
    t = (j + user * 7) % 400
    words = topic_words(t)
    return f"what did we say about {words[j % TOPIC_WORDS]} and {words[(j + 3) % TOPIC_WORDS]}?"


def fake_llm(latency_ms: float) -> tuple[Any, dict[str, Any]]:
    """Start the tests' loopback fake OpenAI-compatible server answering after
    ``latency_ms``; returns it (call ``stop()``) and the config settings that use it."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "gateway"))
    from fakeserver import FakeOpenAIServer  # type: ignore[import-not-found]

    server = FakeOpenAIServer(latency=latency_ms / 1000.0)
    server.start()
    os.environ["BENCH_FAKE_LLM_KEY"] = "sk-bench"
    return server, {
        "llm_backend": "litellm",
        "llm_model": "openai/fake-model",
        "llm_base_url": server.base_url,
        "llm_api_key_env": "BENCH_FAKE_LLM_KEY",
    }


def pct(values: Sequence[float], p: float) -> float:
    """The p-th percentile (0-100) by nearest rank; 0.0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    k = max(0, min(len(ordered) - 1, round(p / 100.0 * (len(ordered) - 1))))
    return ordered[k]


def rss_peak_mb() -> float:
    """Peak resident set size of this process so far, MiB."""
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def run(args: argparse.Namespace) -> dict[str, Any]:
    from memoryos_actors import MemoryConfig, MemoryOS

    overrides: dict[str, Any] = {
        "fsync": args.fsync,
        "log_level": "error",
        "max_active_users": max(args.users + 1, 500),
    }
    server = None
    if args.llm_latency_ms:
        server, llm = fake_llm(args.llm_latency_ms)
        overrides.update(llm, llm_max_concurrency=16, gateway_workers=16)
    cfg = MemoryConfig(**overrides)
    add_lat: list[float] = []
    first: list[float] = []
    last: list[float] = []
    ret_lat: list[float] = []
    lock = threading.Lock()
    tenth = max(1, args.turns // 10)
    with tempfile.TemporaryDirectory(prefix="memoryos-bench-") as tmp:
        with MemoryOS.open(Path(tmp), cfg) as mem:

            def user_job(u: int) -> None:
                local: list[float] = []
                for i in range(1, args.turns + 1):
                    q, r = turn(u, i)
                    t0 = time.perf_counter()
                    mem.add_turn(f"user-{u}", q, r)
                    local.append(time.perf_counter() - t0)
                with lock:
                    add_lat.extend(local)
                    first.extend(local[:tenth])
                    last.extend(local[-tenth:])

            import resource

            r0 = resource.getrusage(resource.RUSAGE_SELF)
            t0 = time.perf_counter()
            with ThreadPoolExecutor(args.threads) as pool:
                list(pool.map(user_job, range(args.users)))
            ack_s = time.perf_counter() - t0
            mem.flush()
            settle_s = time.perf_counter() - t0
            r1 = resource.getrusage(resource.RUSAGE_SELF)

            def query_job(u: int) -> None:
                local = []
                for j in range(args.queries):
                    q = query_for(u, j)
                    t1 = time.perf_counter()
                    mem.retrieve(f"user-{u}", q)
                    local.append(time.perf_counter() - t1)
                with lock:
                    ret_lat.extend(local)

            with ThreadPoolExecutor(args.threads) as pool:
                list(pool.map(query_job, range(args.users)))
            stats = mem.stats()
    if server is not None:
        server.stop()
    total = args.users * args.turns
    g = stats["gateway"]
    llm_calls = int(g.get("llm_calls", g.get("calls", 0)))
    ms = 1000.0
    result = {
        "bench": "throughput",
        "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        "machine": {
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
        },
        "command": "python bench/throughput.py " + " ".join(sys.argv[1:]),
        "users": args.users,
        "turns_per_user": args.turns,
        "threads": args.threads,
        "fsync": args.fsync,
        "llm_latency_ms": args.llm_latency_ms,
        "turns_total": total,
        "ack_turns_per_s": total / ack_s,
        "settled_turns_per_s": total / settle_s,
        "add_turn_ms": {
            "p50": pct(add_lat, 50) * ms,
            "p95": pct(add_lat, 95) * ms,
            "p99": pct(add_lat, 99) * ms,
        },
        "retrieve_ms": {
            "p50": pct(ret_lat, 50) * ms,
            "p95": pct(ret_lat, 95) * ms,
            "p99": pct(ret_lat, 99) * ms,
        },
        "first_10pct_add_ms_median": statistics.median(first) * ms,
        "last_10pct_add_ms_median": statistics.median(last) * ms,
        "llm_calls": llm_calls,
        "llm_calls_per_turn": llm_calls / total,
        "peak_rss_mb": rss_peak_mb(),
        # The whole process's CPU (every thread) from the first write to the end of the
        # flush, per stored turn, and its context switches per turn.
        "cpu_us_per_turn": ((r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime))
        / total
        * 1e6,
        "sys_share_of_cpu": (r1.ru_stime - r0.ru_stime)
        / max(1e-9, (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)),
        "context_switches_per_turn": {
            "voluntary": (r1.ru_nvcsw - r0.ru_nvcsw) / total,
            "involuntary": (r1.ru_nivcsw - r0.ru_nivcsw) / total,
        },
        "gateway_backend": g.get("backend"),
    }
    result["growth_ratio_last_vs_first"] = (
        result["last_10pct_add_ms_median"] / result["first_10pct_add_ms_median"]
    )
    return result


def big_user_retrieval(pages: int, queries: int) -> dict[str, Any]:
    """Retrieve latency for one user with ``pages`` pages in ``pages // 10`` topics.

    Runs alone (no other load), after ``flush``, so it measures the retrieval path itself.
    """
    from memoryos_actors import MemoryConfig, MemoryOS

    lat: list[float] = []
    with tempfile.TemporaryDirectory(prefix="memoryos-bench-") as tmp:
        with MemoryOS.open(Path(tmp), MemoryConfig(log_level="error")) as mem:
            for i in range(1, pages + 1):
                mem.add_turn("big", *turn(0, i, topic=(i - 1) // 10))
            mem.flush()
            st = mem.stats("big")
            for j in range(queries):
                words = topic_words(j % (pages // 10))
                q = f"what did we say about {words[j % TOPIC_WORDS]} and {words[(j + 5) % TOPIC_WORDS]}?"
                t0 = time.perf_counter()
                mem.retrieve("big", q)
                lat.append((time.perf_counter() - t0) * 1000.0)
    return {
        "pages": pages,
        "mtm_segments": st["mtm_segments"],
        "mtm_pages": st["mtm_pages"],
        "queries": queries,
        "p50": pct(lat, 50),
        "p95": pct(lat, 95),
        "p99": pct(lat, 99),
    }


def targets(r: dict[str, Any]) -> list[tuple[str, bool, str]]:
    """Issue targets as (name, met, measured)."""
    return [
        (
            "ingest >= 2,000 turns/s",
            r["ack_turns_per_s"] >= 2000,
            f"{r['ack_turns_per_s']:.0f} turns/s",
        ),
        (
            "add_turn p99 <= 2 ms",
            r["add_turn_ms"]["p99"] <= 2.0,
            f"{r['add_turn_ms']['p99']:.3f} ms",
        ),
        (
            "last 10% adds <= 1.5x first 10%",
            r["growth_ratio_last_vs_first"] <= 1.5,
            f"{r['growth_ratio_last_vs_first']:.2f}x",
        ),
        (
            "LLM calls per stored turn <= 1.5",
            r["llm_calls_per_turn"] <= 1.5,
            f"{r['llm_calls_per_turn']:.2f}",
        ),
    ]


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--users", type=int, default=100)
    p.add_argument("--turns", type=int, default=200)
    p.add_argument("--threads", type=int, default=16)
    p.add_argument("--queries", type=int, default=10, help="retrievals per user")
    p.add_argument("--fsync", default="interval", choices=["always", "interval", "never"])
    p.add_argument("--llm-latency-ms", type=float, default=0.0)
    p.add_argument(
        "--big-user-pages",
        type=int,
        default=2000,
        help="pages of the single user whose retrieve latency is measured alone (0: skip)",
    )
    p.add_argument(
        "--switch-interval-ms",
        type=float,
        default=None,
        help="set sys.setswitchinterval for this run (CPython's default is 5 ms)",
    )
    add_out_dir(p)
    args = p.parse_args(argv)
    if args.switch_interval_ms is not None:
        sys.setswitchinterval(args.switch_interval_ms / 1000.0)
    r = run(args)
    if args.big_user_pages > 0:
        r["big_user_retrieve_ms"] = big_user_retrieval(args.big_user_pages, 300)
    r["switch_interval_ms"] = sys.getswitchinterval() * 1000.0
    out = bench_out_dir(args)
    out.mkdir(parents=True, exist_ok=True)
    name = "throughput.json" if not args.llm_latency_ms else "throughput_llm.json"
    if args.switch_interval_ms is not None:
        name = name.replace(".json", f"_switch{args.switch_interval_ms:g}ms.json")
    (out / name).write_text(json.dumps(r, indent=2) + "\n")
    print("| metric | value |\n| --- | --- |")
    print(f"| turns/s (acknowledged) | {r['ack_turns_per_s']:.0f} |")
    print(f"| turns/s (settled, incl. background) | {r['settled_turns_per_s']:.0f} |")
    for key in ("add_turn_ms", "retrieve_ms"):
        v = r[key]
        print(f"| {key} p50/p95/p99 | {v['p50']:.3f} / {v['p95']:.3f} / {v['p99']:.3f} |")
    print(
        f"| first/last 10% add median ms | {r['first_10pct_add_ms_median']:.3f} / "
        f"{r['last_10pct_add_ms_median']:.3f} |"
    )
    print(f"| LLM calls per turn | {r['llm_calls_per_turn']:.2f} |")
    cs = r["context_switches_per_turn"]
    print(
        f"| CPU per stored turn, us (sys share) | {r['cpu_us_per_turn']:.0f} "
        f"({r['sys_share_of_cpu']:.0%}) |"
    )
    print(
        f"| context switches per turn, voluntary / involuntary | {cs['voluntary']:.1f} / "
        f"{cs['involuntary']:.1f} |"
    )
    b = r.get("big_user_retrieve_ms")
    if b is not None:
        print(
            f"| retrieve ms, one user with {b['pages']} pages in {b['mtm_segments']} segments, "
            f"p50/p95/p99 | {b['p50']:.3f} / {b['p95']:.3f} / {b['p99']:.3f} |"
        )
    print(f"| peak RSS MiB | {r['peak_rss_mb']:.0f} |")
    for name_, ok, measured in targets(r):
        print(f"target {name_}: {'met' if ok else 'MISSED'} ({measured})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
