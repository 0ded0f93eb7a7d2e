"""The memory page at scale: server time of its pages for one user with a long history.

Stores ``--pages`` synthetic turns for ONE user in a fresh data directory through the
public API (in this process; every 25th turn a retrieval heats the segments so some are
promoted to the long-term profile), sets a few traits, closes it, then starts
``memoryos serve`` on that directory in a child process, logs in to ``/ui`` with a key
(as a browser does: the form, then the session cookie) and times its pages over HTTP on
127.0.0.1:

* the user's page (``/ui/users/<id>``): the first open, which activates the user, then
  ``--requests`` more;
* the archive's first page, a deep page and an archive search, the long-term profile, the
  users list, and a memory page of an archived page (a few: it reads the whole archive);
* search (``/ui/users/<id>/search?q=...``, which runs ``retrieve``): ``--queries`` questions
  of 4 words of random earlier turns.

"Server ms" is the ``Server-Timing`` the memory page reports (its handler, template
rendering included); "round trip ms" is what the client waited. Percentiles p50/p95/p99.
Turns are the cold-tier bench's synthetic text (bench/cold_bench.py). Only 127.0.0.1 is
contacted, and the server is stopped at the end.

    python bench/ui_bench.py --pages 10000 --requests 200 --queries 200
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import random
import re
import signal
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
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _doors import serve_argv  # noqa: E402
from cold_bench import T0, TurnGen, pct

TENANT = "bench"
USER = "reader"
CONFIG = 'log_level = "error"\n'


def ingest(data: Path, pages: int, seed: int) -> tuple[list[str], dict[str, int]]:
    """Store ``pages`` turns for the bench user (unless ``data`` already has them); return
    the turns' queries and where the pages are."""
    from memoryos_actors import ManualClock, MemoryConfig, MemoryOS
    from memoryos_actors.trait_table import TRAITS

    gen = TurnGen(seed)
    texts: list[str] = []
    uid = f"{TENANT}:{USER}"
    marker = data / "ingested"
    reuse = marker.exists()
    cfg = MemoryConfig(log_level="error", fsync="never", snapshot_every_turns=5000)
    clock = ManualClock(T0)
    rng = random.Random(seed + 2)
    with MemoryOS.open(data, cfg, clock=clock) as mem:
        for i in range(pages):
            q, r = gen.turn()
            texts.append(q)
            if reuse:
                continue
            t = T0 + 60.0 * i
            clock.set(t)
            mem.add_turn(uid, q, r, timestamp=t)
            if i % 25 == 24:
                recent = texts[max(0, i - 200) :]
                mem.retrieve(uid, " ".join(rng.choice(recent).split()[:4]), timestamp=t)
        if not reuse:
            for spec in TRAITS[::15]:  # six of the 90, across the three categories
                mem.correct_memory(uid, f"trait:{spec.name}", "high", "bench")
            mem.flush()
            marker.touch()
        st = mem.user_state(uid)
        arch = mem.archived_memories(uid, limit=0)
        where = {
            "stm_pages": len(st.stm),
            "mtm_segments": len(st.segments),
            "mtm_pages": sum(len(s.pages) for s in st.segments),
            "archived_pages": arch.total,
            "facts": len(st.kb),
            "traits_with_a_level": len(st.traits),
        }
    return texts, where


def _server_ms(resp: Any, name: str = "app") -> float:
    m = re.search(rf"\b{name};dur=([0-9.]+)", resp.headers.get("server-timing", ""))
    if m is None:
        raise RuntimeError(f"no Server-Timing {name} in the answer to {resp.request.url}")
    return float(m.group(1))


def _stats(values: Sequence[float]) -> dict[str, float]:
    return {
        "p50": pct(values, 0.5),
        "p95": pct(values, 0.95),
        "p99": pct(values, 0.99),
        "max": max(values),
        "n": len(values),
    }


