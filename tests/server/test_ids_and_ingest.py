"""#46 item 6 at the front doors, on a real ``memoryos serve`` on 127.0.0.1.

One rule for ids: an id with ``/`` or a control character takes no memory at any door
(HTTP, MCP, the command line, the library), and the listings (``/v1/users``, MCP's
``list_users``, the memory page) show only users a URL can name, so a user stored under
such an id before the rule is not listed where no route could reach it; the command line
still exports it by its library id.

``memoryos ingest --server URL --key KEY`` stores a file's turns through the server's batch
route, each turn once (a second run stores nothing new), splitting a batch the server
finds too large; a refused turn is named by its line; a directory the server holds is
refused by a local ingest, naming the ``--server`` command.
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import pytest
from inprocess import Ran, run_cli
from srvutil import CONFIG_TOML, Server, add_live_key, start_server

from memoryos_actors import MemoryConfig, MemoryOS

CSRF = re.compile(r'name="csrf" value="([^"]+)"')


def _legacy_data(data: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A data directory with acme's ``team/ann`` (stored before the rule) and ``bob``."""
    import memoryos_actors.conversation as conversation

    mem = MemoryOS.open(data, MemoryConfig(log_level="error"))
    try:
        with monkeypatch.context() as patched:
            patched.setattr(
                conversation, "_check_new_id", lambda value, what="user_id": value, raising=False
            )
            mem.add_turn("acme:team/ann", "My cat Tofu sleeps on the radiator.", "Cosy.")
        mem.add_turn("acme:bob", "I collect stamps from Peru.", "Nice.")
    finally:
        mem.close()


def _cli(root: Path, data: Path, *args: str, stdin: str = "") -> Ran:
    config = ("--config", str(root / "config.toml"))
    return run_cli(*config, *args, data_dir=data, cwd=root, stdin=stdin)


@pytest.fixture(scope="module")
def served(
    tmp_path_factory: pytest.TempPathFactory,
) -> Any:
    root = tmp_path_factory.mktemp("ids")
    (root / "config.toml").write_text(CONFIG_TOML + "max_text_bytes = 2000\n", encoding="utf-8")
    data = root / "data"
    with pytest.MonkeyPatch.context() as monkeypatch:
        _legacy_data(data, monkeypatch)
    # A small body limit, so that an ingest's batches are split.
    server = start_server(root, data, root / "keys.json", "--mcp", "--max-body-bytes", "6000")
    try:
        yield server, root, add_live_key(server, root, "acme")
    finally:
        assert server.stop() == 0, server.log_text()


def test_http_lists_only_users_a_url_can_name_and_refuses_a_slash(served: Any) -> None:
    server, _root, key = served
    with server.client(key) as c:
        assert c.get("/v1/users").json()["users"] == ["bob"]
        for encoded in ("team%2Fann", "a%2fb"):
            r = c.post(f"/v1/users/{encoded}/turns", json={"query": "q", "response": "r"})
            assert r.status_code == 422, r.text
            assert r.json()["error"]["type"] == "InvalidInput"
            assert "must not contain '/'" in r.json()["error"]["message"]
        r = c.post("/v1/users/tab%09x/turns", json={"query": "q", "response": "r"})
        assert r.status_code == 422 and "control characters" in r.text
        r = c.post(
            "/v1/users/bob/turns", json={"query": "q", "response": "r", "assistant_id": "a/b"}
        )
        assert r.status_code == 422 and "assistant_id must not contain '/'" in r.text
        assert c.get("/v1/users").json()["users"] == ["bob"]  # nothing was created


def test_mcp_lists_the_same_users_and_refuses_the_same_ids(served: Any) -> None:
    pytest.importorskip("mcp")
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    server, _root, key = served

    async def main() -> tuple[Any, Any]:
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=60.0)
        async with Client(streamable_http_client(f"{server.base_url}/mcp", http_client=http)) as c:
            listed = await c.call_tool("list_users", {})
            added = await c.call_tool(
                "add_turn", {"user_id": "team/ann", "query": "q", "response": "r"}
            )
            return listed, added

    listed, added = asyncio.run(main())
    sc = listed.structured_content
    assert (sc.get("result", sc) if sc else json.loads(listed.content[0].text)) == ["bob"]
    assert added.is_error
    assert "must not contain '/'" in " ".join(getattr(x, "text", "") for x in added.content)


