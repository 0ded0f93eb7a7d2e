"""``serve --workers N`` (#46 item 6): several worker processes cannot share a data
directory; the refusal says what to run instead, before anything is opened."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def _serve(tmp_path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORYOS_")}
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "memoryos_actors.cli",
            "--data-dir",
            str(tmp_path / "d"),
            "serve",
            "--port",
            "0",
            *extra,
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


def test_serve_with_two_workers_is_refused_with_what_to_do_instead(tmp_path: Path) -> None:
    done = _serve(tmp_path, "--workers", "2")
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr  # one line, no traceback
    assert "--workers must be 1" in lines[0]
    assert "memoryos serve --ray ADDRESS" in lines[0]
    assert not (tmp_path / "d").exists()  # refused before the data directory was touched
