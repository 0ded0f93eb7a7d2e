"""Retrieve latency at 5,451 pages in one user (issue #24), and a digest of what it returns.

The LongMemEval dev set's global haystack (see ``bench/longmemeval.py``: the sessions of
the first ``--items`` items as ONE user, 5,451 pages for 500 items) is ingested once into
``--data-dir`` through the public API and kept. Each run copies that directory to a
temporary one (a retrieval changes heat and visit counts, so every run starts from the
same state), opens it, asks ``--warmup`` questions unmeasured, then every scored question
``--rounds`` times through ``retrieve`` (at the question's date, as the recall bench does)
and reports, per retrieve: wall time p50/p95/p99/max (ms) and the process CPU time
(``time.process_time``, all threads) p50/p95/p99.

It also reports what was retrieved: the recall of the first measured round (a hit as in
``bench/longmemeval.py``) and a SHA-256 of the ranked past pages (``ctx.mtm``: tier, id,
score to 9 decimals, ``why``) of every measured retrieve (``--dump FILE`` writes them
out). Two versions of the code that rank the same give the same digest (the bench runs
with ``PYTHONHASHSEED=0``): a latency change must leave it unchanged.

A/B runs of two checkouts on the same kept data, alternated (the machine is shared):

    python bench/retrieve_bench.py --data-dir DIR --name a            # this checkout
    PYTHONPATH=OTHER_CHECKOUT python bench/retrieve_bench.py --data-dir DIR --name b

(``PYTHONPATH`` puts the other checkout's ``memoryos_actors`` first; the result records
which file was imported.) The results go to ``--out-dir`` (default: ``memoryos-bench`` in
the system's temporary directory; ``--out-dir bench/results`` records a run there).

``--stages`` also reports where the CPU goes: the thread CPU time (``time.thread_time``,
so waiting for the GIL or a lock does not count) of each stage of the retrieve path, per
retrieve, summed over the calls (nested stages are inside their callers). The wrappers
add a little time of their own.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as _dt
import hashlib
import json
import os
import platform
import shlex
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

# ``bench.*`` after PYTHONPATH and site-packages: an A/B run's PYTHONPATH chooses the
# memory system's code, this checkout only supplies the bench helpers.
sys.path.append(str(Path(__file__).resolve().parent.parent))

from bench._out import add_out_dir, write_result  # noqa: E402
from bench.longmemeval import (  # noqa: E402
    TOP_K,
    USER,
    BenchError,
    build_haystack,
    load_items,
    resolve_data_path,
)

_MARKER = "retrieve_bench.json"


def _config() -> Any:
    from memoryos_actors import MemoryConfig

    # The recall bench's settings (top_k_pages 10, hybrid), quiet logs.
    return MemoryConfig(top_k_pages=TOP_K, retrieval_mode="hybrid", log_level="error")


def ingest(data_dir: Path, haystack: Any) -> dict[str, Any]:
    """Store the haystack's pages as one user in ``data_dir`` and write the marker file."""
    from memoryos_actors import MemoryOS
    from memoryos_actors.errors import Overloaded

    data_dir.mkdir(parents=True, exist_ok=True)
    index: dict[str, int] = {}
    started = time.perf_counter()
    with MemoryOS.open(data_dir / "data", _config()) as mem:
        for page in haystack.pages:
            delay = 0.05
            while True:
                try:
                    pid = mem.add_turn(
                        USER,
                        page.query,
                        page.response,
                        timestamp=page.timestamp,
                        turn_key=f"lme:{page.index}",
                    )
                    break
                except Overloaded:
                    time.sleep(delay)  # backpressure: wait and retry with the same key
                    delay = min(2 * delay, 2.0)
            index[str(pid)] = page.index
        mem.flush()
    marker = {
        "items": haystack.items,
        "pages": len(haystack.pages),
        "ingest_seconds": time.perf_counter() - started,
        "page_index": index,
    }
    (data_dir / _MARKER).write_text(json.dumps(marker), encoding="utf-8")
    return marker


def _pct(values: Sequence[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, max(0, round(q * (len(s) - 1))))]


def _summary(values: Sequence[float]) -> dict[str, float]:
    return {
        "p50": _pct(values, 0.50),
        "p95": _pct(values, 0.95),
        "p99": _pct(values, 0.99),
        "max": max(values),
        "mean": sum(values) / len(values),
    }


