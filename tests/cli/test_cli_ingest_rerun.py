"""``memoryos ingest`` stopped by Ctrl-C and run again: each turn of the file is stored
once (issue #25), and the stop says how many were stored and how to go on."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from stopcheck import Lines, assert_reopens_with, kill_if_running, stop_and_wait


def _ingest(tmp_path: Path, path: Path) -> subprocess.Popen[str]:
    config = tmp_path / "config.toml"
    config.write_text('log_level = "error"\n', encoding="utf-8")
    base = {k: v for k, v in os.environ.items() if not k.startswith("MEMORYOS_")}
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "memoryos_actors",
            "--data-dir",
            str(tmp_path / "data"),
            "--config",
            str(config),
            "ingest",
            str(path),
        ],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**base, "COLUMNS": "100"},
        cwd=tmp_path,
    )


def test_ingest_stopped_by_ctrl_c_then_run_again_stores_every_turn_once(
    tmp_path: Path,
) -> None:
    users = [f"u{n}" for n in range(4)]
    # The first run is stopped after its first progress line (5%): the other 95%, 380
    # turns, keep it busy well past the signal, even on a loaded machine (a run that ended
    # first fails the test: exit code 0, no stop notice). Every turn the first run leaves
    # is stored by the second, so the file's length is most of the test's time.
    total = 400
    path = tmp_path / "turns.jsonl"
    path.write_text(
        "".join(
            json.dumps(
                {
                    "user_id": users[n % 4],
                    "query": f"question {n} about kites",
                    "response": f"answer {n}",
                }
            )
            + "\n"
            for n in range(total)
        ),
        encoding="utf-8",
    )
    proc = _ingest(tmp_path, path)
    out, err = Lines(proc.stdout), Lines(proc.stderr)  # type: ignore[arg-type]
    try:
        # Piped: progress lines on stderr (every 5%); stop after the first one.
        err.wait_for(
            lambda lines: any("turns stored" in ln for ln in lines), "a progress line", proc
        )
        assert stop_and_wait(proc, signal.SIGINT) == 130, err.text
    finally:
        kill_if_running(proc, out, err)
    stopped = " ".join(err.text.split())
    assert "ingest stopped by SIGINT" in stopped and "Traceback" not in err.text, stopped

    proc = _ingest(tmp_path, path)
    out, err = Lines(proc.stdout), Lines(proc.stderr)  # type: ignore[arg-type]
    try:
        assert proc.wait(300) == 0, err.text
    finally:
        kill_if_running(proc, out, err)
    said = " ".join(out.text.split())
    assert "were stored before" in said, said  # the first run's turns were recognised
    assert_reopens_with(tmp_path / "data", dict.fromkeys(users, total // 4))
    assert "run the same command again" in stopped, stopped
