"""``memoryos serve`` over a sharded data directory with its shards in the server's process:
``/readyz`` lists the shards, a user stored before a restart of the server is found again
(users live in their shard's directory, not in the top one), and a server that sees a
rebalance it did not make stops routing.

One test: the restarted server is also the one whose layout changes (a third server start,
a Python process and its imports, would check nothing more)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx
from srvutil import add_key, start_server
from waiting import wait_until

from memoryos_actors.cluster import read_layout, rebalance_shards, shard_of
from memoryos_actors.cluster._placement import ShardLayout, write_layout
from memoryos_actors.server.tenancy import internal_id

USERS = [f"user-{i}" for i in range(6)]


async def _mcp_turns(base_url: str, key: str, user: str) -> int:
    """The turns of ``user`` as the MCP tool ``list_memories`` over HTTP tells them."""
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=60.0)
    async with Client(streamable_http_client(f"{base_url}/mcp", http_client=http)) as client:
        result = await client.call_tool("list_memories", {"user_id": user})
    assert not result.is_error, result.content
    return int(json.loads(result.content[0].text)["turns"])


def test_a_sharded_server_finds_its_users_after_a_restart_and_stops_on_a_new_layout(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    data.mkdir()
    rebalance_shards(data, 2)
    assert {shard_of(internal_id("acme", u), 2) for u in USERS} == {0, 1}
    keys = tmp_path / "keys.json"
    key = add_key(tmp_path, keys, "acme")

    server = start_server(tmp_path, data, keys, "--mcp")
    try:
        with server.client(key) as c:
            for user in USERS:
                for i in range(2):
                    r = c.post(f"/v1/users/{user}/turns", json={"query": f"q{i}", "response": "a"})
                    assert r.status_code == 201, r.text
            ready = c.get("/readyz")
            assert ready.status_code == 200, ready.text
            rows = ready.json()["shards"]
            assert [(row["shard"], row["state"]) for row in rows] == [(0, "up"), (1, "up")]
            assert {row["pid"] for row in rows} == {server.proc.pid}  # shards in its process
    finally:
        assert server.stop() == 0

    server = start_server(tmp_path, data, keys, "--mcp")
    try:
        with server.client(key) as c:
            for user in USERS:
                r = c.get(f"/v1/users/{user}/memories")
                assert r.status_code == 200, (user, r.text)
                assert r.json()["turns"] == 2
            r = c.post("/v1/users/user-0/retrieve", json={"query": "q1"})
            assert r.status_code == 200 and r.json()["stm"], r.text
            assert c.get("/v1/users/nobody/memories").status_code == 404
        assert asyncio.run(_mcp_turns(server.base_url, key, "user-1")) == 2
        with server.client(key) as c:
            _a_new_layout_makes_the_server_unready_and_route_nothing(c, data)
    finally:
        assert server.stop() == 0


def _a_new_layout_makes_the_server_unready_and_route_nothing(c: httpx.Client, data: Path) -> None:
    """A rebalance this server's locks do not see (run from another machine) leaves the
    next generation in shards.json: /readyz turns 503 and memory calls answer 503."""
    assert c.get("/readyz").status_code == 200
    old = read_layout(data)
    assert old is not None
    write_layout(data, ShardLayout(3, generation=old.generation + 1, cluster_id=old.cluster_id))

    def unready() -> bool:
        return bool(c.get("/readyz").status_code == 503)

    wait_until(unready, "readiness to see the new generation", timeout=30.0)
    body = c.get("/readyz").json()
    assert body["status"] == "layout_changed" and "restart" in body["message"]
    r = c.post("/v1/users/user-0/retrieve", json={"query": "q"})
    assert r.status_code == 503 and r.headers["Retry-After"], r.text
    assert r.json()["error"]["type"] == "LayoutChanged"
    write_layout(data, old)  # the server closes its shards as it found them