def _process_cpu_s(pid: int) -> float | None:
    """CPU time (user + system, seconds) the process ``pid`` used so far, from
    ``/proc/PID/stat`` (None where there is no such file)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure(
    base: str,
    key: str,
    texts: list[str],
    args: argparse.Namespace,
    archived_page: str | None,
    server_pid: int | None = None,
) -> dict[str, Any]:
    import httpx

    out: dict[str, Any] = {}
    with httpx.Client(base_url=base, timeout=120.0, follow_redirects=False) as c:
        form = c.get("/ui/login")
        token = re.search(r'name="csrf" value="([^"]+)"', form.text).group(1)  # type: ignore[union-attr]
        r = c.post("/ui/login", data={"csrf": token, "key": key})
        if r.status_code != 303:
            raise RuntimeError(f"login failed: {r.status_code} {r.text[:200]}")
        user = f"/ui/users/{USER}"

        def timed(path: str, n: int) -> dict[str, Any]:
            server: list[float] = []
            trip: list[float] = []
            for _ in range(n):
                t0 = time.perf_counter()
                resp = c.get(path)
                trip.append((time.perf_counter() - t0) * 1000.0)
                if resp.status_code != 200:
                    raise RuntimeError(f"{path}: {resp.status_code} {resp.text[:300]}")
                server.append(_server_ms(resp))
            return {
                "server_ms": _stats(server),
                "round_trip_ms": _stats(trip),
                "bytes": len(resp.content),
            }

        t0 = time.perf_counter()
        first = c.get(user)
        out["user_page_first_open"] = {
            "server_ms": _server_ms(first),
            "round_trip_ms": (time.perf_counter() - t0) * 1000.0,
        }
        out["user_page"] = timed(user, args.requests)
        few = max(5, args.requests // 4)
        out["archive_first_page"] = timed(f"{user}/archive", few)
        out["archive_page_100"] = timed(f"{user}/archive?page=100", few)
        words = " ".join(texts[len(texts) // 3].split()[:3])
        out["archive_search"] = timed(f"{user}/archive?q={words.replace(' ', '+')}", few)
        out["profile"] = timed(f"{user}/profile", few)
        out["users_list"] = timed("/ui/users", few)
        if archived_page is not None:
            out["memory_page_archived"] = timed(f"{user}/memories/{archived_page}", 5)
        rng = random.Random(args.seed + 1)
        server: list[float] = []
        trip: list[float] = []
        retrieve: list[float] = []
        cpu_before = None
        for n in range(args.warmup + args.queries):
            if n == args.warmup and server_pid is not None:
                cpu_before = _process_cpu_s(server_pid)
            query = " ".join(rng.sample(texts[rng.randrange(len(texts))].split(), 4))
            t0 = time.perf_counter()
            resp = c.get(f"{user}/search", params={"q": query})
            dt = (time.perf_counter() - t0) * 1000.0
            if resp.status_code != 200:
                raise RuntimeError(f"search: {resp.status_code} {resp.text[:300]}")
            if n >= args.warmup:
                server.append(_server_ms(resp))
                retrieve.append(_server_ms(resp, "retrieve"))
                trip.append(dt)
        cpu_after = _process_cpu_s(server_pid) if server_pid is not None else None
        out["search"] = {
            "server_ms": _stats(server),
            "round_trip_ms": _stats(trip),
            "retrieve_ms": _stats(retrieve),
            # The server process's CPU time over the timed searches, per
            # search (its background work included; a mean, as the
            # process's counters tick in 10 ms).
            "server_cpu_ms_per_search": None
            if cpu_before is None or cpu_after is None
            else 1000.0 * (cpu_after - cpu_before) / max(args.queries, 1),
        }
    return out


def run(args: argparse.Namespace) -> dict[str, Any]:
    from memoryos_actors.server.keys import KeyStore

    with contextlib.ExitStack() as stack:
        if args.keep_data:
            root = Path(args.keep_data) / f"ui_pages{args.pages}"
            root.mkdir(parents=True, exist_ok=True)
        else:
            root = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="mos-uib-")))
        started = time.perf_counter()
        texts, where = ingest(root / "data", args.pages, args.seed)
        ingest_s = time.perf_counter() - started
        key, _ = KeyStore(root / "keys.json").add(TENANT)
        (root / "config.toml").write_text(CONFIG, encoding="utf-8")
        ready = root / "ready.json"
        ready.unlink(missing_ok=True)
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
            env={k: v for k, v in os.environ.items() if not k.startswith("MEMORYOS_")},
        )
        try:
            deadline = time.monotonic() + 120
            while not ready.exists():
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit("the server did not start")
                time.sleep(0.05)
            base = f"http://127.0.0.1:{json.loads(ready.read_text())['port']}"
            archived = _an_archived_page(root / "data") if where["archived_pages"] else None
            timings = measure(base, key, texts, args, archived, proc.pid)
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    return {
        "pages": args.pages,
        "ingest_seconds": None if args.keep_data and ingest_s < 5 else ingest_s,
        "where": where,
        **timings,
    }


def _an_archived_page(data: Path) -> str | None:
    """The id of an archived page, read from the cold index file (the server holds the
    data directory's lock, so not through the library)."""
    import sqlite3

    from memoryos_actors.store.cold import COLD_FILE
    from memoryos_actors.store.userstore import user_path

    path = user_path(data, f"{TENANT}:{USER}") / COLD_FILE
    if not path.exists():
        return None
    with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as db:
        row = db.execute(
            "SELECT item_id FROM items WHERE kind = 'page' ORDER BY seq LIMIT 1 OFFSET 10"
        ).fetchone()
    return f"page:{row[0]}" if row else None


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--pages", type=int, default=10_000, help="turns of the one user")
    p.add_argument("--requests", type=int, default=200, help="timed opens of the user page")
    p.add_argument("--queries", type=int, default=200, help="timed searches")
    p.add_argument("--warmup", type=int, default=10, help="untimed searches first")
    p.add_argument("--seed", type=int, default=11)
    p.add_argument("--keep-data", help="keep (and reuse) the data under this directory")
    add_out_dir(p)
    args = p.parse_args(argv)
    load_before = os.getloadavg()[0]
    result = run(args)
    result["load_before"], result["load_after"] = load_before, os.getloadavg()[0]
    result["machine"] = {
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "platform": platform.platform(),
    }
    result["command"] = "python bench/ui_bench.py " + " ".join(
        "DIR" if a.startswith("/") else a for a in (argv if argv is not None else sys.argv[1:])
    )
    (bench_out_dir(args) / "ui_bench.json").write_text(
        json.dumps(result, indent=2) + "\n", encoding="utf-8"
    )

    def show(name: str, d: dict[str, Any]) -> None:
        print(
            f"{name:<24} server p50 {d['server_ms']['p50']:7.1f}  p95 "
            f"{d['server_ms']['p95']:7.1f}  p99 {d['server_ms']['p99']:7.1f} ms   round trip "
            f"p95 {d['round_trip_ms']['p95']:7.1f} ms"
        )

    print(f"{args.pages} pages: {result['where']}")
    first = result["user_page_first_open"]
    print(
        f"{'user page, first open':<24} server {first['server_ms']:7.1f} ms (activation "
        f"included), round trip {first['round_trip_ms']:.1f} ms"
    )
    for name in (
        "user_page",
        "archive_first_page",
        "archive_page_100",
        "archive_search",
        "profile",
        "users_list",
        "memory_page_archived",
        "search",
    ):
        if name in result:
            show(name, result[name])
    r = result["search"]["retrieve_ms"]
    print(
        f"{'  of which retrieve':<24} p50 {r['p50']:7.1f}  p95 {r['p95']:7.1f}  p99 "
        f"{r['p99']:7.1f} ms"
    )
    cpu = result["search"].get("server_cpu_ms_per_search")
    if cpu is not None:
        print(f"{'  server CPU per search':<24} {cpu:7.1f} ms (mean)")
    print(
        f"load average (1 min) before {result['load_before']:.1f}, after "
        f"{result['load_after']:.1f} on {os.cpu_count()} CPUs"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
