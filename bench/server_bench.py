"""The HTTP API: add_turn and retrieve with N concurrent clients, in process, over one
server, or over D front doors x S Ray shards.

By default the same workload runs twice on fresh data directories, in one run: first
through ``MemoryOS`` in this process (N threads), then over HTTP on loopback against
``memoryos serve`` in a child process (N threads, one keep-alive ``httpx`` client each).
Every user stores T turns, then asks R retrievals. Reports requests/s and latency
percentiles per call. Bounded: at most U*T turns and U*R retrievals per mode, each phase
stops after ``--time-limit`` seconds, and the server is stopped at the end. Traffic goes
only to 127.0.0.1.

    python bench/server_bench.py --clients 16 --users 32 --turns 20 --retrieves 10

With ``--doors D`` or ``--shards S`` the workload runs over HTTP only, against D
``memoryos serve`` processes over one data directory of S shards on Ray (the clients
spread over the doors, client c on door c mod D), and reports besides the CPU time each
process spent per request (each door, each shard process, and this process, the clients):
user plus system time from ``/proc/PID/stat`` before and after each phase. The Ray
cluster is ``--ray-address``, else a loopback head started here (127.0.0.1 only, its own
temporary directory) and stopped at the end. ``--matrix`` runs 1 and 2 doors x 1, 2 and 4
shards into one result file.

    python bench/server_bench.py --doors 1 --shards 2
    python bench/server_bench.py --matrix --out-dir bench/results --name server_doors
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/_out.py
from _out import add_out_dir, run_header  # noqa: E402
from _out import out_dir as bench_out_dir  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _doors import Door, cpu_seconds, serve_argv, start_doors, stop_doors  # noqa: E402
from _rayhead import RayHead, ray_env  # noqa: E402
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
            serve_argv(
                root / "data",
                root / "config.toml",
                root / "keys.json",
                ready,
                "--rate",
                "1000000",
                "--burst",
                "1000000",
            ),
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

            add, ret = _http_calls(http)

            try:
                added = _phase(args.clients, args.users, args.turns, args.time_limit, add)
                _wait_settled(http[0], args.time_limit)
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


def _http_calls(
    http: Sequence[Any],
) -> tuple[Callable[[int, int, int], None], Callable[[int, int, int], None]]:
    """``(add, ret)``: turn ``i`` of user ``u`` stored, and question ``i`` of user ``u``
    asked, through client ``c`` of ``http`` (httpx clients with the bench's key)."""

    def add(c: int, u: int, i: int) -> None:
        q, r = turn(u, i)
        resp = http[c].post(f"/v1/users/user-{u}/turns", json={"query": q, "response": r})
        if resp.status_code != 201:
            raise RuntimeError(f"add_turn: {resp.status_code} {resp.text}")

    def ret(c: int, u: int, i: int) -> None:
        resp = http[c].post(f"/v1/users/user-{u}/retrieve", json={"query": query_for(u, i)})
        if resp.status_code != 200:
            raise RuntimeError(f"retrieve: {resp.status_code} {resp.text}")

    return add, ret


def _wait_settled(client: object, time_limit: float) -> None:
    """Wait (up to ``time_limit`` s) until the server's placement backlog is empty, as the
    in-process run's ``flush()`` does."""
    settle = time.monotonic() + time_limit
    while time.monotonic() < settle:
        text = client.get("/metrics").text  # type: ignore[attr-defined]
        backlog = [ln for ln in text.splitlines() if ln.startswith("memoryos_placement_backlog ")]
        if backlog and float(backlog[0].split()[1]) == 0.0:
            return
        time.sleep(0.1)


def _shard_pids(url: str, shards: int, time_limit: float) -> list[int]:
    """The shard processes' pids, from a door's ``/readyz`` once every shard is up."""
    import httpx

    deadline = time.monotonic() + time_limit
    while True:
        resp = httpx.get(f"{url}/readyz", timeout=30.0)
        rows = resp.json().get("shards") or []
        if resp.status_code == 200 and len(rows) == shards:
            return [int(row["pid"]) for row in rows]
        if time.monotonic() > deadline:
            raise SystemExit(f"the shards are not up: {resp.status_code} {resp.text}")
        time.sleep(0.2)


def _cpu_phase(
    args: argparse.Namespace,
    processes: dict[str, int],
    per_user: int,
    call: Callable[[int, int, int], None],
    settle: Callable[[], None] | None = None,
) -> dict[str, object]:
    """:func:`_phase`, plus the CPU milliseconds per request of each process in
    ``processes`` (name -> pid) and of this one (``clients``). With ``settle``, the CPU
    time counts until ``settle()`` returns too (the background work the requests left:
    placing the turns in MTM), not the rates and latencies."""
    before = {name: cpu_seconds(pid) for name, pid in processes.items()}
    mine = os.times()
    out: dict[str, object] = dict(_phase(args.clients, args.users, per_user, args.time_limit, call))
    if settle is not None:
        started = time.perf_counter()
        settle()
        out["settle_seconds"] = time.perf_counter() - started
    after_mine = os.times()
    calls = max(1, int(out["calls"]))  # type: ignore[call-overload]
    cpu = {
        name: (cpu_seconds(pid) - before[name]) * 1000.0 / calls for name, pid in processes.items()
    }
    cpu["clients"] = (
        ((after_mine.user - mine.user) + (after_mine.system - mine.system)) * 1000.0 / calls
    )
    out["cpu_ms_per_request"] = cpu
    out["cpu_ms_per_request_total"] = sum(cpu.values())
    return out


def over_doors(
    args: argparse.Namespace, doors: int, shards: int, address: str, tmp_env: Path
) -> dict[str, object]:
    """The workload over ``doors`` servers over ``shards`` Ray shards at ``address``."""
    import httpx

    from memoryos_actors.cluster import rebalance_shards
    from memoryos_actors.server.keys import KeyStore

    with tempfile.TemporaryDirectory(prefix="memoryos-srvbench-") as tmp:
        root = Path(tmp)
        key, _ = KeyStore(root / "keys.json").add("bench")
        (root / "config.toml").write_text(CONFIG)
        data = root / "data"
        data.mkdir()
        rebalance_shards(data, shards)  # the layout every door opens
        env = ray_env(tmp_env, address)
        started: list[Door] = start_doors(
            root, data, root / "keys.json", root / "config.toml", doors, shards, address, env
        )
        http: list[httpx.Client] = []
        try:
            pids = _shard_pids(started[0].url, shards, args.time_limit)
            processes = {f"door-{n}": d.proc.pid for n, d in enumerate(started)}
            processes.update({f"shard-{n}": pid for n, pid in enumerate(pids)})
            http = [
                httpx.Client(
                    base_url=started[c % doors].url,
                    timeout=120.0,
                    headers={"Authorization": f"Bearer {key}"},
                )
                for c in range(args.clients)
            ]

            add, ret = _http_calls(http)

            load_before = os.getloadavg()
            added = _cpu_phase(
                args, processes, args.turns, add, lambda: _wait_settled(http[0], args.time_limit)
            )
            retrieved = _cpu_phase(args, processes, args.retrieves, ret)
            load_after = os.getloadavg()
        finally:
            for client in http:
                client.close()
            stop_doors(started)
            _stop_shared_shards(data, address, env)
    return {
        "doors": doors,
        "shards": shards,
        "load_average_1m": [round(load_before[0], 2), round(load_after[0], 2)],
        "add_turn": added,
        "retrieve": retrieved,
    }


def _stop_shared_shards(data: Path, address: str, env: dict[str, str]) -> None:
    """``memoryos shards stop`` where it exists: shared shards outlive their doors."""
    subprocess.run(
        [sys.executable, "-m", "memoryos_actors", "shards", "stop", str(data), "--ray", address],
        env=env,
        capture_output=True,
        check=False,
        timeout=300,
    )


def run_doors(args: argparse.Namespace) -> list[dict[str, object]]:
    """Every (doors, shards) configuration asked for, on one Ray cluster."""
    configs = (
        [(d, s) for d in (1, 2) for s in (1, 2, 4)]
        if args.matrix
        else [(args.doors or 1, args.shards or 1)]
    )
    head = None if args.ray_address else RayHead(num_cpus=max(4, 2 * max(s for _, s in configs)))
    try:
        address = args.ray_address or head.address  # type: ignore[union-attr]
        tmp_env = head.tmp if head is not None else Path(tempfile.gettempdir())
        results = []
        for doors, shards in configs:
            print(f"doors={doors} shards={shards} ...", file=sys.stderr, flush=True)
            results.append(over_doors(args, doors, shards, address, tmp_env))
        return results
    finally:
        if head is not None:
            head.stop()


def _print_doors(results: list[dict[str, object]]) -> None:
    print(
        f"{'doors':>5} {'shards':>6} {'call':9} {'calls':>6} {'req/s':>7} {'p50 ms':>7} "
        f"{'p99 ms':>7}  CPU ms/request by process"
    )
    for res in results:
        for op in ("add_turn", "retrieve"):
            r: dict[str, object] = res[op]  # type: ignore[assignment]
            cpu = r["cpu_ms_per_request"]
            per = " ".join(f"{k}={v:.2f}" for k, v in cpu.items())  # type: ignore[attr-defined]
            print(
                f"{res['doors']:>5} {res['shards']:>6} {op:9} {r['calls']:6d} "
                f"{r['per_s']:7.0f} {r['p50_ms']:7.2f} {r['p99_ms']:7.2f}  "
                f"total={r['cpu_ms_per_request_total']:.2f} {per}"
            )


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--clients", type=int, default=16, help="concurrent clients (threads)")
    p.add_argument("--users", type=int, default=32)
    p.add_argument("--turns", type=int, default=20, help="turns per user")
    p.add_argument("--retrieves", type=int, default=10, help="retrievals per user")
    p.add_argument("--time-limit", type=float, default=120.0, help="per phase, seconds")
    add_out_dir(p)
    p.add_argument(
        "--name",
        help="result file name (without .json; default: server, with --doors/--shards "
        "server_doors)",
    )
    p.add_argument("--doors", type=int, help="front doors (memoryos serve processes) over Ray")
    p.add_argument("--shards", type=int, help="Ray shards behind the doors")
    p.add_argument(
        "--ray-address",
        help="the Ray cluster (HOST:PORT) for --doors/--shards (default: a loopback head "
        "started and stopped by this run)",
    )
    p.add_argument("--matrix", action="store_true", help="1 and 2 doors x 1, 2 and 4 shards")
    args = p.parse_args(argv)
    workload = {
        "clients": args.clients,
        "users": args.users,
        "turns_per_user": args.turns,
        "retrieves_per_user": args.retrieves,
    }
    if args.doors or args.shards or args.matrix:
        results = run_doors(args)
        doc = {**run_header("server_doors"), **workload, "runs": results}
        out = bench_out_dir(args)
        out.mkdir(parents=True, exist_ok=True)
        (out / f"{args.name or 'server_doors'}.json").write_text(json.dumps(doc, indent=2) + "\n")
        _print_doors(results)
        return 0
    local = in_process(args)
    remote = over_http(args)
    result = {
        **run_header("server"),
        **workload,
        "in_process": local,
        "http": remote,
    }
    out = bench_out_dir(args)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{args.name or 'server'}.json").write_text(json.dumps(result, indent=2) + "\n")
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
