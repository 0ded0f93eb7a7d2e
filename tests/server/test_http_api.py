"""The HTTP API end to end: a real server process on 127.0.0.1, a real HTTP client."""

from __future__ import annotations

import json
import signal
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest
from srvutil import Deployment, add_key, add_live_key, start_server
from waiting import wait_until


def _turn(
    c: httpx.Client, user: str, query: str, response: str = "noted", **extra: object
) -> httpx.Response:
    return c.post(
        f"/v1/users/{quote(user, safe='')}/turns",
        json={"query": query, "response": response, **extra},
    )


# -- routes -------------------------------------------------------------------------------------


def test_add_turn_then_retrieve_returns_the_turn_with_provenance(deployment: Deployment) -> None:
    with deployment.server.client(deployment.acme) as c:
        r = _turn(c, "ann", "I adopted a beagle called Rufus", "Congratulations on Rufus!")
        assert r.status_code == 201, r.text
        page_id = r.json()["page_id"]
        assert r.json() == {"user_id": "ann", "page_id": page_id}
        r = c.post("/v1/users/ann/retrieve", json={"query": "What is my dog called?"})
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["user_id"] == "ann" and body["assistant_id"] == "default"
        assert page_id in [i["item_id"] for i in body["stm"]]
        assert all(i["tier"] == "stm" for i in body["stm"])
        assert "Rufus" in body["rendered"]
        assert "acme" not in json.dumps(body)  # the tenant prefix never shows


def test_add_turn_with_the_same_turn_key_is_stored_once(deployment: Deployment) -> None:
    with deployment.server.client(deployment.acme) as c:
        first = _turn(c, "kim", "my bike is red", turn_key="retry-1").json()["page_id"]
        again = _turn(c, "kim", "my bike is red", turn_key="retry-1").json()["page_id"]
        assert first == again
        pages = c.get("/v1/users/kim/memories").json()["pages"]
        assert [p["page_id"] for p in pages] == [first]


def test_retrieve_top_k_bounds_every_section(deployment: Deployment) -> None:
    with deployment.server.client(deployment.acme) as c:
        for n in range(5):
            assert _turn(c, "tk", f"fact number {n} about tea").status_code == 201
        body = c.post("/v1/users/tk/retrieve", json={"query": "tea", "top_k": 2}).json()
        assert len(body["stm"]) == 2
        assert all(len(body[s]) <= 2 for s in ("mtm", "segments", "kb", "agent_traits"))


def test_chat_replies_and_stores_the_turn(deployment: Deployment) -> None:
    with deployment.server.client(deployment.acme) as c:
        r = c.post("/v1/users/cat/chat", json={"query": "I love sailing on the lake"})
        assert r.status_code == 200, r.text
        reply = r.json()["reply"]
        assert isinstance(reply, str) and reply
        pages = c.get("/v1/users/cat/memories").json()["pages"]
        assert [(p["query"], p["response"]) for p in pages] == [
            ("I love sailing on the lake", reply)
        ]


def test_user_profile_put_then_get_round_trips(deployment: Deployment) -> None:
    profile = {"name": "Dora", "gender": None, "birth_year": 1990, "extras": {"city": "Oslo"}}
    with deployment.server.client(deployment.acme) as c:
        r = c.put("/v1/users/dora/profile", json=profile)
        assert r.status_code == 200, r.text
        assert c.get("/v1/users/dora/profile").json() == profile
        ctx = c.post("/v1/users/dora/retrieve", json={"query": "who am I"}).json()
        assert ctx["profile"]["name"] == "Dora"


def test_agent_profile_put_then_get_round_trips(deployment: Deployment) -> None:
    persona = {"role": "travel planner", "character": "calm", "extras": {}}
    with deployment.server.client(deployment.acme) as c:
        r = c.put("/v1/users/eve/agents/planner/profile", json=persona)
        assert r.status_code == 200, r.text
        assert c.get("/v1/users/eve/agents/planner/profile").json() == persona
        ctx = c.post(
            "/v1/users/eve/retrieve", json={"query": "trip", "assistant_id": "planner"}
        ).json()
        assert ctx["agent_profile"]["role"] == "travel planner"
        assert "planner" in c.get("/v1/users/eve/memories").json()["agents"]


