"""The server over Ray shards while a shard restarts: ``/readyz`` says which shard is not
up (503 with ``Retry-After``), the other shard's users are served, the restarting shard's
users wait and then answer with everything they had, never a 404 or a 500.

A real ``memoryos serve --ray`` process joins the session's loopback Ray head (``ray_head``
in conftest.py, ``bench/_rayhead.py``: bound to 127.0.0.1, its own temporary directory,
its processes ended at the end). The restart is held open by the test: after the shard process is
SIGKILLed, the test takes the shard directory's lock before the new shard process does,
so the new one waits for it (as it waits for a predecessor still exiting) until the test
lets go.
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from srvutil import Server, add_key, start_server
from waiting import wait_until

pytest.importorskip("ray")

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from _doors import serve_has_shard_options  # noqa: E402
from _rayhead import RayHead  # noqa: E402

from memoryos_actors.cluster import rebalance_shards, shard_dir, shard_of  # noqa: E402
from memoryos_actors.errors import DataDirLocked  # noqa: E402
from memoryos_actors.server.tenancy import internal_id  # noqa: E402
from memoryos_actors.store.lock import DataDirLock  # noqa: E402

#: Seconds a shard may take to be killed, restarted, or to show in /readyz.
SHARD_WAIT_S = 60.0
USERS = [f"u{i}" for i in range(8)]


@pytest.fixture
def door(ray_head: RayHead, tmp_path: Path) -> Iterator[tuple[Server, str]]:
    data = tmp_path / "data"
    data.mkdir()
    rebalance_shards(data, 2)
    keys = tmp_path / "keys.json"
    key = add_key(tmp_path, keys, "acme")
    # Joins the head: by address where `serve` takes one, else through RAY_ADDRESS.
    ray_args = (
        ["--ray", ray_head.address, "--shards", "2"] if serve_has_shard_options() else ["--ray"]
    )
    server = start_server(tmp_path, data, keys, *ray_args, env=ray_head.env())
    try:
        yield server, key
    finally:
        # SIGINT: Ray's driver replaces the server's SIGTERM handler with its own exit.
        server.stop(signal.SIGINT)


def _shard_of(user: str) -> int:
    return shard_of(internal_id("acme", user), 2)


def _ready(c: httpx.Client) -> httpx.Response:
    return c.get("/readyz")


def _hold_restart(data: Path, shard: int, pid: int) -> DataDirLock:
    """SIGKILL shard process ``pid`` and take its directory's lock before its successor."""
    import os

    os.kill(pid, signal.SIGKILL)

    def locked() -> DataDirLock | None:
        try:
            return DataDirLock(shard_dir(data, shard))
        except DataDirLocked:
            return None

    return wait_until(locked, f"shard {shard}'s lock after its death", SHARD_WAIT_S, 0.002)


def test_a_restarting_shard_makes_the_door_unready_and_its_users_wait(
    door: tuple[Server, str],
) -> None:
    server, key = door
    with server.client(key) as c:
        for user in USERS:
            for i in range(2):
                r = c.post(
                    f"/v1/users/{user}/turns", json={"query": f"q{i} {user}", "response": "ok"}
                )
                assert r.status_code == 201, r.text
        ready = _ready(c)
        assert ready.status_code == 200, ready.text
        states = ready.json()["shards"]
        assert [s["state"] for s in states] == ["up", "up"]
        victim = _shard_of("u0")
        other_user = next(u for u in USERS if _shard_of(u) != victim)

        lock = _hold_restart(server.data_dir, victim, states[victim]["pid"])
        answers: list[httpx.Response] = []
        waiter: threading.Thread | None = None
        try:
            body = wait_until(
                lambda: (r := _ready(c)).status_code == 503 and r,
                "/readyz to report the restarting shard",
                SHARD_WAIT_S,
                0.05,
            )
            assert body.headers["Retry-After"] == "1"
            report: dict[str, Any] = body.json()
            assert report["status"] == "unavailable"
            assert report["shards"][victim]["state"] != "up"
            assert report["shards"][1 - victim]["state"] == "up"
            # The other shard's users are served meanwhile.
            r = c.get(f"/v1/users/{other_user}/memories")
            assert r.status_code == 200 and r.json()["turns"] == 2, r.text
            # A scrape answers without the memory system's metrics, rather than wait the
            # facade's minute of resending to the dead shard (the client gives up sooner).
            m = c.get("/metrics", timeout=SHARD_WAIT_S / 2)
            assert m.status_code == 200 and "memoryos_http_requests" in m.text, m.text[:500]

            def ask() -> None:
                answers.append(c.get("/v1/users/u0/memories"))

            waiter = threading.Thread(target=ask)
            waiter.start()
        finally:
            lock.close()  # the new shard process opens its directory now
            if waiter is not None:
                waiter.join(SHARD_WAIT_S * 2)
        assert answers, "the request for the restarting shard's user did not come back"
        got = answers[0]
        assert got.status_code == 200, got.text
        assert got.json()["turns"] == 2  # nothing lost
        back = wait_until(
            lambda: (r := _ready(c)).status_code == 200 and r,
            "/readyz to report every shard up again",
            SHARD_WAIT_S,
            0.05,
        )
        row = back.json()["shards"][victim]
        assert row["pid"] != states[victim]["pid"] and row["incarnation"] == 1