#: The stages ``--stages`` times: (module, owner in it or "", function names).
_STAGES = (
    ("memoryos_actors.actors.workers", "RetrievalWorker", ("_retrieve",)),
    ("memoryos_actors.actors.mtm", "MTMActor", ("_search",)),
    ("memoryos_actors.actors.lpm", "LPMActor", ("_with_archived",)),
    ("memoryos_actors.tiers.mtm", "MTMCore", ("search", "_ranked_segments")),
    (
        "memoryos_actors.tiers.hybrid",
        "HybridSearch",
        ("search", "_score_rows", "_supersede", "_window_candidates"),
    ),
    # Functions hybrid imported by name are timed where hybrid calls them.
    (
        "memoryos_actors.tiers.hybrid",
        "",
        ("fused_score_array", "term_counts", "term_id_counts", "bm25_scores"),
    ),
    ("memoryos_actors.store.cold", "ColdIndex", ("search", "pages_by_seq", "pages_between")),
    ("memoryos_actors.store.cold", "", ("ranked_rowids", "row_items", "cand_rows")),
    ("memoryos_actors.store.cold_read", "", ("row_items", "cand_rows")),
    ("memoryos_actors.actors.workers", "", ("build_context",)),
    ("memoryos_actors.actors.base", "GatewayClient", ("embed_one",)),
    ("memoryos_actors.lexicon", "LexIndex", ("weighted_scores",)),
    ("memoryos_actors.tiers._ann", "AnnIndex", ("candidates", "dots")),
)


def _time_stages() -> tuple[dict[str, int], dict[str, int]]:
    """Wrap the stages of :data:`_STAGES` (in this process only) to sum their thread CPU
    time (ns) and calls."""
    import functools
    import importlib

    cpu: dict[str, int] = {}
    calls: dict[str, int] = {}

    def timed(label: str, fn: Any) -> Any:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            t0 = time.thread_time_ns()
            try:
                return fn(*args, **kwargs)
            finally:
                cpu[label] = cpu.get(label, 0) + time.thread_time_ns() - t0
                calls[label] = calls.get(label, 0) + 1

        return wrapper

    for module_name, owner_name, names in _STAGES:
        module = importlib.import_module(module_name)
        owner = getattr(module, owner_name) if owner_name else module
        for name in names:
            if hasattr(owner, name):
                label = f"{owner_name or module_name.rsplit('.', 1)[-1]}.{name}"
                setattr(owner, name, timed(label, getattr(owner, name)))
    return cpu, calls


