"""The HTTP API against the in-process facade: add_turn and retrieve with N concurrent clients.

The same workload runs twice on fresh data directories, in one run: first through
``MemoryOS`` in this process (N threads), then over HTTP on loopback against
``memoryos serve`` in a child process (N threads, one keep-alive ``httpx`` client each).
Every user stores T turns, then asks R retrievals. Reports requests/s and latency
percentiles per call. Bounded: at most U*T turns and U*R retrievals per mode, each phase
stops after ``--time-limit`` seconds, and the server is stopped at the end. Traffic goes
only to 127.0.0.1.

    python bench/server_bench.py --clients 16 --users 32 --turns 20 --retrieves 10
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/_out.py
from _out import add_out_dir  # noqa: E402
from _out import out_dir as bench_out_dir  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from throughput import pct, query_for, turn  # noqa: E402

CONFIG = 'log_level = "error"\n'


def _phase(
    clients: int,
    users: int,
    per_user: int,
    time_limit: float,
    call: Callable[[int, int, int], None],
) -> dict[str, float]:
    """Run ``call(client, user, i)`` for every user and i < per_user from ``clients``
    threads (a user belongs to one client); latencies in ms."""
    lat: list[list[float]] = [[] for _ in range(clients)]
    deadline = time.monotonic() + time_limit
    errors: list[BaseException] = []

    def worker(c: int) -> None:
        try:
            for i in range(per_user):
                for u in range(c, users, clients):
                    if time.monotonic() > deadline:
                        return
                    t0 = time.perf_counter()
                    call(c, u, i)
                    lat[c].append((time.perf_counter() - t0) * 1000.0)
        except BaseException as exc:  # noqa: BLE001 - reported after the phase
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(c,)) for c in range(clients)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - t0
    if errors:
        raise errors[0]
    flat = [x for per in lat for x in per]
    return {
        "calls": len(flat),
        "seconds": elapsed,
        "per_s": len(flat) / elapsed if elapsed else 0.0,
        "p50_ms": pct(flat, 50),
        "p99_ms": pct(flat, 99),
    }


def in_process(args: argparse.Namespace) -> dict[str, object]:
    from memoryos_actors import MemoryConfig, MemoryOS

    with tempfile.TemporaryDirectory(prefix="memoryos-srvbench-") as tmp:
        with MemoryOS.open(tmp, MemoryConfig(log_level="error")) as mem:
            add = _phase(
                args.clients,
                args.users,
                args.turns,
                args.time_limit,
                lambda c, u, i: mem.add_turn(f"user-{u}", *turn(u, i)),
            )
            mem.flush()
            ret = _phase(
                args.clients,
                args.users,
                args.retrieves,
                args.time_limit,
                lambda c, u, i: mem.retrieve(f"user-{u}", query_for(u, i)),
            )
    return {"add_turn": add, "retrieve": ret}


def over_http(args: argparse.Namespace) -> dict[str, object]:
    import httpx

    from memoryos_actors.server.keys import KeyStore

    with tempfile.TemporaryDirectory(prefix="memoryos-srvbench-") as tmp:
        root = Path(tmp)
        key, _ = KeyStore(root / "keys.json").add("bench")
        (root / "config.toml").write_text(CONFIG)
        ready = root / "ready.json"
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "memoryos_actors",
                "--data-dir",
                str(root / "data"),
                "--config",
                str(root / "config.toml"),
                "serve",
                "--host",
                "127.0.0.1",
                "--port",
                "0",
                "--keys-file",
                str(root / "keys.json"),
                "--ready-file",
                str(ready),
                "--rate",
                "1000000",
                "--burst",
                "1000000",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            deadline = time.monotonic() + 60
            while not ready.exists():
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit("the server did not start")
                time.sleep(0.05)
            base = f"http://127.0.0.1:{json.loads(ready.read_text())['port']}"
            http = [
                httpx.Client(
                    base_url=base, timeout=60.0, headers={"Authorization": f"Bearer {key}"}
                )
                for _ in range(args.clients)
            ]

            def add(c: int, u: int, i: int) -> None:
                q, r = turn(u, i)
                resp = http[c].post(f"/v1/users/user-{u}/turns", json={"query": q, "response": r})
                if resp.status_code != 201:
                    raise RuntimeError(f"add_turn: {resp.status_code} {resp.text}")

            def ret(c: int, u: int, i: int) -> None:
                resp = http[c].post(f"/v1/users/user-{u}/retrieve", json={"query": query_for(u, i)})
                if resp.status_code != 200:
                    raise RuntimeError(f"retrieve: {resp.status_code} {resp.text}")

            try:
                added = _phase(args.clients, args.users, args.turns, args.time_limit, add)
                # Let background placement settle, as the in-process run's flush() does.
                settle = time.monotonic() + args.time_limit
                while time.monotonic() < settle:
                    text = http[0].get("/metrics").text
                    backlog = [
                        ln
                        for ln in text.splitlines()
                        if ln.startswith("memoryos_placement_backlog ")
                    ]
                    if backlog and float(backlog[0].split()[1]) == 0.0:
                        break
                    time.sleep(0.1)
                retrieved = _phase(args.clients, args.users, args.retrieves, args.time_limit, ret)
            finally:
                for client in http:
                    client.close()
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    return {"add_turn": added, "retrieve": retrieved}


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--clients", type=int, default=16, help="concurrent clients (threads)")
    p.add_argument("--users", type=int, default=32)
    p.add_argument("--turns", type=int, default=20, help="turns per user")
    p.add_argument("--retrieves", type=int, default=10, help="retrievals per user")
    p.add_argument("--time-limit", type=float, default=120.0, help="per phase, seconds")
    add_out_dir(p)
    p.add_argument("--name", default="server", help="result file name (without .json)")
    args = p.parse_args(argv)
    local = in_process(args)
    remote = over_http(args)
    result = {
        "bench": "server",
        "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count()},
        "command": "python bench/server_bench.py " + " ".join(sys.argv[1:]),
        "clients": args.clients,
        "users": args.users,
        "turns_per_user": args.turns,
        "retrieves_per_user": args.retrieves,
        "in_process": local,
        "http": remote,
    }
    out = bench_out_dir(args)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{args.name}.json").write_text(json.dumps(result, indent=2) + "\n")
    print(f"{'':12} {'call':9} {'calls':>6} {'req/s':>8} {'p50 ms':>8} {'p99 ms':>8}")
    for mode, res in (("in-process", local), ("http", remote)):
        for op in ("add_turn", "retrieve"):
            r = res[op]
            print(
                f"{mode:12} {op:9} {r['calls']:6d} {r['per_s']:8.0f} {r['p50_ms']:8.2f} "
                f"{r['p99_ms']:8.2f}"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