def test_list_users_shows_only_the_tenants_users(deployment: Deployment) -> None:
    with deployment.server.client(deployment.acme) as a:  # its own user: runs alone too
        assert _turn(a, "ann", "hello from acme").status_code == 201
    with deployment.server.client(deployment.globex) as g:
        assert _turn(g, "gina", "hello from globex").status_code == 201
        users = g.get("/v1/users").json()["users"]
    assert "gina" in users and "ann" not in users
    with deployment.server.client(deployment.acme2) as c:  # another key, same tenant
        users = c.get("/v1/users").json()["users"]
    assert "gina" not in users and "ann" in users


def test_memories_lists_every_page_with_its_location(deployment: Deployment) -> None:
    with deployment.server.client(deployment.acme) as c:
        ids = [_turn(c, "mem", f"turn {n} about gardens").json()["page_id"] for n in range(9)]
        body = c.get("/v1/users/mem/memories").json()
    assert body["turns"] == 9
    listed = {p["page_id"]: p["location"] for p in body["pages"]}
    assert sorted(listed) == sorted(ids)  # every turn exactly once, wherever it is
    assert set(listed.values()) <= {"stm", "mtm", "archive"}


def test_export_returns_the_users_data_under_the_tenants_id(deployment: Deployment) -> None:
    with deployment.server.client(deployment.acme) as c:
        _turn(c, "exp", "my passport number ends in 42")
        r = c.get("/v1/users/exp/export")
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["format"] == "memoryos-export"  # the file `memoryos import` reads
    assert body["payload"]["format"] == "memoryos-actors/user-export"
    assert body["payload"]["user_id"] == "exp"
    assert "passport" in json.dumps(body)
    assert f"{deployment.acme_tenant}:exp" not in json.dumps(body)


def test_delete_user_forgets_it_and_later_calls_get_404(deployment: Deployment) -> None:
    with deployment.server.client(deployment.acme) as c:
        _turn(c, "gone", "my secret is pineapple")
        r = c.delete("/v1/users/gone")
        assert r.status_code == 200, r.text
        assert r.json()["removed_files"] > 0
        empty = c.post("/v1/users/gone/retrieve", json={"query": "secret"})  # nothing left
        assert empty.status_code == 200, empty.text
        assert "pineapple" not in empty.text and empty.json()["stm"] == []
        assert c.get("/v1/users/gone/memories").status_code == 404
        assert "gone" not in c.get("/v1/users").json()["users"]


def test_one_memory_can_be_read_deleted_corrected_and_its_history_read(
    deployment: Deployment,
) -> None:
    with deployment.server.client(deployment.acme) as c:
        assert _turn(c, "solo", "My locker code is walnut").status_code == 201
        assert _turn(c, "solo", "I like tea").status_code == 201
        listing = c.get("/v1/users/solo/memories").json()
        assert [p["memory_id"] for p in listing["pages"]] == ["page:p1", "page:p2"]
        one = c.get("/v1/users/solo/memories/page:p1")
        assert one.status_code == 200
        assert one.json()["kind"] == "page" and "walnut" in one.json()["text"]
        gone = c.delete("/v1/users/solo/memories/page:p1")
        assert gone.status_code == 200 and gone.json()["action"] == "deleted"
        assert c.get("/v1/users/solo/memories/page:p1").status_code == 404
        assert c.delete("/v1/users/solo/memories/page:p1").status_code == 404
        found = c.post("/v1/users/solo/retrieve", json={"query": "what is my locker code"})
        assert "walnut" not in found.text
        assert "walnut" not in c.get("/v1/users/solo/export").text
        fixed = c.patch(
            "/v1/users/solo/memories/trait:sense_of_humor",
            json={"value": "medium", "evidence": "dry jokes"},
        )
        assert fixed.status_code == 200 and fixed.json()["new"] == "medium"
        history = c.get("/v1/users/solo/memories/trait:sense_of_humor/history").json()
        assert [(e["action"], e["new"]) for e in history["events"]] == [("corrected", "medium")]
        assert [
            e["action"] for e in c.get("/v1/users/solo/memories/page:p1/history").json()["events"]
        ] == ["deleted"]
        # Pages cannot be corrected; bad ids and levels are refused.
        assert c.patch("/v1/users/solo/memories/page:p2", json={"value": "x"}).status_code == 422
        assert (
            c.patch(
                "/v1/users/solo/memories/trait:sense_of_humor", json={"value": "enormous"}
            ).status_code
            == 422
        )
        assert c.get("/v1/users/solo/memories/nonsense").status_code == 422
        assert (
            c.patch("/v1/users/solo/memories/fact:f1", json={"value": "x", "extra": 1}).status_code
            == 422
        )
    with deployment.server.client(deployment.globex) as g:  # another tenant: 404
        assert g.get("/v1/users/solo/memories/page:p2").status_code == 404
        assert g.delete("/v1/users/solo/memories/page:p2").status_code == 404
    with deployment.server.client(deployment.acme) as c:
        assert c.get("/v1/users/solo/memories/page:p2").status_code == 200


