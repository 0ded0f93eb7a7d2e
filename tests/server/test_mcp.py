"""The MCP server, driven by the official SDK's own client: over stdio (a subprocess) and
over streamable HTTP (``/mcp`` on the real HTTP server, behind the API keys)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from srvutil import Deployment, stdio_mcp_params

pytest.importorskip("mcp")

from mcp import Client  # noqa: E402

TOOLS = {
    "add_turn",
    "retrieve",
    "remember",
    "chat",
    "list_users",
    "list_memories",
    "delete_memory",
    "correct_memory",
    "forget_user",
}


def _data(result: Any) -> Any:
    assert not result.is_error, result.content
    if result.structured_content is not None:
        sc = result.structured_content
        return sc.get("result", sc) if set(sc) == {"result"} else sc
    return json.loads(result.content[0].text)


def _error_text(result: Any) -> str:
    assert result.is_error
    return " ".join(getattr(c, "text", "") for c in result.content)


async def _session(client: Client) -> None:
    names = {t.name for t in (await client.list_tools()).tools}
    assert TOOLS <= names
    added = _data(
        await client.call_tool(
            "add_turn",
            {
                "user_id": "ann",
                "query": "My cat is called Miso",
                "response": "Cute name!",
                "turn_key": "t-1",
            },
        )
    )
    assert added == {"user_id": "ann", "page_id": "p1"}
    again = _data(
        await client.call_tool(
            "add_turn",
            {
                "user_id": "ann",
                "query": "My cat is called Miso",
                "response": "Cute name!",
                "turn_key": "t-1",
            },
        )
    )
    assert again["page_id"] == "p1"
    ctx = _data(
        await client.call_tool("retrieve", {"user_id": "ann", "query": "what is my cat called?"})
    )
    assert "Miso" in ctx["context"] and ctx["page_ids"] == ["p1"]
    reply = _data(await client.call_tool("chat", {"user_id": "ann", "query": "hello"}))
    assert reply["reply"]
    mems = _data(await client.call_tool("list_memories", {"user_id": "ann"}))
    assert [p["page_id"] for p in mems["pages"]] == ["p1", "p2"] and mems["turns"] == 2
    assert mems["pages"][0]["memory_id"] == "page:p1"
    deleted = _data(
        await client.call_tool("delete_memory", {"user_id": "ann", "memory_id": "page:p1"})
    )
    assert deleted["deleted"] is True
    ctx = _data(
        await client.call_tool("retrieve", {"user_id": "ann", "query": "what is my cat called?"})
    )
    # (The chat reply, page p2, may quote p1: it is a memory of its own.)
    assert "p1" not in ctx["page_ids"] and "Cute name" not in ctx["context"].split(
        "Current conversation thread"
    )[0].replace(reply["reply"], "")
    mems = _data(await client.call_tool("list_memories", {"user_id": "ann"}))
    assert [p["page_id"] for p in mems["pages"]] == ["p2"]
    again = await client.call_tool("delete_memory", {"user_id": "ann", "memory_id": "page:p1"})
    assert "UnknownMemory" in _error_text(again)
    fixed = _data(
        await client.call_tool(
            "correct_memory",
            {"user_id": "ann", "memory_id": "trait:sense_of_humor", "value": "high"},
        )
    )
    assert fixed["new"] == "high"
    mems = _data(await client.call_tool("list_memories", {"user_id": "ann"}))
    assert {"memory_id": "trait:sense_of_humor", "level": "high", "evidence": ""} in mems["traits"]
    assert _data(await client.call_tool("list_users", {})) == ["ann"]
    noted = _data(
        await client.call_tool(
            "remember",
            {"user_id": "ann", "text": "Ann's cat Miso is allergic to fish.", "metadata": {"k": 1}},
        )
    )
    assert noted["user_id"] == "ann" and noted["memory_id"].startswith("fact:f")
    ctx = _data(await client.call_tool("retrieve", {"user_id": "ann", "query": "cat allergy?"}))
    assert "Ann's cat Miso is allergic to fish." in ctx["facts"]
    mems = _data(await client.call_tool("list_memories", {"user_id": "ann"}))
    (fact,) = [f for f in mems["facts"] if f["memory_id"] == noted["memory_id"]]
    assert (fact["origin"], fact["metadata"]) == ("remembered", {"k": 1})
    for bad_args in (
        {"user_id": "ann", "text": ""},
        {"user_id": "ann", "text": "x", "metadata": {"big": "y" * 5000}},
    ):
        assert "InvalidInput" in _error_text(await client.call_tool("remember", bad_args))
    missing = _data(await client.call_tool("retrieve", {"user_id": "nobody", "query": "x"}))
    assert missing["page_ids"] == [] and missing["facts"] == []  # empty, nothing written
    assert _data(await client.call_tool("list_users", {})) == ["ann"]
    for uid in ("a/b", ".", ".."):  # none of them could be named in a URL
        bad = await client.call_tool("add_turn", {"user_id": uid, "query": "x", "response": "y"})
        assert "InvalidInput" in _error_text(bad)
    gone = _data(await client.call_tool("forget_user", {"user_id": "ann"}))
    assert gone["removed_files"] > 0
    assert _data(await client.call_tool("list_users", {})) == []


def test_mcp_over_stdio_adds_retrieves_lists_and_forgets(tmp_path: Path) -> None:
    params = stdio_mcp_params(tmp_path)

    async def main() -> None:
        async with Client(params) as client:
            await _session(client)

    asyncio.run(main())
    # The stdio server's users live in the tenant's id space, like the HTTP server's.
    from memoryos_actors.store.userstore import list_users

    assert list_users(tmp_path / "data") == []


def _http_client(deployment: Deployment, key: str | None) -> Client:
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    headers = {"Authorization": f"Bearer {key}"} if key else {}
    http = httpx2.AsyncClient(headers=headers, timeout=60.0)
    return Client(streamable_http_client(f"{deployment.server.base_url}/mcp", http_client=http))


def test_mcp_over_http_serves_a_keys_tenant(deployment: Deployment) -> None:
    async def main() -> None:
        async with _http_client(deployment, deployment.globex) as client:
            # globex's "ann" is not acme's "ann" (acme's may exist from other tests)
            await _session(client)

    asyncio.run(main())


def test_mcp_over_http_never_shows_another_tenants_users(deployment: Deployment) -> None:
    with deployment.server.client(deployment.acme) as c:
        assert (
            c.post(
                "/v1/users/mcp-private/turns", json={"query": "acme secret plum", "response": "ok"}
            ).status_code
            == 201
        )

    async def main() -> None:
        async with _http_client(deployment, deployment.globex) as client:
            users = _data(await client.call_tool("list_users", {}))
            assert "mcp-private" not in users
            # Another tenant's user is, to globex, a user with no data: empty, not theirs.
            seen = _data(
                await client.call_tool("retrieve", {"user_id": "mcp-private", "query": "secret"})
            )
            assert "plum" not in str(seen) and seen["page_ids"] == []
            for tool, args in (
                ("list_memories", {}),
                ("delete_memory", {"memory_id": "page:p1"}),
                ("forget_user", {}),
            ):
                r = await client.call_tool(tool, {"user_id": "mcp-private", **args})
                assert "UnknownUser" in _error_text(r)

    asyncio.run(main())
    with deployment.server.client(deployment.acme) as c:
        assert "plum" in c.get("/v1/users/mcp-private/memories").text


def test_every_mcp_tool_refuses_an_argument_it_does_not_take(deployment: Deployment) -> None:
    async def main() -> None:
        async with _http_client(deployment, deployment.acme) as client:
            tools = (await client.list_tools()).tools
            assert TOOLS <= {t.name for t in tools}
            for tool in tools:
                assert tool.input_schema.get("additionalProperties") is False, tool.name
                r = await client.call_tool(tool.name, {"bogus_arg": 1})
                assert f"{tool.name} has no argument 'bogus_arg'" in _error_text(r), tool.name
            # A misspelt optional argument: refused, and the turn is not stored without it.
            r = await client.call_tool(
                "add_turn",
                {"user_id": "mcp-strict", "query": "q", "response": "r", "turnkey": "k-1"},
            )
            assert _error_text(r) == (
                "InvalidInput: add_turn has no argument 'turnkey' "
                "(it takes user_id, query, response, assistant_id, turn_key)"
            )
            r = await client.call_tool("list_memories", {"user_id": "mcp-strict"})
            assert "UnknownUser" in _error_text(r)

    asyncio.run(main())


def test_mcp_tool_descriptions_carry_no_docstring_indentation(deployment: Deployment) -> None:
    # tools/list showed each docstring's continuation lines indented by four spaces.
    async def main() -> None:
        async with _http_client(deployment, deployment.acme) as client:
            tools = (await client.list_tools()).tools
            assert TOOLS <= {t.name for t in tools}
            for tool in tools:
                text = tool.description or ""
                assert text and text == text.strip(), tool.name
                assert all(line == line.lstrip() for line in text.splitlines()), (tool.name, text)
            add_turn = next(t for t in tools if t.name == "add_turn")
            assert "in the user's\nmemory. Pass turn_key" in (add_turn.description or "")

    asyncio.run(main())


def test_mcp_over_http_without_a_key_gets_401(deployment: Deployment) -> None:
    import httpx

    r = httpx.post(
        f"{deployment.server.base_url}/mcp",
        json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
    )
    assert r.status_code == 401
