"""A loopback Ray head that several processes can join, and that is gone again after use.

``ray start --head`` bound to 127.0.0.1 (``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``), every
port it would otherwise take from a fixed default given a free one (two heads on one
machine do not collide), its files in a temporary directory of its own. Stopping it ends
exactly the processes it started, found by that directory in their environment
(``RAY_TMPDIR``), never by name: ``ray stop`` would end every Ray process on the machine,
other users' included. Used by ``bench/server_bench.py`` and the server tests over Ray.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

__all__ = ["RayHead", "free_port", "ray_env"]

#: The file in a head's directory that holds its authentication token.
AUTH_TOKEN_FILE = "auth_token"

#: Seconds ``ray start`` may take, and the head's processes to end after SIGKILL.
START_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 5.0


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def ray_env(tmp: Path, address: str | None = None) -> dict[str, str]:
    """The environment for a process of (or joining) the head whose files are in ``tmp``:
    loopback only, Ray's files in ``tmp``, and with ``address`` Ray's default address."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORYOS_")}
    env["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    env["RAY_TMPDIR"] = str(tmp)
    env["RAY_USAGE_STATS_ENABLED"] = "0"
    # `ray start` turns on token authentication by default and, unlike `ray.init`, makes
    # no token when there is none: a head of this module has one of its own, made for it
    # in its directory (nothing read from or left in the home directory), and every
    # process that joins it reads it there. Joining a head of another's, Ray's own token.
    env["RAY_AUTH_MODE"] = "token"
    token = tmp / AUTH_TOKEN_FILE
    if token.exists():
        env["RAY_AUTH_TOKEN_PATH"] = str(token)
    if address is not None:
        env["RAY_ADDRESS"] = address
    return env


class RayHead:
    """A running loopback Ray head (``address``: ``127.0.0.1:PORT``); :meth:`stop` ends it.

    Args:
        num_cpus: CPUs the head offers to actors.
    """

    def __init__(self, num_cpus: int = 4) -> None:
        self.pgid: int | None = None
        # Short: Ray's socket paths under it have a length limit.
        self.tmp = Path(tempfile.mkdtemp(prefix="mos-rh-"))
        fd = os.open(self.tmp / AUTH_TOKEN_FILE, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_hex(32))  # the form of token Ray makes for itself
        port = free_port()
        self.address = f"127.0.0.1:{port}"
        ports = {
            "--dashboard-agent-listen-port": free_port(),
            "--dashboard-agent-grpc-port": free_port(),
            "--runtime-env-agent-port": free_port(),
            "--metrics-export-port": free_port(),
            "--dashboard-port": free_port(),
            "--node-manager-port": free_port(),
            "--object-manager-port": free_port(),
        }
        cmd = [
            str(Path(sys.executable).with_name("ray")),
            "start",
            "--head",
            "--node-ip-address",
            "127.0.0.1",
            "--port",
            str(port),
            "--temp-dir",
            str(self.tmp),
            "--include-dashboard",
            "false",
            "--num-cpus",
            str(num_cpus),
            "--disable-usage-stats",
            # Neither the autoscaler's monitor nor the log monitor: a head of fixed size
            # whose processes' logs stay in its directory needs neither (two Python
            # processes fewer to start on a small machine).
            "--no-monitor",
            "--include-log-monitor",
            "false",
        ]
        for flag, value in ports.items():
            cmd += [flag, str(value)]
        try:
            # A session of its own: every process of the head is in its process group
            # (some of Ray's agents start with an environment of their own).
            proc = subprocess.Popen(
                cmd,
                env=ray_env(self.tmp),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                start_new_session=True,
            )
            self.pgid = proc.pid
            try:
                _out, err = proc.communicate(timeout=START_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                raise RuntimeError("ray start did not finish") from None
            if proc.returncode != 0:
                raise RuntimeError(f"ray start failed: {err[-2000:]}")
        except BaseException:
            self.stop()
            raise

    def env(self) -> dict[str, str]:
        """The environment for a process that joins this head (``RAY_ADDRESS`` set)."""
        return ray_env(self.tmp, self.address)

    def pids(self) -> list[int]:
        """The live processes of this head: those in its process group or whose
        environment names its directory (the processes that joined it from here)."""
        marker = f"RAY_TMPDIR={self.tmp}".encode()
        found = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit() or int(entry.name) == os.getpid():
                continue
            try:
                stat = (entry / "stat").read_text().rsplit(")", 1)[-1].split()
                environ = (entry / "environ").read_bytes()
            except OSError:
                continue
            if stat[0] == "Z":
                continue
            if int(stat[2]) == self.pgid or marker in environ.split(b"\0"):
                found.append(int(entry.name))
        return found

    def stop(self) -> None:
        """End every process of this head with SIGKILL, wait up to :data:`STOP_TIMEOUT_S`
        seconds for them to be gone, and delete its directory.

        No SIGTERM first: the head's state is thrown away with its directory, so a graceful
        stop saves nothing, and Ray 2.60's GCS server, raylet and agents, sent SIGTERM all
        at once, were still running 8 s later (the stop then cost the whole wait)."""
        for _ in range(2):  # again for a process started while the first ones were ended
            pids = self.pids()
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            deadline = time.monotonic() + STOP_TIMEOUT_S
            while pids and time.monotonic() < deadline:
                pids = [p for p in pids if _alive(p)]
                time.sleep(0.02)
        shutil.rmtree(self.tmp, ignore_errors=True)


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, dead but not yet reaped, does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[-1].split()[0] != "Z"
