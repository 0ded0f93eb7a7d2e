"""Front doors over Ray shards for the server bench: start D ``memoryos serve`` processes
over one sharded data directory and one Ray cluster, find their shard processes, read the
CPU time every process spent, stop them again.

A door is started with ``memoryos serve --ray ADDRESS --shards S`` when the command line
has those options (several doors share the shards); an older ``memoryos serve`` only has
``--ray`` (its shards are its own, so one door at most), and joins the cluster through
``RAY_ADDRESS``. Doors are stopped with SIGINT: a Ray driver's SIGTERM handler is Ray's.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

__all__ = [
    "Door",
    "cpu_seconds",
    "serve_argv",
    "serve_has_shard_options",
    "start_doors",
    "stop_doors",
]

#: Seconds a door may take to start (Ray workers start slowly on a loaded machine).
START_TIMEOUT_S = 180.0
STOP_TIMEOUT_S = 60.0
_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time process ``pid`` has used so far, seconds (0.0 once it is
    gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()
    except OSError:
        return 0.0
    # utime and stime are fields 14 and 15 of stat; after the command's ")", 12 and 13.
    return (int(fields[11]) + int(fields[12])) / _TICKS


def serve_argv(
    data_dir: Path, config: Path, keys_file: Path, ready: Path, *extra: str
) -> list[str]:
    """The command line of a ``memoryos serve`` child process (this interpreter) over
    ``data_dir`` with the configuration file ``config`` and the key file ``keys_file``,
    listening on 127.0.0.1 on a port from the OS, which it writes to ``ready`` once it
    serves; ``extra`` options follow. The benches, the screenshot script and the server
    tests all start their servers with it."""
    return [
        sys.executable,
        "-m",
        "memoryos_actors",
        "--data-dir",
        str(data_dir),
        "--config",
        str(config),
        "serve",
        "--host",
        "127.0.0.1",
        "--port",
        "0",
        "--keys-file",
        str(keys_file),
        "--ready-file",
        str(ready),
        *extra,
    ]


def serve_has_shard_options() -> bool:
    """Whether ``memoryos serve`` takes ``--ray ADDRESS`` and ``--shards N``."""
    done = subprocess.run(
        [sys.executable, "-m", "memoryos_actors", "serve", "--help"],
        capture_output=True,
        text=True,
        check=False,
    )
    return "--shards" in done.stdout


@dataclass
class Door:
    """One running ``memoryos serve`` process."""

    proc: subprocess.Popen[bytes]
    url: str
    log: Path
    shard_pids: list[int] = field(default_factory=list)


def start_doors(
    root: Path,
    data_dir: Path,
    keys_file: Path,
    config: Path,
    doors: int,
    shards: int,
    address: str,
    env: dict[str, str],
) -> list[Door]:
    """Start ``doors`` servers over ``data_dir`` (``shards`` shards on the Ray cluster at
    ``address``) one after the other; each is ready when this returns."""
    shard_opts = serve_has_shard_options()
    if doors > 1 and not shard_opts:
        raise SystemExit(
            "--doors > 1 needs `memoryos serve --ray ADDRESS --shards N` (shared shards)"
        )
    started: list[Door] = []
    try:
        for n in range(doors):
            ready = root / f"ready-{n}.json"
            log = root / f"door-{n}.log"
            ray_args = ["--ray", address, "--shards", str(shards)] if shard_opts else ["--ray"]
            cmd = serve_argv(
                data_dir, config, keys_file, ready, "--rate", "1000000", "--burst", "1000000"
            )
            cmd += ray_args
            with log.open("wb") as out:
                proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT)
            door = Door(proc, "", log)
            started.append(door)
            deadline = time.monotonic() + START_TIMEOUT_S
            while not ready.exists():
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit(f"door {n} did not start: {log.read_text()[-3000:]}")
                time.sleep(0.1)
            door.url = f"http://127.0.0.1:{json.loads(ready.read_text())['port']}"
        return started
    except BaseException:
        stop_doors(started)
        raise


def stop_doors(doors: list[Door]) -> None:
    """Stop every door (SIGINT, then SIGKILL after :data:`STOP_TIMEOUT_S`)."""
    for door in doors:
        if door.proc.poll() is None:
            door.proc.send_signal(signal.SIGINT)
    for door in doors:
        try:
            door.proc.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            door.proc.kill()
            door.proc.wait()