def test_the_memory_page_lists_the_same_users(served: Any) -> None:
    import httpx

    server, _root, key = served
    with httpx.Client(base_url=server.base_url, follow_redirects=True, timeout=60.0) as c:
        form = c.get("/ui/login")
        page = c.post("/ui/login", data={"csrf": CSRF.search(form.text).group(1), "key": key})
        assert page.status_code == 200 and "/ui/users/bob" in page.text
        assert "team" not in page.text


def test_the_command_line_refuses_new_slashed_ids_and_still_exports_an_old_one(
    served: Any, tmp_path: Path
) -> None:
    server, root, key = served
    turns = tmp_path / "slash.jsonl"
    turns.write_text(
        json.dumps({"user_id": "ok", "query": "q", "response": "r"})
        + "\n"
        + json.dumps({"user_id": "x/y", "query": "q", "response": "r"})
        + "\n",
        encoding="utf-8",
    )
    # Refused before anything is opened or sent, naming the line, with or without a tenant.
    for args in (
        ("--tenant", "acme", "ingest", str(turns)),
        ("ingest", str(turns)),
        ("ingest", str(turns), "--server", server.base_url, "--key", key),
    ):
        ran = _cli(root, server.data_dir, *args)
        assert ran.returncode == 2
        assert "slash.jsonl:2" in ran.stderr and "'/'" in ran.stderr, ran.stderr
    with server.client(key) as c:  # not even the line before it was stored
        assert c.get("/v1/users/ok/memories").status_code == 404
    # The old user, by its library id, through a read command (no lock: the server runs).
    out = _cli(root, server.data_dir, "export", "acme:team/ann", "-")
    assert out.returncode == 0, out.stderr
    assert "Tofu" in out.stdout


def _turns_file(path: Path, n: int, users: tuple[str, ...]) -> Path:
    with path.open("w", encoding="utf-8") as f:
        for i in range(n):
            user = users[i % len(users)]
            text = f"Turn {i} about hobby number {i} " + "words " * 60
            f.write(json.dumps({"user_id": user, "query": text, "response": "noted"}) + "\n")
    return path


def _turn_count(server: Server, key: str, user: str) -> int:
    with server.client(key) as c:
        r = c.get(f"/v1/users/{user}/memories")
        return int(r.json()["turns"]) if r.status_code == 200 else 0


def test_ingest_through_the_server_stores_each_turn_once(served: Any, tmp_path: Path) -> None:
    server, root, key = served
    users = ("ingest-a", "ingest zoë")
    turns = _turns_file(tmp_path / "turns.jsonl", 40, users)
    for run in range(2):
        ran = _cli(root, server.data_dir, "ingest", str(turns), "--server", server.base_url,
                   "--key", "-", stdin=key + "\n")  # fmt: skip
        assert ran.returncode == 0, ran.stderr
        assert "sent 40 turns for 2 users" in ran.stdout
        # 20 turns of ~400 bytes per user do not fit in 6000 bytes: batches were split.
        assert [_turn_count(server, key, u.replace(" ", "%20")) for u in users] == [20, 20], run


def test_a_locked_directory_names_the_server_route_and_a_refused_turn_names_its_line(
    served: Any, tmp_path: Path
) -> None:
    server, root, key = served
    small = _turns_file(tmp_path / "small.jsonl", 2, ("ingest-small",))
    local = _cli(root, server.data_dir, "ingest", str(small))
    assert local.returncode == 2
    assert f"memoryos ingest {small} --server {server.base_url} --key KEY" in local.stderr
    turns = tmp_path / "big.jsonl"
    lines = [
        {"user_id": "ingest-big", "query": "fits", "response": "ok"},
        {"user_id": "ingest-big", "query": "x" * 3000, "response": "too long for the server"},
    ]
    turns.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    remote = _cli(root, server.data_dir, "ingest", str(turns), "--server", server.base_url,
                  "--key", key)  # fmt: skip
    assert remote.returncode == 2
    line = remote.stderr.strip().splitlines()[-1]
    assert "big.jsonl:2: the server refused the turn (422)" in line, line
    assert "max_text_bytes" in line
    assert _turn_count(server, key, "ingest-big") == 1  # the turn before it is stored
    wrong = _cli(root, server.data_dir, "ingest", str(turns), "--server", server.base_url,
                 "--key", "not-a-key")  # fmt: skip
    assert wrong.returncode == 2 and "refused the key (401)" in wrong.stderr
    both = _cli(root, server.data_dir, "--tenant", "acme", "ingest", str(turns), "--server",
                server.base_url, "--key", key)  # fmt: skip
    assert both.returncode == 2 and "drop --tenant" in both.stderr
