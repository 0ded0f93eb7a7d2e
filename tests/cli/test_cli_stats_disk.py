"""``memoryos stats`` reads the data directory's files: what it loads, what it reports
about damaged users, and where its log lines go (what it imports in a subprocess, as a user
runs it; the rest in this process, through the entry function)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from inprocess import run_cli

from memoryos_actors import MemoryConfig, MemoryOS
from memoryos_actors.store.snapshot import list_snapshots
from memoryos_actors.store.userstore import SNAPSHOT_DIR, WAL_FILE, user_path

_REPO = Path(__file__).resolve().parents[2]

#: Modules a read of the files has no use for; each costs ``memoryos stats`` start-up time
#: (together about half a second of a 1,000-user run on main before this was fixed).
_NOT_NEEDED = (
    "numpy",
    "pykka",
    "structlog",
    "rich.console",
    "memoryos_actors.actors",
    "memoryos_actors.tiers",
    "memoryos_actors.system",
)


def _stats(data: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(_REPO)}
    env.pop("MEMORYOS_DATA_DIR", None)
    return subprocess.run(
        [sys.executable, *extra, "-m", "memoryos_actors", "--data-dir", str(data), "stats"],
        capture_output=True,
        text=True,
        env=env,
        cwd=_REPO,
        timeout=120,
        check=False,
    )


def _fill(data: Path, turns: dict[str, int]) -> None:
    with MemoryOS.open(data, MemoryConfig(log_level="error", snapshot_every_turns=5)) as mem:
        for user, n in turns.items():
            for i in range(n):
                mem.add_turn(user, f"{user} says thing number {i}", "noted")
        mem.flush()


def _imported(importtime_err: str) -> set[str]:
    """Module names from ``python -X importtime`` lines on stderr."""
    return {
        line.rsplit("|", 1)[1].strip()
        for line in importtime_err.splitlines()
        if line.startswith("import time:") and line.count("|") == 2
    }


def test_stats_reads_the_files_without_importing_actors_numpy_or_logging(tmp_path: Path) -> None:
    data = tmp_path / "data"
    _fill(data, {"ann": 3, "bob": 12})
    done = _stats(data, "-X", "importtime")
    assert done.returncode == 0, done.stderr
    stats = json.loads(done.stdout)
    assert stats["stored"]["users"] == 2 and stats["stored"]["turns"] == 15
    assert stats["damaged_users"] == 0
    imported = _imported(done.stderr)
    assert "memoryos_actors.disk_stats" in imported  # the parse works
    loaded = sorted(m for m in _NOT_NEEDED if m in imported)
    assert not loaded, f"memoryos stats imported {loaded}"


def test_stats_reports_damaged_users_on_stdout_logs_on_stderr_and_counts_the_others(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    _fill(data, {"ann": 7, "bob": 12, "cat": 6, "dee": 2})
    # bob: every snapshot generation damaged.
    for _gen, path in list_snapshots(user_path(data, "bob") / SNAPSHOT_DIR):
        raw = bytearray(path.read_bytes())
        for i in range(len(raw) // 2, len(raw) // 2 + 16):
            raw[i] ^= 0xFF
        path.write_bytes(bytes(raw))
    # cat: a WAL of zero bytes beside its snapshots is damage, not a fresh user.
    cat_wal = user_path(data, "cat") / WAL_FILE
    cat_wal.write_bytes(bytes(cat_wal.stat().st_size))
    # dee: only a blank WAL, as a machine crash leaves a creation never fsynced: no data.
    dee = user_path(data, "dee")
    for _gen, path in list_snapshots(dee / SNAPSHOT_DIR):
        path.unlink()
    (dee / WAL_FILE).write_bytes(bytes(64))

    done = run_cli("stats", data_dir=data, cwd=_REPO)  # no import is checked: in-process
    assert done.returncode == 0, done.stderr
    stats = json.loads(done.stdout)  # log lines never reach stdout
    assert sorted(stats["damaged"]) == ["bob", "cat"] and stats["damaged_users"] == 2
    assert "snapshot" in stats["damaged"]["bob"]
    assert WAL_FILE in stats["damaged"]["cat"]
    assert stats["stored"]["users"] == 2 and stats["stored"]["turns"] == 7
    assert "snapshot_unreadable" in done.stderr  # the store's log line, on stderr
