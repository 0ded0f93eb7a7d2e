"""The offline backend's work per stored page, in one thread: the page meta of each page
(in batches, each continuing the batch before) and a segment summary every
``summary_every_pages`` pages over the segment's pages so far (at most
``segment_max_pages``), as MTM asks for them. Synthetic turns of ``bench/throughput.py``.

    python bench/offline_backend.py --users 30 --turns 120
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/_out.py, throughput.py
from _out import add_out_dir, run_header, write_result  # noqa: E402
from throughput import turn  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def run_once(args: argparse.Namespace) -> float:
    """Microseconds of offline work per page, one pass over every user's history."""
    from memoryos_actors.gateway.offline import OfflineBackend

    backend = OfflineBackend()
    pages_done = 0
    t0 = time.perf_counter()
    for u in range(args.users):
        pages: list[dict[str, str]] = []
        prev: dict[str, str] | None = None
        chain = ""
        for i in range(args.turns):
            q, r = turn(u, i)
            pages.append({"query": q, "response": r})
            if len(pages) % args.batch == 0:
                batch = pages[-args.batch :]
                meta = backend.answer(
                    "page_meta_batch",
                    {"pages": batch, "previous_page": prev, "previous_meta_chain": chain},
                )
                chain = meta.data["pages"][-1]["meta_chain"]
                prev = batch[-1]
            if len(pages) % args.summary_every == 0:
                segment = pages[-args.segment_pages :]
                backend.answer("segment_summary", {"pages": segment})
            pages_done += 1
    return (time.perf_counter() - t0) / pages_done * 1e6


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=30)
    parser.add_argument("--turns", type=int, default=120)
    parser.add_argument("--batch", type=int, default=2, help="pages per page-meta call")
    parser.add_argument("--summary-every", type=int, default=6, help="summary_every_pages")
    parser.add_argument("--segment-pages", type=int, default=64, help="segment_max_pages")
    parser.add_argument("--runs", type=int, default=5)
    add_out_dir(parser)
    args = parser.parse_args(argv)
    per_page = [run_once(args) for _ in range(args.runs)]
    result: dict[str, Any] = {
        **run_header("offline_backend"),
        "settings": {k: v for k, v in vars(args).items() if k != "out_dir"},
        "us_per_page": {
            "median": statistics.median(per_page),
            "min": min(per_page),
            "runs": per_page,
        },
    }
    out = write_result(args, "offline_backend.json", result)
    print(
        f"offline work per page: median {result['us_per_page']['median']:.0f} us, "
        f"min {result['us_per_page']['min']:.0f} us ({args.runs} runs); {out}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