def test_health_readiness_and_openapi_need_no_key(deployment: Deployment) -> None:
    with deployment.server.client() as c:
        assert c.get("/healthz").json() == {"status": "ok"}
        assert c.get("/readyz").json()["status"] == "ok"
        spec = c.get("/openapi.json").json()
        assert c.get("/docs").status_code == 200
    paths = spec["paths"]
    for path, method in [
        ("/v1/users/{user_id}/turns", "post"),
        ("/v1/users/{user_id}/retrieve", "post"),
        ("/v1/users/{user_id}/chat", "post"),
        ("/v1/users/{user_id}/memories", "get"),
        ("/v1/users/{user_id}/memories", "post"),
        ("/v1/users/{user_id}/memories/{memory_id}", "get"),
        ("/v1/users/{user_id}/memories/{memory_id}", "delete"),
        ("/v1/users/{user_id}/memories/{memory_id}", "patch"),
        ("/v1/users/{user_id}/memories/{memory_id}/history", "get"),
        ("/v1/users/{user_id}/profile", "put"),
        ("/v1/users/{user_id}/agents/{assistant_id}/profile", "put"),
        ("/v1/users/{user_id}/export", "get"),
        ("/v1/users/{user_id}", "delete"),
        ("/v1/users", "get"),
        ("/healthz", "get"),
        ("/readyz", "get"),
        ("/metrics", "get"),
    ]:
        op = paths[path][method]
        assert op.get("summary"), (path, method)
        assert "200" in op["responses"] or "201" in op["responses"]
    assert "401" in paths["/v1/users/{user_id}/turns"]["post"]["responses"]
    remember = paths["/v1/users/{user_id}/memories"]["post"]
    assert "201" in remember["responses"] and "422" in remember["responses"]
    assert "metadata" in json.dumps(spec["components"]["schemas"]["RememberRequest"])


def test_metrics_follow_prometheus_naming_and_carry_no_user_labels(
    deployment: Deployment,
) -> None:
    with deployment.server.client(deployment.acme) as c:
        _turn(c, "metric-user-xyz", "hello")
        text = c.get("/metrics").text
    assert "memoryos_http_requests_total{" in text
    assert 'route="/v1/users/{user_id}/turns"' in text
    assert "memoryos_turns_total" in text and "memoryos_active_users" in text
    assert "memoryos_http_request_duration_seconds_bucket" in text
    assert "metric-user-xyz" not in text and "acme" not in text
    for line in text.splitlines():
        if line.startswith("# TYPE") and line.endswith(" counter"):
            assert line.split()[2].endswith("_total"), line


# -- keys and tenants ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": "Bearer nope"},
        {"X-API-Key": "mos_000000000000_" + "A" * 43},
        {"Authorization": "Basic Zm9vOmJhcg=="},
    ],
)
def test_missing_or_wrong_key_gets_401_and_stores_nothing(
    deployment: Deployment,
    headers: dict[str, str],
) -> None:
    with httpx.Client(base_url=deployment.server.base_url, headers=headers) as c:
        r = c.post("/v1/users/intruder/turns", json={"query": "x", "response": "y"})
        assert r.status_code == 401
        assert r.headers["WWW-Authenticate"] == "Bearer"
        assert r.json()["error"]["type"] == "Unauthorized"
    with deployment.server.client(deployment.acme) as c:
        assert c.get("/v1/users/intruder/memories").status_code == 404


