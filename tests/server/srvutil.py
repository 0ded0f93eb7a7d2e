"""Start the real ``memoryos serve`` in a subprocess on 127.0.0.1 and stop it again."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from inprocess import run_cli
from waiting import wait_until

# The server's command line is the benches' (one place says how a server is started).
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from _doors import serve_argv  # noqa: E402

#: Seconds a server may take to start or stop before the test fails. A graceful stop may
#: take the shutdown timeout (30 s) for the requests in flight and as long again for the
#: memory system's background work (docs/durability.md, Stopping).
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 70.0

CONFIG_TOML = """\
log_level = "error"
summary_debounce_seconds = 0.01
heat_tick_seconds = 3600.0
"""


@dataclass
class Server:
    """A running server process and how to reach it."""

    proc: subprocess.Popen[bytes]
    base_url: str
    data_dir: Path
    keys_file: Path
    log: Path

    def client(self, key: str | None = None, **kw: object) -> httpx.Client:
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        return httpx.Client(base_url=self.base_url, headers=headers, timeout=60.0, **kw)

    def stop(self, sig: int = signal.SIGTERM) -> int:
        """Stop the process with ``sig``; return its exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                # What it waits for: SIGUSR1 makes a server print every thread's stack.
                self.proc.send_signal(signal.SIGUSR1)
                time.sleep(2.0)
                self.proc.kill()
                self.proc.wait(STOP_TIMEOUT_S)
                raise AssertionError(f"server did not stop on {sig!r}: {self.log_text()}") from None
        return self.proc.returncode

    def log_text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""


def cli(*args: str, cwd: Path) -> str:
    """Run ``memoryos ARGS`` and return its stdout (fails the test on a non-zero exit).

    In this process, through the entry function (:mod:`inprocess`): the key commands only
    read and write the keys file, and a subprocess's start-up was most of their cost."""
    done = run_cli(*args, cwd=cwd)
    assert done.returncode == 0, done.stderr
    return done.stdout


def add_key(root: Path, keys_file: Path, tenant: str, *extra: str) -> str:
    """A new API key for ``tenant`` made with ``memoryos keys add``."""
    out = cli("keys", "add", "--tenant", tenant, "--keys-file", str(keys_file), *extra, cwd=root)
    return out.splitlines()[0].strip()


def start_server(
    root: Path, data_dir: Path, keys_file: Path, *extra: str, env: dict[str, str] | None = None
) -> Server:
    """Start ``memoryos serve`` on a free loopback port and wait until it is ready
    (``env``: its environment, default this one's without ``MEMORYOS_*`` variables)."""
    config = root / "config.toml"
    if not config.exists():
        config.write_text(CONFIG_TOML, encoding="utf-8")
    ready = root / f"ready-{time.monotonic_ns()}.json"
    log = root / f"server-{time.monotonic_ns()}.log"
    # The server's configuration is its TOML file: MEMORYOS_* variables other tests left in
    # the environment would be read (and refused) as configuration.
    if env is None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORYOS_")}
    env = {**env, "PYTHONUNBUFFERED": "1"}
    with log.open("wb") as out:
        proc = subprocess.Popen(
            serve_argv(data_dir, config, keys_file, ready, *extra),
            cwd=root,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
        )

    def ready_or_exited() -> bool:
        return ready.exists() or proc.poll() is not None

    try:
        wait_until(ready_or_exited, "the server to start", START_TIMEOUT_S, 0.05)
    except AssertionError:
        pass
    if not ready.exists():
        proc.kill()
        proc.wait()
        raise AssertionError(f"server did not start: {log.read_text(errors='replace')}")
    info = json.loads(ready.read_text())
    return Server(proc, f"http://127.0.0.1:{info['port']}", data_dir, keys_file, log)


def add_live_key(server: Server, root: Path, tenant: str) -> str:
    """A new key for ``tenant``, returned once the running ``server`` accepts it (it
    re-reads its key file at most once a second)."""
    key = add_key(root, server.keys_file, tenant)
    with server.client(key) as c:
        wait_until(
            lambda: c.get("/v1/users").status_code == 200,
            "the server to accept the new key",
            START_TIMEOUT_S,
            0.05,
        )
    return key


@dataclass
class Deployment:
    """A server with keys for two tenants and a tightly limited key (see conftest)."""

    server: Server
    root: Path
    acme: str
    acme2: str
    globex: str
    limited: str
    #: The tenants of ``acme`` (and ``acme2``) and of ``globex``.
    acme_tenant: str = "acme"
    globex_tenant: str = "globex"


def stdio_mcp_params(tmp_path: Path) -> Any:
    """``StdioServerParameters`` for ``memoryos mcp --tenant acme`` over a fresh data
    directory and :data:`CONFIG_TOML` in ``tmp_path`` (the official client's launch)."""
    from mcp import StdioServerParameters

    config = tmp_path / "config.toml"
    config.write_text(CONFIG_TOML)
    return StdioServerParameters(
        command=sys.executable,
        args=[
            "-m",
            "memoryos_actors",
            "--data-dir",
            str(tmp_path / "data"),
            "--config",
            str(config),
            "mcp",
            "--tenant",
            "acme",
        ],
        cwd=str(tmp_path),
    )
