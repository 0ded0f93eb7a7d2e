"""Joining a Ray cluster nobody answers at fails within seconds with a clear error, where
``ray.init`` alone keeps retrying for minutes: ``memoryos serve --ray ADDRESS``,
``memoryos shards list|stop --ray ADDRESS`` and ``RayCluster(address=...)``.

No Ray cluster is started: the address is a loopback port nothing listens on (taken from
the OS, then closed), so every connection to it is refused at once.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("ray")

from inprocess import run_process  # noqa: E402
from localhost import LocalCluster  # noqa: E402

from memoryos_actors import MemoryConfig, MemoryOS  # noqa: E402
from memoryos_actors.cluster._ray import check_reachable  # noqa: E402
from memoryos_actors.errors import ClusterUnreachable  # noqa: E402

_CFG = MemoryConfig(log_level="error")


@pytest.fixture
def closed_port() -> int:
    """A loopback port nothing listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def open_port() -> Iterator[int]:
    """A loopback port that accepts connections for the test's length."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield int(s.getsockname()[1])


def _memoryos(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    # Without the check, the commands below run for more than five minutes: the timeout
    # of run_process keeps that from stalling the suite.
    return run_process(
        *args,
        cwd=cwd,
        env={"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"},
        drop=("MEMORYOS_", "RAY_ADDRESS"),
    )


def test_check_reachable_refuses_a_port_nothing_listens_on(closed_port: int) -> None:
    with pytest.raises(ClusterUnreachable, match=f"127.0.0.1:{closed_port}") as info:
        check_reachable(f"127.0.0.1:{closed_port}")
    assert "ray start --head" in str(info.value)


def test_check_reachable_passes_a_listening_address(open_port: int) -> None:
    check_reachable(f"127.0.0.1:{open_port}")


def test_check_reachable_follows_ray_address_and_skips_a_ray_of_ones_own(
    closed_port: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    check_reachable(None)  # Ray would start a cluster of its own: nothing to reach
    check_reachable(f"ray://127.0.0.1:{closed_port}")  # Ray Client: Ray's own checks
    monkeypatch.setenv("RAY_ADDRESS", f"127.0.0.1:{closed_port}")
    with pytest.raises(ClusterUnreachable):
        check_reachable(None)  # ray.init() joins RAY_ADDRESS when it is set


def test_opening_a_ray_cluster_at_an_unreachable_address_raises(
    tmp_path: Path, closed_port: int
) -> None:
    # In a child process: this one may have joined the test session's Ray cluster (then
    # RayCluster uses that connection and never looks at the address).
    child = textwrap.dedent(
        f"""
        import sys
        import ray
        from memoryos_actors import MemoryConfig, MemoryOS
        from memoryos_actors.cluster import RayCluster
        from memoryos_actors.errors import ClusterUnreachable
        try:
            MemoryOS.open(
                sys.argv[1],
                MemoryConfig(log_level="error"),
                cluster=RayCluster(shards=2, address="127.0.0.1:{closed_port}"),
            )
        except ClusterUnreachable as exc:
            print("unreachable:", exc)
        print("ray initialised:", ray.is_initialized())
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", child, str(tmp_path / "data")],
        cwd=tmp_path,
        env={**os.environ, "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_ADDRESS": ""},
        capture_output=True,
        text=True,
        timeout=120,  # only keeps a hang from stalling the suite
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert f"unreachable: cannot reach the Ray cluster at 127.0.0.1:{closed_port}" in done.stdout
    assert "ray initialised: False" in done.stdout


def test_serve_with_an_unreachable_ray_address_exits_at_once(
    tmp_path: Path, closed_port: int
) -> None:
    ready = tmp_path / "ready"
    done = _memoryos(
        "--data-dir",
        str(tmp_path / "data"),
        "serve",
        "--host",
        "127.0.0.1",
        "--port",
        "0",
        "--ready-file",
        str(ready),
        "--ray",
        f"127.0.0.1:{closed_port}",
        "--shards",
        "2",
        "--skip-provider-check",
        cwd=tmp_path,
    )
    assert done.returncode != 0
    assert f"cannot reach the Ray cluster at 127.0.0.1:{closed_port}" in done.stderr
    assert "Traceback" not in done.stderr
    assert not ready.exists()


def test_shards_list_with_an_unreachable_ray_address_exits_at_once(
    tmp_path: Path, closed_port: int
) -> None:
    data = tmp_path / "data"
    with MemoryOS.open(data, _CFG, cluster=LocalCluster(shards=2)) as mem:
        mem.add_turn("alice", "hello", "hi")
    done = _memoryos("shards", "list", str(data), "--ray", f"127.0.0.1:{closed_port}", cwd=tmp_path)
    assert done.returncode != 0
    assert f"cannot reach the Ray cluster at 127.0.0.1:{closed_port}" in done.stderr
    assert "Traceback" not in done.stderr