def test_x_api_key_header_works_like_bearer(deployment: Deployment) -> None:
    with httpx.Client(
        base_url=deployment.server.base_url, headers={"X-API-Key": deployment.acme}
    ) as c:
        assert c.get("/v1/users").status_code == 200


@pytest.mark.parametrize("valid_in", ["Authorization", "X-API-Key"])
def test_two_different_keys_are_refused_whichever_header_holds_the_valid_one(
    deployment: Deployment, valid_in: str
) -> None:
    garbage = "mos_000000000000_" + "B" * 43
    bearer, header = (deployment.acme, garbage)[:: 1 if valid_in == "Authorization" else -1]
    with httpx.Client(
        base_url=deployment.server.base_url,
        headers={"Authorization": f"Bearer {bearer}", "X-API-Key": header},
    ) as c:
        r = c.get("/v1/users")
        assert r.status_code == 401, r.text
        assert r.json()["error"] == {
            "type": "Unauthorized",
            "message": "two different API keys were sent (Authorization and X-API-Key): send one",
        }
    same = {"Authorization": f"Bearer {deployment.acme}", "X-API-Key": deployment.acme}
    with httpx.Client(base_url=deployment.server.base_url, headers=same) as c:
        assert c.get("/v1/users").status_code == 200


def test_another_tenants_user_is_not_found(deployment: Deployment) -> None:
    with deployment.server.client(deployment.acme) as a:
        assert _turn(a, "private", "my bank pin is 1234").status_code == 201
    with deployment.server.client(deployment.globex) as g:
        # To globex, acme's user is a user with no data: an empty context, nothing of acme's.
        seen = g.post("/v1/users/private/retrieve", json={"query": "pin"})
        assert seen.status_code == 200 and "1234" not in seen.text, seen.text
        assert seen.json()["stm"] == [] and "private" not in g.get("/v1/users").json()["users"]
        for r in (
            g.get("/v1/users/private/memories"),
            g.get("/v1/users/private/profile"),
            g.get("/v1/users/private/export"),
            g.delete("/v1/users/private"),
        ):
            assert r.status_code == 404, r.text
    with deployment.server.client(deployment.acme) as a:
        assert a.get("/v1/users/private/memories").json()["turns"] == 1


def test_a_revoked_key_stops_working_without_a_restart(deployment: Deployment) -> None:

    from memoryos_actors.server.keys import KeyStore

    key = add_live_key(deployment.server, deployment.root, deployment.acme_tenant)
    with deployment.server.client(key) as c:
        KeyStore(deployment.server.keys_file).revoke(key.split("_")[1])
        # The server re-reads its key file at most once a second.
        wait_until(
            lambda: c.get("/v1/users").status_code == 401,
            "the revoked key to be refused",
            interval=0.05,
        )


def test_key_file_holds_no_key_only_its_hash(deployment: Deployment) -> None:
    text = deployment.server.keys_file.read_text()
    for key in (deployment.acme, deployment.globex, deployment.limited):
        secret = key[len("mos_") + 13 :]  # after "mos_<12 hex>_"; may itself contain "_"
        assert len(secret) == 43 and key not in text and secret not in text


# -- limits and hostile input -------------------------------------------------------------------


def test_rate_limited_key_gets_429_with_retry_after_and_nothing_is_stored(
    deployment: Deployment,
) -> None:
    with deployment.server.client(deployment.limited) as c:
        codes = [_turn(c, "rl", f"turn {n}").status_code for n in range(6)]
        assert codes[:3] == [201, 201, 201] and codes[3:] == [429, 429, 429]
        r = _turn(c, "rl", "one more")
        assert r.status_code == 429 and int(r.headers["Retry-After"]) >= 1
        assert r.json()["error"]["type"] == "RateLimited"
    with deployment.server.client(deployment.acme) as other:  # other keys are not limited
        assert other.get("/v1/users").status_code == 200


