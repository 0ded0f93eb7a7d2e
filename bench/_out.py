"""Where a benchmark writes its results: one ``--out-dir`` flag for every script.

By default results go to ``memoryos-bench`` in the system's temporary directory, so an
ordinary run never overwrites the results committed in ``bench/results/``; recording a
run there is a choice made on the command line (``--out-dir bench/results``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

__all__ = ["RESULTS_DIR", "add_out_dir", "out_dir", "run_header", "write_result"]

#: The folder of committed results.
RESULTS_DIR = Path(__file__).resolve().parent / "results"


def add_out_dir(parser: argparse.ArgumentParser) -> None:
    """Add ``--out-dir DIR`` to ``parser``."""
    parser.add_argument(
        "--out-dir",
        default=None,
        metavar="DIR",
        help="folder for the results (default: memoryos-bench in the system's temporary "
        "directory; pass bench/results to update the committed results)",
    )


def out_dir(args: argparse.Namespace) -> Path:
    """The results folder of a parsed command line (created)."""
    given = getattr(args, "out_dir", None)
    path = Path(given) if given else Path(tempfile.gettempdir()) / "memoryos-bench"
    path.mkdir(parents=True, exist_ok=True)
    return path


def write_result(args: argparse.Namespace, name: str, result: Any) -> Path:
    """Write ``result`` as ``<out dir>/<name>`` (JSON, indented) and return the path."""
    path = out_dir(args) / name
    path.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return path


def run_header(bench: str) -> dict[str, Any]:
    """The fields every result file starts with: ``bench`` (its name), ``date`` (UTC),
    ``machine`` (Python version, CPUs) and ``command`` (the command line that reproduces
    it)."""
    return {
        "bench": bench,
        "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count()},
        "command": f"python bench/{Path(sys.argv[0]).name} " + " ".join(sys.argv[1:]),
    }
