"""Several front doors over shared Ray shards (issue #28): two ``memoryos serve --ray
ADDRESS --shards 2`` processes over one data directory and one loopback Ray cluster that
every process of the test joins.

The cluster is the session's ``ray start --head`` bound to 127.0.0.1 (``ray_head`` in
conftest.py: Ray's processes live outside this test process, as a deployment's do;
``bench/_rayhead.py``, as the server bench starts it), stopped at the end of the session
by the pids of its own processes (``ray stop`` would stop every Ray of the machine, other
runs' too), with a check that none is left.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

pytest.importorskip("ray")

from inprocess import run_process  # noqa: E402
from srvutil import CONFIG_TOML, Server, add_key, add_live_key, start_server  # noqa: E402
from waiting import wait_until  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from _rayhead import RayHead  # noqa: E402

from memoryos_actors.cluster import live_doors, read_layout, shard_of  # noqa: E402
from memoryos_actors.server.tenancy import internal_id  # noqa: E402

_TENANT = "acme"
_USERS = [f"user-{n}" for n in range(6)]
_TURNS = 4


@dataclass
class LoopbackRay:
    """A Ray head on 127.0.0.1 that other processes join at ``address``."""

    address: str
    tmp: Path


@pytest.fixture(scope="module")
def loopback_ray(ray_head: RayHead) -> Iterator[LoopbackRay]:
    """The session's Ray head (``ray_head`` in conftest.py), its ``RAY_*`` environment
    set for every process this module's tests start."""
    mp = pytest.MonkeyPatch()
    try:
        for key, value in ray_head.env().items():
            if key.startswith("RAY_"):
                mp.setenv(key, value)  # inherited by every process the tests start
        yield LoopbackRay(ray_head.address, ray_head.tmp)
    finally:
        mp.undo()