def test_oversized_body_gets_413_and_stores_nothing(deployment: Deployment) -> None:
    with deployment.server.client(deployment.acme) as c:
        r = _turn(c, "big", "x" * 300_000)
        assert r.status_code == 413
        assert r.json()["error"]["type"] == "PayloadTooLarge"

        def chunks():  # no Content-Length: streamed, counted as it arrives
            for _ in range(40):
                yield b" " * 10_000

        r = c.post(
            "/v1/users/big/turns", content=chunks(), headers={"Content-Type": "application/json"}
        )
        assert r.status_code == 413
        assert c.get("/v1/users/big/memories").status_code == 404


@pytest.mark.parametrize(
    "body",
    [
        b"{not json",
        b"[1, 2]",
        b'{"query": 5}',
        b"",
        b'{"query": "q", "response": "r", "extra": 1}',
        b'{"query": "q", "timestamp": "yesterday"}',
        b'{"query": "q", "timestamp": -5}',
        b'{"query": "", "response": ""}',
        b'{"query": "a\\u0000b"}',
        b'{"query": "\\ud800"}',
    ],
)
def test_bad_json_gets_422_with_a_message_and_stores_nothing(
    deployment: Deployment,
    body: bytes,
) -> None:
    with deployment.server.client(deployment.acme) as c:
        r = c.post(
            "/v1/users/badjson/turns", content=body, headers={"Content-Type": "application/json"}
        )
        assert r.status_code == 422, r.text
        err = r.json()["error"]
        assert err["type"] == "InvalidInput" and err["message"]
        assert c.get("/v1/users/badjson/memories").status_code == 404


def test_dot_segments_are_neither_user_nor_assistant_ids(deployment: Deployment) -> None:
    # Every HTTP client resolves "." and ".." path segments (also as %2E): a user named so
    # could be created here but never read or deleted by any ordinary client.
    with deployment.server.client(deployment.acme) as c:
        for dots in ("%2E", "%2E%2E", "%2e%2e"):
            r = c.post(f"/v1/users/{dots}/turns", json={"query": "q", "response": "r"})
            assert r.status_code == 422, r.text
            assert r.json()["error"]["type"] == "InvalidInput"
            assert "URL" in r.json()["error"]["message"]
            assert c.put(f"/v1/users/{dots}/profile", json={"name": "Dot"}).status_code == 422
            assert (
                c.put(f"/v1/users/dotty/agents/{dots}/profile", json={"role": "x"}).status_code
                == 422
            )
        for aid in (".", ".."):
            assert _turn(c, "dotty", "q", assistant_id=aid).status_code == 422
        assert not {".", "..", "dotty"} & set(c.get("/v1/users").json()["users"])


def test_bad_utf8_body_gets_422(deployment: Deployment) -> None:
    with deployment.server.client(deployment.acme) as c:
        r = c.post(
            "/v1/users/utf/turns",
            content=b'{"query": "caf\xe9"}',
            headers={"Content-Type": "application/json"},
        )
        assert r.status_code == 422 and "UTF-8" in r.json()["error"]["message"]


def test_body_that_is_not_json_gets_415(deployment: Deployment) -> None:
    with deployment.server.client(deployment.acme) as c:
        r = c.post("/v1/users/form/turns", data={"query": "x"})
        assert r.status_code == 415


@pytest.mark.parametrize("top_k", [0, -1, 101, 10**12, "5", 2.5, True])
def test_bad_top_k_gets_422(deployment: Deployment, top_k: object) -> None:
    with deployment.server.client(deployment.acme) as c:
        _turn(c, "topk", "hello")
        r = c.post("/v1/users/topk/retrieve", json={"query": "hello", "top_k": top_k})
        assert r.status_code == 422, r.text
        assert "top_k" in r.json()["error"]["message"]


