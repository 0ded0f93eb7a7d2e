"""Event-loop lag while AsyncMemoryOS serves many concurrent users.

A heartbeat task sleeps 1 ms at a time and records how late it wakes up while U users store
T turns each concurrently (``asyncio.gather``) and then retrieve. Reports the lag
percentiles and the maximum: an API that blocked the loop would show lags as long as its
calls.

    python bench/async_lag.py --users 100 --turns 20
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/_out.py
from _out import add_out_dir, run_header  # noqa: E402
from _out import out_dir as bench_out_dir  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from throughput import pct, query_for, turn  # noqa: E402


async def run(users: int, turns: int) -> dict[str, object]:
    from memoryos_actors import AsyncMemoryOS, MemoryConfig

    lags: list[float] = []
    stop = asyncio.Event()

    async def heartbeat() -> None:
        while not stop.is_set():
            t0 = time.perf_counter()
            await asyncio.sleep(0.001)
            lags.append((time.perf_counter() - t0 - 0.001) * 1000.0)

    async def user(u: int) -> None:
        for i in range(1, turns + 1):
            await mem.add_turn(f"user-{u}", *turn(u, i))
        await mem.retrieve(f"user-{u}", query_for(u, 1))

    with tempfile.TemporaryDirectory(prefix="memoryos-aio-") as tmp:
        mem = await AsyncMemoryOS.open(tmp, MemoryConfig(log_level="error"))
        hb = asyncio.create_task(heartbeat())
        t0 = time.perf_counter()
        try:
            await asyncio.gather(*(user(u) for u in range(users)))
            elapsed = time.perf_counter() - t0
        finally:
            stop.set()
            await hb
            await mem.close()
    return {
        **run_header("async_lag"),
        "users": users,
        "turns_per_user": turns,
        "turns_per_s": users * turns / elapsed,
        "heartbeats": len(lags),
        "loop_lag_ms_p50": pct(lags, 50),
        "loop_lag_ms_p99": pct(lags, 99),
        "loop_lag_ms_max": max(lags) if lags else 0.0,
    }


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--users", type=int, default=100)
    p.add_argument("--turns", type=int, default=20)
    add_out_dir(p)
    args = p.parse_args(argv)
    result = asyncio.run(run(args.users, args.turns))
    out = bench_out_dir(args)
    out.mkdir(parents=True, exist_ok=True)
    (out / "async_lag.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
