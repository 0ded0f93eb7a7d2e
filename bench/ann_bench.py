"""hnswlib graph: building it from stored vectors vs loading a saved one.

Run::

    python bench/ann_bench.py [--vectors 2000] [--dim 512] [--repeats 5]
                              [--out-dir bench/results]

This is the measurement behind saving MTM's hnswlib graphs in snapshots: a restored MTM
either builds its segment and page graphs from the stored embeddings or loads the saved
ones. Times are medians of ``--repeats`` runs in this process (single-threaded hnswlib, as
MTM uses it); compare the two within one run, the machine is shared.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/_out.py
import numpy as np
from _out import add_out_dir  # noqa: E402
from _out import out_dir as bench_out_dir  # noqa: E402

from memoryos_actors.tiers._ann import AnnIndex


def run(n: int, dim: int, repeats: int) -> dict[str, Any]:
    """Median build and load times (ms) of an AnnIndex over ``n`` random unit vectors."""
    rng = np.random.default_rng(0)
    mat = rng.standard_normal((n, dim)).astype(np.float32)
    mat /= np.linalg.norm(mat, axis=1, keepdims=True)
    vectors = {i: mat[i] for i in range(n)}
    built = AnnIndex(dim, 0)
    built.restore(vectors, None)
    graph = built.graph_bytes()
    if graph is None:
        raise SystemExit(f"no graph was built for {n} vectors (too few?)")
    build_ms: list[float] = []
    load_ms: list[float] = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        AnnIndex(dim, 0).restore(vectors, None)
        build_ms.append((time.perf_counter() - t0) * 1000.0)
        t0 = time.perf_counter()
        AnnIndex(dim, 0).restore(vectors, graph)
        load_ms.append((time.perf_counter() - t0) * 1000.0)
    build, load = statistics.median(build_ms), statistics.median(load_ms)
    return {
        "bench": "ann",
        "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        "machine": platform.platform(),
        "python": platform.python_version(),
        "command": "python bench/ann_bench.py " + " ".join(sys.argv[1:]),
        "vectors": n,
        "dim": dim,
        "repeats": repeats,
        "graph_bytes": len(graph),
        "build_ms_median": build,
        "load_ms_median": load,
        "build_ms": build_ms,
        "load_ms": load_ms,
        "build_over_load": build / load if load > 0 else None,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vectors", type=int, default=2000)
    parser.add_argument("--dim", type=int, default=512)
    parser.add_argument("--repeats", type=int, default=5)
    add_out_dir(parser)
    args = parser.parse_args(argv)
    result = run(args.vectors, args.dim, args.repeats)
    out = bench_out_dir(args) / "ann.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print("| metric | value |\n| --- | --- |")
    print(
        f"| build {result['vectors']} x {result['dim']} graph, median ms | "
        f"{result['build_ms_median']:.1f} |"
    )
    print(f"| load the saved graph, median ms | {result['load_ms_median']:.1f} |")
    print(f"| build / load | {result['build_over_load']:.0f}x |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
