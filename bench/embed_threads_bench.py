"""Why a local sentence-transformers model can stall ingest, measured: torch threads and batch size.

Two measurements in one run, each setting in a child process of its own (torch's thread
count is process-wide):

* **ingest**: the first ``--pages`` pages of the LoCoMo long history (all ten conversations
  as one user, as ``bench/locomo.py --long-history`` feeds them) through the public API
  with ``embedder="sentence-transformers"``, once per ``--threads`` value
  (``embedding_threads``). Reports the wall time of ingest including ``flush``, ``add_turn``
  p50/p99/max, ``Overloaded`` answers (retried with the same ``turn_key``), the largest
  placement backlog seen (pages waiting for MTM, sampled every 0.5 s) and the gateway's
  embedding call latency. MTM embeds one page per call, so the call latency is what the
  placement queue drains at.
* **batch**: the embedder alone on the same page texts (``query + "\\n" + response``),
  ``--batch-texts`` texts per batch size, ms per text (median of 3 passes): what embedding
  MTM's waiting pages in one call instead of one at a time would save.

Needs the ``st`` extra, a CPU torch and a local all-MiniLM-L6-v2 directory
(``--model-dir``, checked against its sha256); see ``bench/README.md``. Writes
``bench/results/embed_threads.json`` (``--name`` changes the stem).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import shlex
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/_out.py
from _out import add_out_dir  # noqa: E402
from _out import out_dir as bench_out_dir  # noqa: E402

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.locomo import ENV_MODEL_DIR, load_locomo, long_history, resolve_data_path


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def _page_texts(data: str | None, pages: int) -> list[tuple[str, str, float]]:
    conversation = long_history(load_locomo(resolve_data_path(data)))
    return [(p.query, p.response, p.timestamp) for p in conversation.pages[:pages]]


def _ingest(args: argparse.Namespace) -> dict[str, Any]:
    """One ingest with ``embedding_threads = args.threads`` (runs in a child process)."""
    from memoryos_actors import MemoryConfig, MemoryOS
    from memoryos_actors.errors import Overloaded
    from memoryos_actors.gateway.embedders import MINILM_L6_V2_SHA256

    pages = _page_texts(args.data, args.pages)
    config = MemoryConfig(
        embedder="sentence-transformers",
        embedding_model=args.model_dir,
        embedding_sha256=MINILM_L6_V2_SHA256,
        embedding_threads=args.threads,
        top_k_pages=20,
        log_level="error",
    )
    latencies: list[float] = []
    backlog: list[int] = []
    overloaded = 0
    stop = threading.Event()
    with (
        tempfile.TemporaryDirectory(prefix="embed-threads-") as data_dir,
        MemoryOS.open(Path(data_dir), config=config) as mem,
    ):

        def sample() -> None:
            while not stop.wait(0.5):
                backlog.append(int(mem.stats()["placement_backlog"]))

        sampler = threading.Thread(target=sample, name="backlog-sampler")
        sampler.start()
        try:
            started = time.perf_counter()
            for i, (query, response, timestamp) in enumerate(pages):
                t0 = time.perf_counter()
                while True:
                    try:
                        mem.add_turn(
                            "long-history",
                            query,
                            response,
                            timestamp=timestamp,
                            turn_key=f"page-{i}",
                        )
                        break
                    except Overloaded:
                        overloaded += 1
                        time.sleep(0.05)
                latencies.append(time.perf_counter() - t0)
            added = time.perf_counter() - started
            mem.flush()
            total = time.perf_counter() - started
            embed = mem.stats()["gateway"]["embeddings"]
        finally:
            stop.set()
            sampler.join()
    import torch

    return {
        "embedding_threads": args.threads,
        "torch_threads_seen": torch.get_num_threads(),
        "pages": len(pages),
        "add_seconds": added,
        "ingest_with_flush_seconds": total,
        "pages_per_second": len(pages) / total,
        "add_turn_ms": {
            "p50": 1000 * _percentile(latencies, 0.5),
            "p99": 1000 * _percentile(latencies, 0.99),
            "max": 1000 * max(latencies),
        },
        "overloaded_answers": overloaded,
        "placement_backlog_max": max(backlog, default=0),
        "embed_calls": embed["batches"],
        "embed_texts": embed["texts"],
        "embed_call_ms": {
            "p50": embed["latency"]["p50_ms"],
            "p95": embed["latency"]["p95_ms"],
            "mean": embed["latency"]["mean_ms"],
        },
    }


def _batch(args: argparse.Namespace) -> dict[str, Any]:
    """ms per text of the embedder alone, per batch size (runs in a child process)."""
    from memoryos_actors.gateway.embedders import MINILM_L6_V2_SHA256, SentenceTransformerEmbedder

    n = args.batch_texts
    texts = [f"{q}\n{r}" for q, r, _ in _page_texts(args.data, 3 * n)]
    embedder = SentenceTransformerEmbedder(
        args.model_dir, expected_sha256=MINILM_L6_V2_SHA256, num_threads=args.threads
    )
    embedder.embed(texts[:4])  # warm-up
    sizes = [int(s) for s in args.batch_sizes.split(",")]
    passes: dict[int, list[float]] = {s: [] for s in sizes}
    for rep in range(3):
        chunk = texts[rep * n : (rep + 1) * n]
        for size in sizes:
            t0 = time.perf_counter()
            for i in range(0, len(chunk), size):
                embedder.embed(chunk[i : i + size])
            passes[size].append(1000 * (time.perf_counter() - t0) / len(chunk))
    return {
        "embedding_threads": args.threads,
        "texts_per_pass": n,
        "ms_per_text_median_of_3": {str(s): sorted(v)[1] for s, v in passes.items()},
        "ms_per_text_passes": {str(s): v for s, v in passes.items()},
    }


def _child(args: argparse.Namespace, mode: str, threads: int) -> dict[str, Any]:
    cmd = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--child",
        mode,
        "--threads-one",
        str(threads),
        "--pages",
        str(args.pages),
        "--batch-texts",
        str(args.batch_texts),
        "--batch-sizes",
        args.batch_sizes,
        "--model-dir",
        args.model_dir,
    ]
    if args.data:
        cmd += ["--data", args.data]
    out = subprocess.run(
        cmd, check=True, capture_output=True, text=True, env={**os.environ, "TQDM_DISABLE": "1"}
    )
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python bench/embed_threads_bench.py", description=__doc__.split("\n", 1)[0]
    )
    parser.add_argument(
        "--model-dir",
        default=os.environ.get(ENV_MODEL_DIR),
        help=f"local all-MiniLM-L6-v2 directory (default: ${ENV_MODEL_DIR})",
    )
    parser.add_argument("--data", default=None, help="LoCoMo JSON file (as bench/locomo.py)")
    parser.add_argument("--pages", type=int, default=300, help="pages ingested per setting")
    parser.add_argument(
        "--threads", default="2,1", help="embedding_threads values, in run order (default: 2,1)"
    )
    parser.add_argument(
        "--batch-texts",
        type=int,
        default=256,
        help="texts per pass of the batch measurement (0: skip it)",
    )
    parser.add_argument("--batch-sizes", default="1,4,16,64")
    add_out_dir(parser)
    parser.add_argument(
        "--name", default="embed_threads", help="results file stem (default: embed_threads)"
    )
    parser.add_argument("--child", choices=("ingest", "batch"), help=argparse.SUPPRESS)
    parser.add_argument("--threads-one", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if not args.model_dir:
        parser.error(f"--model-dir (or ${ENV_MODEL_DIR}) is required")
    if args.child:
        args.threads = args.threads_one
        print(json.dumps(_ingest(args) if args.child == "ingest" else _batch(args)))
        return 0
    threads = [int(t) for t in args.threads.split(",")]
    load_before = os.getloadavg()
    ingest = [_child(args, "ingest", t) for t in threads]
    batch = [_child(args, "batch", t) for t in threads] if args.batch_texts > 0 else []
    shown = list(sys.argv[1:] if argv is None else argv)
    for i, arg in enumerate(shown[:-1]):
        if arg in ("--model-dir", "--data"):  # this machine's paths stay out of the results
            shown[i + 1] = f"<dir>/{Path(shown[i + 1]).name}"
    report = {
        "benchmark": "embed-threads",
        "date": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "command": shlex.join(["python", "bench/embed_threads_bench.py", *shown]),
        "machine": {
            "python": platform.python_version(),
            "cpu_count": os.cpu_count(),
            "load_average_before": load_before,
            "load_average_after": os.getloadavg(),
        },
        "ingest": ingest,
        "batch": batch,
    }
    path = bench_out_dir(args) / f"{args.name}.json"
    path.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(
        "| embedding_threads | ingest+flush s | add_turn p50 / p99 / max ms | Overloaded | "
        "backlog max | embed call p50 ms |"
    )
    print("| ---: | ---: | --- | ---: | ---: | ---: |")
    for r in ingest:
        a = r["add_turn_ms"]
        print(
            f"| {r['embedding_threads']} | {r['ingest_with_flush_seconds']:.1f} | "
            f"{a['p50']:.1f} / {a['p99']:.1f} / {a['max']:.0f} | {r['overloaded_answers']} | "
            f"{r['placement_backlog_max']} | {r['embed_call_ms']['p50']:.1f} |"
        )
    for b in batch:
        cells = ", ".join(f"batch {s}: {v:.1f}" for s, v in b["ms_per_text_median_of_3"].items())
        print(f"embedder alone, {b['embedding_threads']} thread(s), ms per text: {cells}")
    print(f"results: {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