def _memoryos(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return run_process(*args, cwd=cwd)


def _shard_pids(root: Path, data: Path, address: str) -> dict[int, int]:
    done = _memoryos("shards", "list", str(data), "--ray", address, cwd=root)
    assert done.returncode == 0, done.stderr
    pids = {}
    for line in done.stdout.splitlines():
        if line.startswith("shard "):
            head, rest = line.split(":", 1)
            pids[int(head.split()[1])] = int(rest.split()[1])
    return pids


def _door_shard_pids(client: httpx.Client) -> dict[int, int]:
    """Each shard's pid as a door's ``/readyz`` reports it (every shard up)."""
    r = client.get("/readyz")
    assert r.status_code == 200, r.text
    return {row["shard"]: row["pid"] for row in r.json()["shards"]}


def _pages(client: httpx.Client, user: str) -> list[str]:
    r = client.get(f"/v1/users/{user}/memories", params={"kind": "page", "limit": 500})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["next_cursor"] is None
    return sorted(p["query"] for p in body["pages"])


def _send_all(door: Server, key: str, acked: list[tuple[str, str]]) -> list[str]:
    """Every user's turns through ``door``, one writer thread per user; each
    acknowledged turn goes into ``acked``; the failures are returned."""
    failures: list[str] = []

    def writer(user: str) -> None:
        with door.client(key) as c:
            for n in range(_TURNS):
                body = {"query": f"q{n}", "response": f"r{n}", "turn_key": f"{user}-t{n}"}
                r = c.post(f"/v1/users/{user}/turns", json=body)
                if r.status_code == 201:
                    acked.append((user, f"q{n}"))
                else:
                    failures.append(f"{user} q{n}: {r.status_code} {r.text}")

    threads = [threading.Thread(target=writer, args=(u,)) for u in _USERS]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return failures


def test_two_front_doors_share_two_shards_through_faults(
    loopback_ray: LoopbackRay, tmp_path: Path
) -> None:
    root, data = tmp_path, tmp_path / "data"
    keys = root / "keys.json"
    extra = ("--ray", loopback_ray.address, "--shards", "2", "--skip-provider-check")
    (root / "config.toml").write_text(CONFIG_TOML, encoding="utf-8")  # before both start
    # Both doors start at once over the empty data directory, as two replicas would: they
    # agree on one layout and one set of shards (the first to ask starts each shard).
    with ThreadPoolExecutor(2) as pool:
        starts = [pool.submit(start_server, root, data, keys, *extra) for _ in range(2)]
    doors = [f.result() for f in starts if f.exception() is None]
    try:
        assert len(doors) == 2, [f.exception() for f in starts]
        key = add_live_key(doors[0], root, _TENANT)
        with doors[1].client(key) as c:
            wait_until(lambda: c.get("/v1/users").status_code == 200, "door 2 to take the key")
        assert live_doors(data) == 2
        with doors[0].client(key) as c0, doors[1].client(key) as c1:
            assert _door_shard_pids(c0) == _door_shard_pids(c1)  # the same two processes

        # A key's limit is shared by the live doors: burst 4 over 2 doors is 2 at each.
        limited = add_key(root, keys, _TENANT, "--rate", "0.01", "--burst", "4")
        for door in doors:
            with door.client(limited) as c:
                first = wait_until(
                    lambda c=c: (r := c.get("/v1/users")).status_code != 401 and r,
                    "the door to take the limited key",
                )
                assert first.status_code == 200, first.text
                codes = [c.get("/v1/users").status_code for _ in range(2)]
                assert codes == [200, 429], (door.base_url, codes)

        # Both doors at once, every turn to both with the same turn_key.
        acked: list[tuple[str, str]] = []
        results: list[list[str]] = [[], []]
        senders = [
            threading.Thread(target=lambda i=i, d=d: results[i].extend(_send_all(d, key, acked)))
            for i, d in enumerate(doors)
        ]
        for t in senders:
            t.start()
        for t in senders:
            t.join()
        assert results == [[], []]
        assert len(acked) == 2 * len(_USERS) * _TURNS
        expected = sorted(f"q{n}" for n in range(_TURNS))
        for door in doors:
            with door.client(key) as c:
                for user in _USERS:
                    assert _pages(c, user) == expected, (door.base_url, user)

        # SIGKILL one door: the other keeps serving, and the dead one is not counted.
        assert doors[1].stop(signal.SIGKILL) == -signal.SIGKILL
        assert live_doors(data) == 1
        with doors[0].client(key) as c:
            r = c.post("/v1/users/user-0/turns", json={"query": "after-door", "response": "r"})
            assert r.status_code == 201, r.text

        # SIGKILL one shard process: its users answer again after Ray restarts it.
        with doors[0].client(key) as c:
            pids = _door_shard_pids(c)
        assert sorted(pids) == [0, 1]
        on_zero = [u for u in _USERS if shard_of(internal_id(_TENANT, u), 2) == 0]
        assert on_zero, "some user lives on shard 0"
        os.kill(pids[0], signal.SIGKILL)
        with doors[0].client(key) as c:
            for user in on_zero:
                r = c.post(
                    f"/v1/users/{user}/turns", json={"query": "after-shard", "response": "r"}
                )
                assert r.status_code == 201, r.text
            for user in _USERS:
                got = _pages(c, user)
                want = (
                    expected
                    + ["after-shard"] * (user in on_zero)
                    + ["after-door"] * (user == "user-0")
                )
                assert got == sorted(want), user
            restarted = _door_shard_pids(c)
        assert restarted[0] != pids[0] and restarted[1] == pids[1]

        # A rebalance while a door runs is refused, naming the door; nothing changed.
        done = _memoryos("--data-dir", str(data), "rebalance", "--shards", "3", cwd=root)
        assert done.returncode == 2, done.stdout + done.stderr
        assert "1 front door" in done.stderr and doors[0].base_url in done.stderr
        layout = read_layout(data)
        assert layout is not None and (layout.shards, layout.generation) == (2, 1)
        # So is stopping the shards under a running door.
        done = _memoryos("shards", "stop", str(data), "--ray", loopback_ray.address, cwd=root)
        assert done.returncode == 2 and "front door" in done.stderr, done.stderr
    finally:
        for door in doors:
            door.stop()
    assert doors[0].proc.returncode == 0, doors[0].log_text()
    assert live_doors(data) == 0

    # The shards outlive their doors until `memoryos shards stop` closes them.
    assert sorted(_shard_pids(root, data, loopback_ray.address)) == [0, 1]
    done = _memoryos("shards", "stop", str(data), "--ray", loopback_ray.address, cwd=root)
    assert done.returncode == 0, done.stderr
    assert "stopped 2 shards" in done.stdout
    assert _shard_pids(root, data, loopback_ray.address) == {}
    # With every door and shard gone, the rebalance goes through, to generation 2.
    done = _memoryos("--data-dir", str(data), "rebalance", "--shards", "3", cwd=root)
    assert done.returncode == 0, done.stderr
    layout = read_layout(data)
    assert layout is not None and (layout.shards, layout.generation) == (3, 2)


def test_serve_refuses_another_shard_count_naming_rebalance(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (tmp_path / "config.toml").write_text('log_level = "error"\n')
    first = _memoryos("--data-dir", str(data), "rebalance", "--shards", "2", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    done = _memoryos(
        "--data-dir",
        str(data),
        "--config",
        str(tmp_path / "config.toml"),
        "serve",
        "--port",
        "0",
        "--shards",
        "3",
        "--skip-provider-check",
        cwd=tmp_path,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert "holds 2 shards, not 3" in done.stderr
    assert "memoryos rebalance --shards 3" in done.stderr
    assert json.loads((data / "shards.json").read_text())["shards"] == 2
