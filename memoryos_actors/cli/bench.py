"""``memoryos bench``: run one of the repository's benchmark scripts.

The benchmarks live in the ``bench/`` folder of a source checkout, beside the package; they
are not installed with it (they need the repository's data layout and write their results
into ``bench/results/``). So this command works from a checkout: the current directory or
one of its parents, or the checkout the package itself was installed from in editable mode.
Anywhere else it says so and what to do, instead of failing with a missing file.
"""

from __future__ import annotations

import argparse
import runpy
import sys
from collections.abc import Iterable
from pathlib import Path

from ._common import UsageError

__all__ = ["BENCHES", "find_bench_dir", "run_bench"]

BENCHES: dict[str, str] = {
    "throughput": "throughput",
    "locomo": "locomo",
    "scale": "scale_bench",
    "crash": "crash_bench",
    "supervisor": "supervisor_bench",
    "gateway": "gateway_bench",
    "store": "store_bench",
    "ann": "ann_bench",
    "lifecycle": "lifecycle_bench",
    "provider": "provider_bench",
    "client-cpu": "client_cpu",
    "cold": "cold_bench",
    "ray": "ray_bench",
    "longmemeval": "longmemeval",
    "stats": "stats_bench",
}
"""Benchmark name on the command line -> script in ``bench/`` (without ``.py``)."""

_PROJECT_NAME = 'name = "memoryos-actors"'


def _is_checkout(root: Path) -> bool:
    """True if ``root`` is a source checkout of this project with its ``bench/`` folder."""
    try:
        pyproject = (root / "pyproject.toml").read_text("utf-8")
    except OSError:
        return False
    return _PROJECT_NAME in pyproject and (root / "bench" / "throughput.py").is_file()


def _candidates() -> list[Path]:
    here = Path.cwd().resolve()
    # The package's own source tree: with an editable install it is inside the checkout.
    return [here, *here.parents, Path(__file__).resolve().parents[2]]


def find_bench_dir(candidates: Iterable[Path] | None = None) -> Path:
    """The ``bench/`` folder of the first checkout among ``candidates`` (default: the current
    directory, its parents, then the package's source tree).

    Raises:
        UsageError: no checkout found; the message says what to do.
    """
    for root in _candidates() if candidates is None else candidates:
        if _is_checkout(root):
            return root / "bench"
    raise UsageError(
        "`memoryos bench` runs the scripts in the bench/ folder of a source checkout of "
        "memoryos-actors, which is not installed with the package; run it from inside a "
        "checkout (or run `python bench/<script>.py` there)"
    )


def run_bench(args: argparse.Namespace) -> int:
    """The ``bench`` command: run ``bench/<script>.py`` with ``args.rest`` as its arguments,
    in this process, and return its exit code."""
    bench = find_bench_dir()
    script = bench / f"{BENCHES[args.which]}.py"
    if not script.is_file():
        raise UsageError(f"{script} is missing from this checkout")
    saved_argv = sys.argv
    sys.argv = [str(script), *args.rest]
    sys.path.insert(0, str(bench.parent))  # the scripts import `bench.<module>`
    try:
        runpy.run_path(str(script), run_name="__main__")
    except SystemExit as exc:
        if isinstance(exc.code, str):
            print(exc.code, file=sys.stderr)
            return 1
        return int(exc.code or 0)
    finally:
        sys.argv = saved_argv
        sys.path.remove(str(bench.parent))
    return 0