@pytest.mark.parametrize("user", ["../../etc", "a/b", "/abs", " padded", "x" * 300, "tab\there"])
def test_path_like_or_invalid_user_ids_are_refused_and_store_nothing(
    deployment: Deployment,
    user: str,
) -> None:
    before = set(deployment.root.rglob("*"))
    with deployment.server.client(deployment.acme) as c:
        r = _turn(c, user, "escape attempt")
        assert r.status_code in (404, 422), r.text
    created = set(deployment.root.rglob("*")) - before
    assert not [p for p in created if "server-" not in p.name], created  # only the log grows


def test_an_encoded_path_in_a_user_id_stays_an_ordinary_user_in_the_data_dir(
    deployment: Deployment,
) -> None:
    before = set(deployment.root.rglob("*"))
    with deployment.server.client(deployment.acme) as c:
        assert _turn(c, "..%2F..%2Fetc", "escape attempt").status_code == 201
        assert "..%2F..%2Fetc" in c.get("/v1/users").json()["users"]
    created = set(deployment.root.rglob("*")) - before
    assert created and all(
        deployment.server.data_dir in p.parents for p in created if "server-" not in p.name
    )


def test_unicode_and_dot_user_ids_are_ordinary_users(deployment: Deployment) -> None:
    with deployment.server.client(deployment.acme) as c:
        for user in ("Zoë 🚀", "..x", "a:b", "100%"):
            assert _turn(c, user, f"I am {user}").status_code == 201
        users = c.get("/v1/users").json()["users"]
    assert {"Zoë 🚀", "..x", "a:b", "100%"} <= set(users)


def test_too_long_text_gets_422(deployment: Deployment) -> None:
    with deployment.server.client(deployment.acme) as c:
        r = _turn(c, "long", "x" * 70_000)  # over max_text_bytes (65,536), under the body limit
        assert r.status_code == 422 and "max_text_bytes" in r.json()["error"]["message"]


# -- restart --------------------------------------------------------------------------------------


def _check_acked(c: httpx.Client, acked: dict[str, list[str]]) -> None:
    assert sorted(c.get("/v1/users").json()["users"]) == sorted(acked)
    for user, ids in acked.items():
        pages = c.get(f"/v1/users/{user}/memories").json()["pages"]
        assert sorted(p["page_id"] for p in pages) == sorted(ids), user


def test_restart_loses_no_acknowledged_turn(tmp_path: Path) -> None:
    """A server killed with SIGKILL (nothing closed: the next start replays the WAL), then
    the server after it stopped with SIGTERM (a graceful stop that closes the memory
    system, exit code 0): each next start has every acknowledged turn and edit. One data
    directory, three starts (the two stops were two tests of two starts each)."""
    keys = tmp_path / "keys.json"
    key = add_key(tmp_path, keys, "acme")
    server = start_server(tmp_path, tmp_path / "data", keys)
    acked: dict[str, list[str]] = {}
    try:
        with server.client(key) as c:
            for n in range(30):
                user = f"u{n % 3}"
                r = _turn(c, user, f"turn {n} about kites")
                assert r.status_code == 201
                acked.setdefault(user, []).append(r.json()["page_id"])
            c.put("/v1/users/u0/profile", json={"name": "Una"})
            # Per-memory edits are acknowledged once in the WAL too.
            assert c.delete(f"/v1/users/u1/memories/page:{acked['u1'][0]}").status_code == 200
            assert (
                c.patch("/v1/users/u2/memories/trait:sports", json={"value": "high"}).status_code
                == 200
            )
            deleted = acked["u1"].pop(0)
    finally:
        server.stop(signal.SIGKILL)
    server = start_server(tmp_path, tmp_path / "data", keys)
    try:
        with server.client(key) as c:
            _check_acked(c, acked)
            assert c.get("/v1/users/u0/profile").json()["name"] == "Una"
            assert c.get(f"/v1/users/u1/memories/page:{deleted}").status_code == 404
            assert c.get("/v1/users/u2/memories/trait:sports").json()["text"] == "high"
            # More turns and edits, for the graceful stop to close with.
            for n in range(30, 39):
                user = f"u{n % 3}"
                r = _turn(c, user, f"turn {n} about kites")
                assert r.status_code == 201
                acked[user].append(r.json()["page_id"])
            c.put("/v1/users/u1/profile", json={"name": "Ulf"})
            assert c.delete(f"/v1/users/u0/memories/page:{acked['u0'][1]}").status_code == 200
            deleted_later = acked["u0"].pop(1)
    finally:
        # A SIGTERM is a graceful stop that closes the memory system: exit code 0.
        assert server.stop() == 0
        assert "Traceback" not in server.log_text()
    server = start_server(tmp_path, tmp_path / "data", keys)
    try:
        with server.client(key) as c:
            _check_acked(c, acked)
            assert c.get("/v1/users/u0/profile").json()["name"] == "Una"
            assert c.get("/v1/users/u1/profile").json()["name"] == "Ulf"
            assert c.get(f"/v1/users/u1/memories/page:{deleted}").status_code == 404
            assert c.get(f"/v1/users/u0/memories/page:{deleted_later}").status_code == 404
            assert c.get("/v1/users/u2/memories/trait:sports").json()["text"] == "high"
    finally:
        assert server.stop() == 0
        assert "Traceback" not in server.log_text()


