"""Listings come in pages, over HTTP and MCP: ``limit``, an opaque ``cursor`` (the previous
page's ``next_cursor``) and ``kind``, with an order that paging while turns are added
neither skips nor repeats. A real ``memoryos serve --mcp`` on 127.0.0.1 with small tiers,
so a user's pages spread over STM, MTM and the archive."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from srvutil import Server, add_key, start_server
from waiting import wait_until

CONFIG = """\
log_level = "error"
summary_debounce_seconds = 0.01
heat_tick_seconds = 3600.0
mtm_capacity = 3
segment_max_pages = 4
"""
WORDS = [
    "granite",
    "sourdough",
    "cello",
    "porto",
    "juggle",
    "tomato",
    "kitchen",
    "chess",
    "lighthouse",
    "bicycle",
    "meteor",
    "pottery",
    "coins",
    "bees",
    "lavender",
]


class Site:
    """The server and three keys: ``key`` for most tests, ``few_users`` for a tenant whose
    users one test creates (all of them), ``rival`` for another tenant with users of the
    same names."""

    def __init__(self, server: Server, key: str, few_users: str, rival: str) -> None:
        self.server, self.key, self.few_users, self.rival = server, key, few_users, rival

    def client(self) -> httpx.Client:
        return self.server.client(self.key)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    root = tmp_path_factory.mktemp("paging")
    (root / "config.toml").write_text(CONFIG, encoding="utf-8")
    keys = root / "keys.json"
    key = add_key(root, keys, "pager")
    few_users = add_key(root, keys, "few-users")
    rival = add_key(root, keys, "rival")
    server = start_server(root, root / "data", keys, "--mcp", "--rate", "1000", "--burst", "1000")
    try:
        yield Site(server, key, few_users, rival)
    finally:
        server.stop()


def _add(c: httpx.Client, user: str, first: int, n: int) -> None:
    for i in range(first, first + n):
        word = WORDS[i % len(WORDS)]
        r = c.post(
            f"/v1/users/{user}/turns",
            json={
                "query": f"Turn {i}: today was about {word} and more {word}.",
                "response": f"Noted {i}.",
                "timestamp": 1_700_000_000.0 + i * 3600.0,
            },
        )
        assert r.status_code == 201, r.text


def _ids(body: dict[str, Any]) -> list[str]:
    """Every memory id in one answer of GET .../memories."""
    ids = [p["memory_id"] for p in body["pages"]]
    ids += [s["memory_id"] for s in body["segments"]]
    ids += [f["memory_id"] for f in body["kb"]]
    ids += [t["memory_id"] for a in body["agents"].values() for t in a["traits"]]
    ids += [t["memory_id"] for t in body["traits"]]
    return ids


def _walk(c: httpx.Client, url: str, limit: int, between: Any = None) -> list[list[str]]:
    """The ids of every page of ``url`` with ``limit``, calling ``between()`` after each."""
    pages: list[list[str]] = []
    cursor = None
    while True:
        params: dict[str, Any] = {"limit": limit}
        if cursor is not None:
            params["cursor"] = cursor
        r = c.get(url, params=params)
        assert r.status_code == 200, r.text
        body = r.json()
        pages.append(_ids(body))
        assert len(pages[-1]) <= limit, f"limit {limit} ignored: {len(pages[-1])} items"
        cursor = body["next_cursor"]
        if cursor is None:
            return pages
        assert len(pages) < 100, "paging does not end"
        if between is not None:
            between()


def test_limit_is_honoured_and_the_cursor_walks_every_memory_once(site: Site) -> None:
    with site.client() as c:
        _add(c, "walker", 1, 30)

        def spread() -> dict[str, Any] | None:
            """The whole listing once pages are in all three places (placing pages that
            left STM happens in the background)."""
            body = c.get("/v1/users/walker/memories", params={"limit": 1000}).json()
            places = {p["location"] for p in body["pages"]}
            return body if places == {"stm", "mtm", "archive"} else None

        everything = wait_until(spread, "pages in both MTM and the archive", timeout=60.0)
        assert everything["next_cursor"] is None
        assert len(everything["pages"]) == 30
        full = _ids(everything)
        pages = _walk(c, "/v1/users/walker/memories", 7)
    assert len(pages) >= 5
    assert [i for page in pages for i in page] == full
    # Pages oldest first by sequence number, whichever tier each one is in now.
    seqs = [int(i.split(":p")[1]) for i in full if i.startswith("page:")]
    assert seqs == list(range(1, 31))


def test_paging_while_turns_are_added_neither_skips_nor_repeats(site: Site) -> None:
    with site.client() as c:
        _add(c, "grower", 1, 20)
        before = _ids(c.get("/v1/users/grower/memories", params={"limit": 1000}).json())
        added = [21]

        def more_turns() -> None:  # moves older pages from STM to MTM to the archive
            _add(c, "grower", added[0], 3)
            added[0] += 3

        seen = [i for page in _walk(c, "/v1/users/grower/memories", 5, more_turns) for i in page]
        assert added[0] > 30
    repeated = sorted({i for i in seen if seen.count(i) > 1})
    assert repeated == []
    assert sorted(set(before) - set(seen)) == []


def test_kind_filters_the_listing(site: Site) -> None:
    with site.client() as c:
        _add(c, "kinds", 1, 16)
        pages = c.get("/v1/users/kinds/memories", params={"kind": "page"}).json()
        assert len(pages["pages"]) == 16 and pages["segments"] == [] and pages["kb"] == []

        # Segments appear once pages that left STM are placed (in the background).
        def with_segments() -> dict[str, Any] | None:
            body = c.get("/v1/users/kinds/memories?kind=segment&kind=trait").json()
            return body if body["segments"] else None

        other = wait_until(with_segments, "a segment to be listed", timeout=60.0)
        assert other["pages"] == []
        # (Compared by id: a segment's summary and heat may change in between.)
        assert _ids(
            c.get("/v1/users/kinds/memories", params={"kind": "segment,trait"}).json()
        ) == _ids(other)


def test_bad_cursor_limit_or_kind_is_a_422(site: Site) -> None:
    with site.client() as c:
        _add(c, "strict", 1, 3)
        users_cursor = None
        for n in range(3):
            _add(c, f"strict-{n}", 1, 1)
        users_cursor = c.get("/v1/users", params={"limit": 1}).json()["next_cursor"]
        assert users_cursor
        good = c.get("/v1/users/strict/memories", params={"limit": 1}).json()["next_cursor"]
        for params in (
            {"cursor": "not-a-cursor"},
            {"cursor": users_cursor},
            {"cursor": good[:-3]},
            {"limit": 0},
            {"limit": 100_000},
            {"limit": "ten"},
            {"kind": "pages"},
        ):
            r = c.get("/v1/users/strict/memories", params=params)
            assert r.status_code == 422, (params, r.status_code, r.text)
            assert r.json()["error"]["type"] == "InvalidInput"
        assert c.get("/v1/users", params={"cursor": good}).status_code == 422


def test_a_cursor_from_another_tenants_listing_is_refused(site: Site) -> None:
    with site.client() as mine, site.server.client(site.rival) as theirs:
        for c in (mine, theirs):
            _add(c, "twin", 1, 3)
            _add(c, "twin-2", 1, 1)
            for level in ("low", "high"):
                r = c.patch("/v1/users/twin/memories/trait:sense_of_humor", json={"value": level})
                assert r.status_code == 200, r.text
        history = "/v1/users/twin/memories/trait:sense_of_humor/history"
        for url in ("/v1/users", "/v1/users/twin/memories", history):
            cursor = mine.get(url, params={"limit": 1}).json()["next_cursor"]
            assert cursor, url
            assert mine.get(url, params={"limit": 1, "cursor": cursor}).status_code == 200
            r = theirs.get(url, params={"limit": 1, "cursor": cursor})
            assert r.status_code == 422, (url, r.status_code, r.text)
            error = r.json()["error"]
            assert error["type"] == "InvalidInput"
            assert "comes from another tenant's listing" in error["message"], error


def test_users_are_listed_in_pages(site: Site) -> None:
    with site.server.client(site.few_users) as c:
        names = ["u-e", "u-a", "u-d", "u-c", "u-b"]
        for name in names:
            _add(c, name, 1, 1)
        got: list[str] = []
        cursor = None
        for _ in range(3):
            body = c.get(
                "/v1/users", params={"limit": 2, **({"cursor": cursor} if cursor else {})}
            ).json()
            assert len(body["users"]) <= 2
            got += body["users"]
            cursor = body["next_cursor"]
        assert cursor is None and got == sorted(names)


def test_a_memory_history_is_listed_in_pages(site: Site) -> None:
    with site.client() as c:
        _add(c, "history", 1, 1)
        for level in ("low", "medium", "high"):
            assert (
                c.patch(
                    "/v1/users/history/memories/trait:sense_of_humor", json={"value": level}
                ).status_code
                == 200
            )
        url = "/v1/users/history/memories/trait:sense_of_humor/history"
        first = c.get(url, params={"limit": 2}).json()
        assert [e["new"] for e in first["events"]] == ["low", "medium"]
        rest = c.get(url, params={"limit": 2, "cursor": first["next_cursor"]}).json()
        assert [e["new"] for e in rest["events"]] == ["high"] and rest["next_cursor"] is None


# -- MCP ----------------------------------------------------------------------------------------


def _mcp_data(result: Any) -> Any:
    assert not result.is_error, result.content
    if result.structured_content is not None:
        return result.structured_content
    return json.loads(result.content[0].text)


def test_mcp_list_memories_is_paged_with_limit_cursor_and_kind(site: Site) -> None:
    pytest.importorskip("mcp")
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    with site.client() as c:
        _add(c, "mcp-pager", 1, 12)
    with site.server.client(site.rival) as c:
        _add(c, "mcp-pager", 1, 2)
        rivals = c.get("/v1/users/mcp-pager/memories", params={"limit": 1}).json()

    async def main() -> None:
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {site.key}"}, timeout=60.0)
        async with Client(
            streamable_http_client(f"{site.server.base_url}/mcp", http_client=http)
        ) as client:

            async def call(**args: Any) -> Any:
                return await client.call_tool("list_memories", {"user_id": "mcp-pager", **args})

            full = _mcp_data(await call(limit=1000))
            assert full["next_cursor"] is None and len(full["pages"]) == 12
            ids = (
                [p["memory_id"] for p in full["pages"]]
                + [f["memory_id"] for f in full["facts"]]
                + [t["memory_id"] for t in full["traits"]]
            )
            walked: list[str] = []
            cursor = None
            while True:
                body = _mcp_data(await call(limit=5, **({"cursor": cursor} if cursor else {})))
                shown = body["pages"] + body["facts"] + body["traits"]
                assert len(shown) <= 5
                walked += [x["memory_id"] for x in shown]
                cursor = body["next_cursor"]
                if cursor is None:
                    break
            assert walked == ids
            only = _mcp_data(await call(kind="page", limit=3))
            assert [p["page_id"] for p in only["pages"]] == ["p1", "p2", "p3"]
            bad = await call(cursor="nonsense")
            assert bad.is_error and "InvalidInput" in " ".join(
                getattr(x, "text", "") for x in bad.content
            )
            theirs = await call(cursor=rivals["next_cursor"])
            assert theirs.is_error and "another tenant's listing" in " ".join(
                getattr(x, "text", "") for x in theirs.content
            )

    asyncio.run(main())
