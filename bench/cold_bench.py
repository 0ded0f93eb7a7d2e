"""Retrieve latency and memory of one user as history grows: the cold tier at scale.

For each history length N (pages), a fresh process opens a memory system, stores N
synthetic turns for ONE user through the public API (``add_turn``, then ``flush``), then
asks ``--queries`` questions through ``retrieve`` and reports the latency p50/p90/p99
(milliseconds, after ``--warmup`` unmeasured questions), the resident memory (RSS, MiB)
after ingest and after the questions, the peak RSS, where the pages are (hot tiers vs
archive), the size of the archive and the cold index on disk, and how long the user's
first question takes after a passivation (activation plus one retrieve).

Turns are deterministic synthetic text: words drawn Zipf-like from a 20,000-word
vocabulary of made-up words, 14 words a query and 10 a response, 60 s apart. Questions
take 4 words of a random earlier page, so most of them are answered from the archive once
history outgrows MTM.

    python bench/cold_bench.py --pages 2000,20000,100000
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import random
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/_out.py
from _out import add_out_dir  # noqa: E402
from _out import out_dir as bench_out_dir  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

_SYLLABLES = [
    "ka",
    "lo",
    "mi",
    "ren",
    "tu",
    "sa",
    "vo",
    "ne",
    "ri",
    "dal",
    "pe",
    "gu",
    "zor",
    "fi",
    "ba",
    "quen",
    "hol",
    "ter",
    "wi",
    "sum",
]
T0 = 1_700_000_000.0


def vocabulary(n: int = 20_000, seed: int = 7) -> list[str]:
    """``n`` distinct made-up words (deterministic)."""
    rng = random.Random(seed)
    words: list[str] = []
    seen: set[str] = set()
    while len(words) < n:
        w = "".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(2, 4)))
        if w not in seen:
            seen.add(w)
            words.append(w)
    return words


class TurnGen:
    """Deterministic synthetic turns with Zipf-like word frequencies."""

    def __init__(self, seed: int = 11) -> None:
        self.words = vocabulary()
        self.rng = random.Random(seed)
        weights = [1.0 / (i + 1) ** 1.05 for i in range(len(self.words))]
        total = sum(weights)
        acc = 0.0
        self.cum = []
        for w in weights:
            acc += w / total
            self.cum.append(acc)

    def _sentence(self, n: int) -> str:
        import bisect

        return " ".join(
            self.words[min(bisect.bisect(self.cum, self.rng.random()), len(self.words) - 1)]
            for _ in range(n)
        )

    def turn(self) -> tuple[str, str]:
        return self._sentence(14), self._sentence(10)


def rss_mb() -> float:
    """Current resident set size of this process, MiB."""
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


def pct(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def run_one(
    pages: int, queries: int, warmup: int, seed: int, keep: str | None = None
) -> dict[str, Any]:
    """Ingest ``pages`` turns for one user, then time ``queries`` retrievals.

    With ``keep``, the data directory is ``<keep>/pages<N>`` and is kept: a later run with
    the same ``keep`` skips the ingest and times the questions on the same data (A/B runs
    of two versions of the code; RSS then does not include the ingest)."""
    from memoryos_actors import ManualClock, MemoryConfig, MemoryOS
    from memoryos_actors.store.userstore import user_path

    gen = TurnGen(seed)
    texts: list[str] = []
    cfg = MemoryConfig(
        fsync="never", log_level="error", snapshot_every_turns=5000, heat_tick_seconds=3600.0
    )
    clock = ManualClock(T0)
    out: dict[str, Any] = {"pages": pages}
    with contextlib.ExitStack() as stack:
        if keep is None:
            tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix="memoryos-cold-"))
        else:
            tmp = str(Path(keep) / f"pages{pages}")
        marker = Path(tmp) / "ingested"
        reuse = marker.exists()
        rss_start = rss_mb()
        started = time.perf_counter()
        with MemoryOS.open(Path(tmp), cfg, clock=clock) as mem:
            for i in range(pages):
                q, r = gen.turn()
                texts.append(q)
                if reuse:
                    continue
                t = T0 + 60.0 * i
                clock.set(t)
                mem.add_turn("u", q, r, timestamp=t)
            mem.flush()
            if reuse:
                out["ingest_seconds"] = None
                out["ingest_pages_per_second"] = None
            else:
                out["ingest_seconds"] = time.perf_counter() - started
                out["ingest_pages_per_second"] = pages / out["ingest_seconds"]
                marker.touch()
            # Activation of a user with this history: passivate (snapshot), then time the
            # first question (activation plus one retrieve) and a second one.
            mem.passivate("u")
            probe = texts[len(texts) // 2]
            now0 = T0 + 60.0 * pages + 60.0
            t0 = time.perf_counter()
            mem.retrieve("u", probe, timestamp=now0)
            t1 = time.perf_counter()
            mem.retrieve("u", probe, timestamp=now0)
            t2 = time.perf_counter()
            out["first_retrieve_after_activation_ms"] = (t1 - t0) * 1000.0
            out["next_retrieve_ms"] = (t2 - t1) * 1000.0
            state = mem.user_state("u")
            hot = len(state.page_ids())
            out["hot_pages"] = hot
            out["archived_pages"] = pages - hot
            out["rss_mb_after_ingest"] = rss_mb()
            qrng = random.Random(seed + 1)
            lat: list[float] = []
            archive_hits = 0
            now = T0 + 60.0 * pages + 3600.0
            for n in range(warmup + queries):
                words = texts[qrng.randrange(len(texts))].split()
                query = " ".join(qrng.sample(words, 4))
                t0 = time.perf_counter()
                ctx = mem.retrieve("u", query, timestamp=now)
                dt = (time.perf_counter() - t0) * 1000.0
                if n >= warmup:
                    lat.append(dt)
                    archive_hits += sum(1 for it in ctx.mtm if it.tier == "archive")
            out["retrieve_ms"] = {
                "p50": pct(lat, 0.5),
                "p90": pct(lat, 0.9),
                "p99": pct(lat, 0.99),
                "max": max(lat),
                "mean": sum(lat) / len(lat),
                "n": len(lat),
            }
            out["archive_items_per_answer"] = archive_hits / len(lat)
            out["rss_mb_after_queries"] = rss_mb()
            udir = user_path(tmp, "u")
            out["archive_mb"] = (
                (udir / "archive.log").stat().st_size / 2**20
                if (udir / "archive.log").exists()
                else 0.0
            )
            out["cold_index_mb"] = (
                (udir / "cold.db").stat().st_size / 2**20 if (udir / "cold.db").exists() else 0.0
            )
        out["rss_mb_at_start"] = rss_start
        out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    return out


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--pages", default="2000,20000,100000", help="comma-separated history lengths (pages)"
    )
    p.add_argument("--queries", type=int, default=500)
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--seed", type=int, default=11)
    p.add_argument("--one", type=int, default=None, help=argparse.SUPPRESS)
    add_out_dir(p)
    p.add_argument(
        "--keep-data",
        default=None,
        metavar="DIR",
        help="keep each size's data directory under DIR and reuse it on later "
        "runs (no ingest): for A/B runs of two versions of the code",
    )
    args = p.parse_args(argv)
    if args.one is not None:
        print(json.dumps(run_one(args.one, args.queries, args.warmup, args.seed, args.keep_data)))
        return 0
    runs: list[dict[str, Any]] = []
    out = bench_out_dir(args)
    out.mkdir(parents=True, exist_ok=True)

    def write() -> None:
        result = {
            "benchmark": "cold-tier-scale",
            "command": " ".join(["python", "bench/cold_bench.py", *(argv or sys.argv[1:])]),
            "machine": {
                "python": platform.python_version(),
                "platform": platform.platform(),
                "cpu_count": os.cpu_count(),
                "load_average_at_end": os.getloadavg(),
            },
            "runs": runs,
        }
        (out / "cold_scale.json").write_text(json.dumps(result, indent=2) + "\n")

    for n in (int(x) for x in args.pages.split(",") if x.strip()):
        # One process per size: RSS and peak RSS are that size's alone.
        proc = subprocess.run(
            [
                sys.executable,
                __file__,
                "--one",
                str(n),
                "--queries",
                str(args.queries),
                "--warmup",
                str(args.warmup),
                "--seed",
                str(args.seed),
                *(["--keep-data", args.keep_data] if args.keep_data else []),
            ],
            check=True,
            capture_output=True,
            text=True,
        )
        run = json.loads(proc.stdout.strip().splitlines()[-1])
        runs.append(run)
        r = run["retrieve_ms"]
        print(
            f"{n:>7} pages: retrieve p50 {r['p50']:.1f} ms p99 {r['p99']:.1f} ms; "
            f"RSS {run['rss_mb_after_queries']:.0f} MiB (peak {run['peak_rss_mb']:.0f}); "
            f"hot {run['hot_pages']} archived {run['archived_pages']}; "
            f"activation + first retrieve {run['first_retrieve_after_activation_ms']:.0f} ms; "
            f"ingest {run['ingest_pages_per_second'] or 0:.0f} pages/s",
            flush=True,
        )
        write()  # after each size: a long run that is stopped keeps what it measured
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
