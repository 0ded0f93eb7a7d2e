"""Fixtures for the server tests: a real server process shared by a module's tests."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
pytest.importorskip("prometheus_client")

sys.path.insert(0, str(Path(__file__).parent))

from srvutil import Deployment, add_key, start_server  # noqa: E402


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