def test_a_second_server_on_the_same_data_dir_exits_with_a_clear_error(
    deployment: Deployment,
) -> None:
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORYOS_")}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "memoryos_actors",
            "--data-dir",
            str(deployment.server.data_dir),
            "serve",
            "--port",
            "0",
            "--keys-file",
            str(deployment.server.keys_file),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=env,
    )
    assert done.returncode == 2 and "DataDirLocked" in done.stderr


def test_a_remembered_note_is_retrieved_listed_corrected_and_deleted_over_http(
    deployment: Deployment,
) -> None:
    meta = {"source": "crm", "score": 3, "tags": ["pet"]}
    with deployment.server.client(deployment.acme) as c:
        r = c.post(
            "/v1/users/noted/memories",
            json={"text": "Their beagle is called Rexford.", "metadata": meta},
        )
        assert r.status_code == 201, r.text
        mid = r.json()["memory_id"]
        assert r.json() == {"user_id": "noted", "memory_id": mid} and mid.startswith("fact:f")
        ctx = c.post("/v1/users/noted/retrieve", json={"query": "what is my dog called?"})
        assert "Rexford" in ctx.json()["rendered"]
        one = c.get(f"/v1/users/noted/memories/{mid}").json()
        assert (one["text"], one["origin"], one["metadata"]) == (
            "Their beagle is called Rexford.",
            "remembered",
            meta,
        )
        (fact,) = c.get("/v1/users/noted/memories").json()["kb"]
        assert (fact["memory_id"], fact["origin"], fact["metadata"]) == (mid, "remembered", meta)
        fixed = c.patch(f"/v1/users/noted/memories/{mid}", json={"value": "Their beagle is Max."})
        assert fixed.status_code == 200, fixed.text
        history = c.get(f"/v1/users/noted/memories/{mid}/history").json()["events"]
        assert [e["action"] for e in history] == ["created", "corrected"]
        assert c.delete(f"/v1/users/noted/memories/{mid}").status_code == 200
        assert c.get(f"/v1/users/noted/memories/{mid}").status_code == 404
    with deployment.server.client(deployment.globex) as g:  # another tenant: not theirs
        assert g.get(f"/v1/users/noted/memories/{mid}").status_code == 404
        assert "noted" not in g.get("/v1/users").json()["users"]


def test_hostile_remember_requests_are_refused_and_store_nothing(deployment: Deployment) -> None:
    with deployment.server.client(deployment.acme) as c:
        for body in (
            {"text": ""},
            {"text": "   "},
            {"text": "x" * (70 * 1024)},  # over max_text_bytes
            {"text": "note", "metadata": "not an object"},
            {"text": "note", "metadata": {"big": "y" * 5000}},
            {"text": "note", "metadata": {"a": [[[[[[[[[["deep"]]]]]]]]]]}},
            {"text": "note", "extra": 1},
            {"metadata": {}},
        ):
            r = c.post("/v1/users/hostile/memories", json=body)
            assert r.status_code in (400, 413, 422), (body, r.status_code, r.text)
        assert "hostile" not in c.get("/v1/users").json()["users"]
