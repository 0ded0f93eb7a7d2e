"""A turn deleted over HTTP, MCP or the memory page takes along what quotes it, and each
front end names what went (#41 item 5).

A real ``memoryos serve --mcp`` whose segments are promoted at once: the offline LLM learns
facts and traits from the turns, one of which names the user's sister. Deleting that turn
through each front end must leave her name nowhere retrieval, the context for the LLM or an
export reach, and the answer lists the facts and traits that went with it.
"""

from __future__ import annotations

import asyncio
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from srvutil import Server, add_key, start_server
from waiting import wait_until

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration"))

from sysutil import turn_text  # noqa: E402

CONFIG = """\
log_level = "error"
summary_debounce_seconds = 0.01
persona_debounce_seconds = 0.0
heat_tick_seconds = 3600.0
promotion_threshold = 1.5
"""
SECRET = "quillonby"
TURNS = [
    ("I love hiking in the Dolomites with my sister Quillonby.", "The Dolomites are beautiful."),
    ("I love hiking near glacier lakes too.", "Lakes are lovely."),
    ("I work as a luthier repairing old violins.", "What a craft."),
]
CSRF = re.compile(r'name="csrf" value="([^"]+)"')


def _quoting(api: httpx.Client, user: str) -> set[str] | None:
    """Ids of the user's facts and traits that name the secret, once some do."""
    body = api.get(f"/v1/users/{user}/memories", params={"limit": 1000}).json()
    found = {f["memory_id"] for f in body["kb"] if SECRET in f["text"].casefold()}
    found |= {t["memory_id"] for t in body["traits"] if SECRET in t["evidence"].casefold()}
    return found or None


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, str, dict]]:
    """The server, a key of tenant acme, and per user (one per front end) the ids of what
    was learned from the turn naming the secret."""
    root = tmp_path_factory.mktemp("derived-http")
    (root / "config.toml").write_text(CONFIG, encoding="utf-8")
    keys = root / "keys.json"
    key = add_key(root, keys, "acme")
    server = start_server(root, root / "data", keys, "--mcp", "--rate", "1000", "--burst", "1000")
    learned: dict[str, set[str]] = {}
    try:
        with server.client(key) as api:
            for user in ("by-http", "by-mcp", "by-ui"):
                turns = TURNS + [turn_text(user, i) for i in range(10)]
                for q, r in turns:
                    sent = api.post(f"/v1/users/{user}/turns", json={"query": q, "response": r})
                    assert sent.status_code == 201, sent.text
                wait_until(lambda u=user: _quoting(api, u), f"{user}'s persona learned")
                learned[user] = _quoting(api, user) or set()
        yield server, key, learned
    finally:
        server.stop()


def _nowhere(api: httpx.Client, user: str, gone: set[str]) -> None:
    found = api.post(
        f"/v1/users/{user}/retrieve", json={"query": f"hiking with my sister {SECRET}"}
    )
    assert found.status_code == 200
    answer = {k: v for k, v in found.json().items() if k != "query"}  # the query says it
    assert SECRET not in repr(answer).casefold()
    assert SECRET not in answer["rendered"].casefold()  # the context for the LLM
    assert SECRET not in api.get(f"/v1/users/{user}/export").text.casefold()
    assert SECRET not in api.get(f"/v1/users/{user}/memories").text.casefold()
    for mid in gone:
        if mid.startswith("fact:"):
            assert api.get(f"/v1/users/{user}/memories/{mid}").status_code == 404
            events = api.get(f"/v1/users/{user}/memories/{mid}/history").json()["events"]
            assert [(e["action"], e["by"]) for e in events][-1] == (
                "deleted",
                "deletion of page:p1",
            )


def test_an_http_delete_names_what_went_with_the_turn(site: Any) -> None:
    server, key, learned = site
    with server.client(key) as api:
        r = api.delete("/v1/users/by-http/memories/page:p1")
        assert r.status_code == 200, r.text
        body = r.json()
        assert SECRET in body["old"].casefold()
        assert learned["by-http"] <= set(body["rewrote"])
        assert any(mid.startswith("segment:") for mid in body["rewrote"])
        _nowhere(api, "by-http", learned["by-http"])
        # The history's events carry no list: only the answer to the delete does.
        history = api.get("/v1/users/by-http/memories/page:p1/history").json()["events"]
        assert [(e["action"], e["rewrote"]) for e in history] == [("deleted", [])]


def test_an_mcp_delete_names_what_went_with_the_turn(site: Any) -> None:
    pytest.importorskip("mcp")
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    server, key, learned = site

    async def main() -> dict[str, Any]:
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=60.0)
        async with Client(streamable_http_client(f"{server.base_url}/mcp", http_client=http)) as c:
            result = await c.call_tool(
                "delete_memory", {"user_id": "by-mcp", "memory_id": "page:p1"}
            )
            assert not result.is_error, result.content
            return dict(result.structured_content or {})

    deleted = asyncio.run(main())
    assert deleted["deleted"] is True and learned["by-mcp"] <= set(deleted["rewrote"])
    with server.client(key) as api:
        _nowhere(api, "by-mcp", learned["by-mcp"])


def test_the_memory_pages_delete_says_what_went_with_the_turn(site: Any) -> None:
    server, key, learned = site
    with httpx.Client(base_url=server.base_url, follow_redirects=False, timeout=60.0) as c:
        form = c.get("/ui/login")
        r = c.post("/ui/login", data={"csrf": CSRF.search(form.text).group(1), "key": key})
        assert r.status_code == 303, r.text
        confirm = c.get("/ui/users/by-ui/memories/page:p1/delete")
        assert confirm.status_code == 200 and "What quotes it goes too" in confirm.text
        token = CSRF.search(confirm.text).group(1)
        r = c.post(
            "/ui/users/by-ui/memories/page:p1/delete",
            data={"csrf": token, "back": "overview"},
            headers={"Origin": server.base_url},
        )
        assert r.status_code == 303 and r.headers["location"] == "/ui/users/by-ui"
        page = c.get("/ui/users/by-ui").text
        said = re.search(r"Deleted page:p1; what quoted it went too: ([^<]*)\.", page)
        assert said is not None, page
        assert learned["by-ui"] <= set(said.group(1).split(", "))
        search = c.get("/ui/users/by-ui/search", params={"q": f"sister {SECRET}"}).text
        assert SECRET not in search.casefold().replace(f"sister {SECRET}", "")
    with server.client(key) as api:
        _nowhere(api, "by-ui", learned["by-ui"])
