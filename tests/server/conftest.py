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

from srvutil import CONFIG_TOML, Deployment, Server, add_key, add_live_key, start_server  # noqa: E402


@pytest.fixture(scope="session")
def ray_head() -> Iterator[Any]:
    """One loopback Ray head (``ray start --head``, ``bench/_rayhead.py``) for the server
    tests whose processes join a Ray cluster from outside, as a deployment's do.

    Started once per test session (a head took 5-8 s to start on this machine, alone;
    its stop, a SIGKILL, about 0.1 s), so every test using it runs in one xdist worker
    (``tests/conftest.py`` groups them); each test keeps its own data directory, whose
    shards live in a Ray namespace of their own. Stopped at the end with a check that
    none of its processes is left and its directory is gone.
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


@pytest.fixture(scope="session")
def shared_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, Path]]:
    """One ``memoryos serve --mcp`` per test session (per xdist worker) and its folder, for
    the modules whose tests need a live server but no fresh one (see :func:`deployment`).

    A server's start costs a Python start, the server's imports and the store's opening
    (~2-3 s of CPU). Idle users are not passivated while the session runs (a passivation
    writes files, and some tests check that a refused call wrote none)."""
    root = tmp_path_factory.mktemp("server")
    keys = root / "keys.json"
    add_key(root, keys, "bootstrap")  # the server refuses to start without a key file
    (root / "config.toml").write_text(CONFIG_TOML + "idle_timeout_seconds = 86400.0\n")
    server = start_server(root, root / "data", keys, "--mcp", "--max-body-bytes", "200000")
    try:
        yield server, root
    finally:
        server.stop()


@pytest.fixture(scope="module")
def deployment(shared_server: tuple[Server, Path], request: pytest.FixtureRequest) -> Deployment:
    """The session's server with keys of tenants of this module's own (``acme-<module>``
    and so on): a module sees no user, key or rate bucket of another module, as if the
    server were its own, and its tests may use the same user ids as another module's."""
    server, root = shared_server
    tag = request.path.stem.removeprefix("test_").replace("_", "-")
    acme, globex = f"acme-{tag}", f"globex-{tag}"
    limited = add_key(root, server.keys_file, f"limited-{tag}", "--rate", "0.01", "--burst", "3")
    acme2 = add_key(root, server.keys_file, acme)
    globex_key = add_key(root, server.keys_file, globex)
    # Added last: once the server takes this key it has read the file with all of them.
    acme_key = add_live_key(server, root, acme)
    return Deployment(server, root, acme_key, acme2, globex_key, limited, acme, globex)