def measure(
    data_dir: Path,
    haystack: Any,
    marker: dict[str, Any],
    rounds: int,
    warmup: int,
    stages: bool = False,
    dump: Any = None,
) -> dict[str, Any]:
    """Run the questions on a copy of the kept data; latencies, recall and digest (and
    every ranked page, one line each, into the text file ``dump`` when given)."""
    import memoryos_actors
    from memoryos_actors import MemoryOS

    index: dict[str, int] = marker["page_index"]
    stage_cpu, stage_calls = _time_stages() if stages else ({}, {})
    wall: list[float] = []
    cpu: list[float] = []
    digest = hashlib.sha256()
    hits = 0
    with tempfile.TemporaryDirectory(prefix="retrieve-bench-") as tmp:
        copy = Path(tmp) / "data"
        shutil.copytree(data_dir / "data", copy)
        with MemoryOS.open(copy, _config()) as mem:
            questions = list(haystack.questions)
            for q in (questions * (1 + warmup // max(len(questions), 1)))[:warmup]:
                mem.retrieve(USER, q.question, timestamp=q.timestamp)
            stage_cpu.clear()
            stage_calls.clear()
            for r in range(rounds):
                for q in questions:
                    c0, t0 = time.process_time(), time.perf_counter()
                    ctx = mem.retrieve(USER, q.question, timestamp=q.timestamp)
                    wall.append(1000 * (time.perf_counter() - t0))
                    cpu.append(1000 * (time.process_time() - c0))
                    ranked = "".join(
                        f"{item.tier}|{item.item_id}|{item.score:.9f}|{item.why}\n"
                        for item in ctx.mtm
                    )
                    digest.update(ranked.encode())
                    if dump is not None:
                        dump.write(f"# {r} {q.question_id}\n{ranked}")
                    if r == 0:
                        got = {index.get(str(p), -1) for p in ctx.page_ids()}
                        hits += not q.pages.isdisjoint(got)
    return {
        "code": str(Path(memoryos_actors.__file__).resolve().parent.parent.name),
        "retrieves": len(wall),
        "wall_ms": _summary(wall),
        "cpu_ms": _summary(cpu),
        "recall_first_round": {"hits": hits, "n": len(haystack.questions)},
        "results_sha256": digest.hexdigest(),
        **(
            {
                "stages_cpu_ms_per_retrieve": {
                    k: {"ms": v / 1e6 / len(wall), "calls": stage_calls[k] / len(wall)}
                    for k, v in sorted(stage_cpu.items(), key=lambda kv: -kv[1])
                }
            }
            if stages
            else {}
        ),
    }


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point; returns the exit code (0 ok, 2 cannot run)."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", help="dev-set JSON (default as bench/longmemeval.py)")
    p.add_argument(
        "--data-dir", required=True, help="where the ingested user is kept (made on the first run)"
    )
    p.add_argument("--items", type=int, default=500, help="history length in items")
    p.add_argument("--rounds", type=int, default=2, help="passes over the questions")
    p.add_argument("--warmup", type=int, default=20, help="unmeasured questions first")
    p.add_argument(
        "--dump",
        default=None,
        metavar="FILE",
        help="write every ranked page of every measured retrieve to FILE",
    )
    p.add_argument(
        "--stages",
        action="store_true",
        help="also report the thread CPU time of each stage of the retrieve path",
    )
    p.add_argument(
        "--name", default=None, help="results file retrieve_NAME.json (default: retrieve.json)"
    )
    add_out_dir(p)
    args = p.parse_args(argv)
    if argv is None and os.environ.get("PYTHONHASHSEED") != "0":
        # The order of a set of query terms follows string hashing, which Python seeds
        # per process; it orders BM25's sums, hence the last bits of scores. One seed for
        # every run makes the digests of two versions comparable.
        os.execve(
            sys.executable, [sys.executable, *sys.argv], {**os.environ, "PYTHONHASHSEED": "0"}
        )
    try:
        haystack = build_haystack(load_items(resolve_data_path(args.data)), args.items)
    except BenchError as exc:
        print(f"retrieve bench: {exc}", file=sys.stderr)
        return 2
    data_dir = Path(args.data_dir)
    marker_path = data_dir / _MARKER
    if marker_path.exists():
        marker = json.loads(marker_path.read_text(encoding="utf-8"))
        if marker["items"] != args.items:
            print(
                f"retrieve bench: {data_dir} holds {marker['items']} items, not {args.items}",
                file=sys.stderr,
            )
            return 2
    else:
        marker = ingest(data_dir, haystack)
        print(
            f"ingested {marker['pages']} pages in {marker['ingest_seconds']:.0f} s", file=sys.stderr
        )
    load_before = os.getloadavg()
    with contextlib.ExitStack() as stack:
        dump = stack.enter_context(open(args.dump, "w", encoding="utf-8")) if args.dump else None
        result = measure(data_dir, haystack, marker, args.rounds, args.warmup, args.stages, dump)
    shown = list(sys.argv[1:] if argv is None else argv)
    for i, arg in enumerate(shown[:-1]):
        if arg in ("--data", "--data-dir", "--out-dir"):  # no path of this machine in results
            shown[i + 1] = f"<dir>/{Path(shown[i + 1]).name}"
    report = {
        "benchmark": "retrieve-latency-longmemeval",
        "date": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "command": shlex.join(["python", "bench/retrieve_bench.py", *shown]),
        "machine": {
            "python": platform.python_version(),
            "cpu_count": os.cpu_count(),
            "load_average_before": load_before,
            "load_average_after": os.getloadavg(),
        },
        "pages": marker["pages"],
        "questions": len(haystack.questions),
        "warmup": args.warmup,
        "rounds": args.rounds,
        **result,
    }
    w, c = result["wall_ms"], result["cpu_ms"]
    print(
        f"{report['code']}: {result['retrieves']} retrieves at {marker['pages']} pages: wall "
        f"p50/p95/p99 {w['p50']:.1f}/{w['p95']:.1f}/{w['p99']:.1f} ms, CPU p50/p95/p99 "
        f"{c['p50']:.1f}/{c['p95']:.1f}/{c['p99']:.1f} ms; recall "
        f"{result['recall_first_round']['hits']}/{result['recall_first_round']['n']}; "
        f"results {result['results_sha256'][:16]}; load "
        f"{load_before[0]:.1f} -> {report['machine']['load_average_after'][0]:.1f}"
    )
    for label, row in result.get("stages_cpu_ms_per_retrieve", {}).items():
        print(f"  {row['ms']:7.2f} ms  {row['calls']:6.1f} calls  {label}")
    out = write_result(args, f"retrieve_{args.name}.json" if args.name else "retrieve.json", report)
    print(f"results: {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
