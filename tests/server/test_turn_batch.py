"""Adding many turns in one request (#46 item 6): stored in order, each durable,
idempotent by turn key, and a failure part way says which turns are stored."""

from __future__ import annotations

from srvutil import Deployment


def _batch(n: int, prefix: str, **extra: object) -> dict[str, object]:
    return {
        "turns": [
            {
                "query": f"{prefix} fact {i}",
                "response": "noted",
                "turn_key": f"{prefix}-{i}",
                **extra,
            }
            for i in range(n)
        ]
    }


def test_a_batch_is_stored_in_order_and_once_when_sent_again(deployment: Deployment) -> None:
    with deployment.server.client(deployment.acme) as c:
        r = c.post("/v1/users/bea/turns/batch", json=_batch(5, "b"))
        assert r.status_code == 201, r.text
        ids = r.json()["page_ids"]
        assert r.json()["user_id"] == "bea" and len(ids) == 5 and len(set(ids)) == 5
        again = c.post("/v1/users/bea/turns/batch", json=_batch(5, "b"))
        assert again.status_code == 201 and again.json()["page_ids"] == ids
        pages = c.get("/v1/users/bea/memories", params={"kind": "page"}).json()["pages"]
        assert [p["query"] for p in pages] == [f"b fact {i}" for i in range(5)]
        # Another tenant's same user id sees none of it.
    with deployment.server.client(deployment.globex) as c:
        assert c.get("/v1/users/bea/memories").status_code == 404


def test_a_batch_that_fails_part_way_names_the_turns_stored(deployment: Deployment) -> None:
    with deployment.server.client(deployment.acme) as c:
        body = _batch(3, "k")
        body["turns"][2]["timestamp"] = -5  # type: ignore[index]
        r = c.post("/v1/users/kai/turns/batch", json=body)
        assert r.status_code == 422, r.text
        message = r.json()["error"]["message"]
        assert "turn 2 of the batch" in message and "turns 0..1 are stored" in message
        pages = c.get("/v1/users/kai/memories", params={"kind": "page"}).json()["pages"]
        assert [p["query"] for p in pages] == ["k fact 0", "k fact 1"]
        # Fixed and sent again: the first two are not stored twice.
        body["turns"][2]["timestamp"] = None  # type: ignore[index]
        r = c.post("/v1/users/kai/turns/batch", json=body)
        assert r.status_code == 201, r.text
        pages = c.get("/v1/users/kai/memories", params={"kind": "page"}).json()["pages"]
        assert [p["query"] for p in pages] == ["k fact 0", "k fact 1", "k fact 2"]


def test_an_empty_or_oversized_batch_is_refused(deployment: Deployment) -> None:
    with deployment.server.client(deployment.acme) as c:
        assert c.post("/v1/users/zed/turns/batch", json={"turns": []}).status_code == 422
        assert c.post("/v1/users/zed/turns/batch", json=_batch(1001, "z")).status_code in (413, 422)
        assert c.get("/v1/users/zed/memories").status_code == 404  # nothing was written
