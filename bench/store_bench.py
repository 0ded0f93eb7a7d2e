"""Persistence benchmark: WAL append latency per fsync policy, snapshot write/read time.

Run::

    python bench/store_bench.py [--appends 20000] [--data-dir DIR] [--out-dir bench/results]

The data directory defaults to a temporary directory (fsync cost depends heavily on the
file system and device: pass ``--data-dir`` on the disk you will use). Results are printed
and written as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/_out.py
from _out import add_out_dir  # noqa: E402
from _out import out_dir as bench_out_dir  # noqa: E402

from memoryos_actors.store.snapshot import read_latest, write_snapshot
from memoryos_actors.store.wal import WAL


def turn_record(rng: random.Random, seq: int) -> dict[str, Any]:
    """A WAL record shaped like one conversation turn (~0.6 KB)."""
    words = ["memory", "segment", "kyoto", "cello", "ramen", "agent", "persona", "heat"]
    return {
        "t": "turn",
        "seq": seq,
        "q": " ".join(rng.choice(words) for _ in range(40)),
        "r": " ".join(rng.choice(words) for _ in range(50)),
        "ts": 1.7e9 + seq,
    }


def percentile(sorted_values: list[float], q: float) -> float:
    """The ``q`` quantile (0..1) of already sorted values, nearest rank."""
    idx = min(len(sorted_values) - 1, max(0, round(q * (len(sorted_values) - 1))))
    return sorted_values[idx]


def bench_appends(directory: Path, policy: str, n: int, seed: int) -> dict[str, float]:
    """Append ``n`` turn records under ``policy``; latencies in microseconds."""
    rng = random.Random(seed)
    records = [turn_record(rng, i) for i in range(n)]
    path = directory / f"wal-{policy}.log"
    latencies: list[float] = []
    with WAL(path, fsync=policy, interval=0.1) as wal:
        started = time.perf_counter()
        for rec in records:
            t0 = time.perf_counter_ns()
            wal.append(rec)
            latencies.append((time.perf_counter_ns() - t0) / 1000.0)
        elapsed = time.perf_counter() - started
    t0 = time.perf_counter()
    with WAL(path, fsync="never") as wal:
        replayed = sum(1 for _ in wal.read())
    replay_s = time.perf_counter() - t0
    latencies.sort()
    return {
        "appends": n,
        "p50_us": percentile(latencies, 0.50),
        "p99_us": percentile(latencies, 0.99),
        "max_us": latencies[-1],
        "mean_us": statistics.fmean(latencies),
        "appends_per_s": n / elapsed,
        "replay_records_per_s": replayed / replay_s,
        "file_bytes": path.stat().st_size,
    }


def realistic_state(
    seed: int, segments: int = 200, pages_per_segment: int = 10, dim: int = 512
) -> dict[str, Any]:
    """A state dict the size of a full MTM (default 200 segments x 10 pages, 512-d float32)."""
    rng = random.Random(seed)

    def emb() -> bytes:
        return bytes(rng.getrandbits(8) for _ in range(dim * 4))

    segs = []
    seq = 0
    for s in range(segments):
        pages = []
        for _ in range(pages_per_segment):
            seq += 1
            pages.append({**turn_record(rng, seq), "emb": emb(), "kw": ["memory", "heat"]})
        segs.append({"id": f"s{s}", "summary": "summary " * 30, "emb": emb(), "pages": pages})
    return {"stm": [], "mtm": {"segments": segs, "max_seq": seq}, "lpm": {"kb": [], "traits": {}}}


def bench_snapshot(directory: Path, seed: int, repeats: int) -> dict[str, float]:
    """Write and read a realistic snapshot ``repeats`` times; times in milliseconds."""
    state = realistic_state(seed)
    writes, reads = [], []
    size = 0
    for i in range(repeats):
        t0 = time.perf_counter()
        path = write_snapshot(directory / "snapshots", state, i)
        writes.append((time.perf_counter() - t0) * 1000)
        size = path.stat().st_size
        t0 = time.perf_counter()
        got = read_latest(directory / "snapshots")
        reads.append((time.perf_counter() - t0) * 1000)
        assert got is not None and got[1] == i
    return {
        "snapshot_bytes": size,
        "write_ms_median": statistics.median(writes),
        "read_ms_median": statistics.median(reads),
        "repeats": repeats,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--appends", type=int, default=20000, help="appends per policy")
    parser.add_argument("--always-appends", type=int, default=2000, help="appends for fsync=always")
    parser.add_argument("--snapshot-repeats", type=int, default=5)
    parser.add_argument("--data-dir", type=Path, default=None)
    parser.add_argument("--seed", type=int, default=0)
    add_out_dir(parser)
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory(dir=args.data_dir) as tmp:
        d = Path(tmp)
        results: dict[str, Any] = {
            "platform": platform.platform(),
            "python": sys.version.split()[0],
            "cpus": os.cpu_count(),
            "append": {},
        }
        for policy in ("never", "interval", "always"):
            n = args.always_appends if policy == "always" else args.appends
            results["append"][policy] = bench_appends(d, policy, n, args.seed)
            r = results["append"][policy]
            print(
                f"append fsync={policy:8s} p50 {r['p50_us']:8.1f} us  p99 {r['p99_us']:8.1f} us"
                f"  {r['appends_per_s']:9.0f}/s"
            )
        results["snapshot"] = bench_snapshot(d, args.seed, args.snapshot_repeats)
        s = results["snapshot"]
        print(
            f"snapshot {s['snapshot_bytes'] / 1e6:.1f} MB: write {s['write_ms_median']:.1f} ms,"
            f" read {s['read_ms_median']:.1f} ms (median of {s['repeats']})"
        )
    out = bench_out_dir(args) / "store.json"
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
