"""Fixtures for the server tests: a real server process shared by a module's tests."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
pytest.importorskip("prometheus_client")

sys.path.insert(0, str(Path(__file__).parent))

from srvutil import Deployment, add_key, start_server  # noqa: E402


@pytest.fixture(scope="session")
def ray_head() -> Iterator[Any]:
    """One loopback Ray head (``ray start --head``, ``bench/_rayhead.py``) for the server
    tests whose processes join a Ray cluster from outside, as a deployment's do.

    Started once per test session (a head takes 10-25 s to start and 5-7 s to stop on
    this machine), so every test using it runs in one xdist worker (``tests/conftest.py``
    groups them); each test keeps its own data directory, whose shards live in a Ray
    namespace of their own. Stopped at the end with a check that none of its processes
    is left and its directory is gone.
    """
    pytest.importorskip("ray")
    if not sys.platform.startswith("linux"):
        pytest.skip("finds Ray's processes through /proc")
    if not (Path(sys.executable).parent / "ray").exists():
        pytest.skip("no `ray` command beside this Python")
    from _rayhead import RayHead  # bench/ is on sys.path (srvutil puts it there)

    head = RayHead(num_cpus=4)
    try:
        yield head
    finally:
        head.stop()
    assert head.pids() == [], f"Ray processes left running: {head.pids()}"
    assert not head.tmp.exists()


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    root = tmp_path_factory.mktemp("server")
    keys = root / "keys.json"
    acme = add_key(root, keys, "acme")
    acme2 = add_key(root, keys, "acme")
    globex = add_key(root, keys, "globex")
    limited = add_key(root, keys, "limited", "--rate", "0.01", "--burst", "3")
    server = start_server(root, root / "data", keys, "--mcp", "--max-body-bytes", "200000")
    try:
        yield Deployment(server, root, acme, acme2, globex, limited)
    finally:
        server.stop()
