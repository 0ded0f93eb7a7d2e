"""Every benchmark script that writes results takes its folder from one flag, ``--out-dir``
(so an ordinary run never overwrites the committed ``bench/results/``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

_REPO = Path(__file__).resolve().parents[2]
_BENCH = _REPO / "bench"

#: Runnable scripts that write no results file (they print), with why.
_PRINT_ONLY = {"recall_sweep.py": "prints one table per variant"}

# One process runs every script's --help (each import of the memory system costs a second
# on a loaded machine); it prints {script: help text} as JSON.
_PROBE = r"""
import contextlib, io, json, runpy, sys
out = {}
for path in sys.argv[1:]:
    buf = io.StringIO()
    sys.argv = [path, "--help"]
    with contextlib.redirect_stdout(buf):
        try:
            runpy.run_path(path, run_name="__main__")
        except SystemExit:
            pass
    out[path] = buf.getvalue()
sys.stdout.write(json.dumps(out))
"""


def _runnable_scripts() -> list[Path]:
    return sorted(
        p
        for p in _BENCH.glob("*.py")
        if 'if __name__ == "__main__":' in p.read_text("utf-8") and p.name not in _PRINT_ONLY
    )


def test_every_bench_script_that_writes_results_takes_out_dir() -> None:
    scripts = _runnable_scripts()
    assert len(scripts) >= 15  # the glob found the benches
    env = {**os.environ, "PYTHONPATH": str(_REPO)}
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, *map(str, scripts)],
        capture_output=True,
        text=True,
        env=env,
        cwd=_REPO,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    helps = json.loads(done.stdout)
    missing = [Path(p).name for p, text in helps.items() if "--out-dir" not in text]
    assert not missing, f"no --out-dir in the help of {missing}"
