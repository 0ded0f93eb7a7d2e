"""A tenant's ids through the real app (FastAPI's test client drives the ASGI app with its
gate, keys and lifespan): an export a tenant gets names its user and assistants by the
tenant's own ids, so it carries no tenant's name, and imported into another tenant
(``memoryos --tenant T import``) its assistants' personas are that tenant's (#41 item 8);
an id too long is refused for its own length, never for its prefix's (#41 item 14)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote

import pytest
from inprocess import run_cli

from memoryos_actors import MemoryConfig
from memoryos_actors.server.app import ServerSettings, create_app
from memoryos_actors.server.keys import KeyStore

pytest.importorskip("httpx")
from fastapi.testclient import TestClient  # noqa: E402

PERSONA = {"role": "cycling coach", "character": "patient and exact", "extras": {}}


@contextmanager
def _client(data_dir: Path, keys_file: Path, key: str) -> Iterator[TestClient]:
    settings = ServerSettings(data_dir=data_dir, keys_file=keys_file, config=MemoryConfig())
    with TestClient(create_app(settings), headers={"X-API-Key": key}) as c:
        yield c


def test_an_export_over_http_carries_no_tenant_name_and_imports_into_another_tenant(
    tmp_path: Path,
) -> None:
    data_dir, keys_file = tmp_path / "data", tmp_path / "keys.json"
    keys = KeyStore(keys_file)
    acme, _ = keys.add("acme")
    other, _ = keys.add("other")

    with _client(data_dir, keys_file, acme) as c:
        for n in range(12):
            r = c.post(
                "/v1/users/ann/turns",
                json={"query": f"ride {n} was long", "response": "ok", "assistant_id": "helper"},
            )
            assert r.status_code == 201, r.text
        assert c.put("/v1/users/ann/agents/helper/profile", json=PERSONA).status_code == 200
        r = c.get("/v1/users/ann/export")
        assert r.status_code == 200, r.text
        exported = r.content
    assert b"acme" not in exported
    assert b'"assistant_id":"helper"' in exported.replace(b" ", b"")
    export_file = tmp_path / "ann.json"
    export_file.write_bytes(exported)

    done = run_cli("--tenant", "other", "import", str(export_file), data_dir=data_dir, env={})
    assert done.returncode == 0, done.stderr
    assert "as user 'ann'" in done.stdout

    with _client(data_dir, keys_file, other) as c:
        assert c.get("/v1/users/ann/agents/helper/profile").json() == PERSONA
        ctx = c.post(
            "/v1/users/ann/retrieve", json={"query": "long ride", "assistant_id": "helper"}
        ).json()
        assert ctx["agent_profile"]["role"] == PERSONA["role"]
        listing = c.get("/v1/users/ann/memories").json()
        assert "helper" in listing["agents"]
        assert len(listing["pages"]) == 12
        assert {p["assistant_id"] for p in listing["pages"]} == {"helper"}
        # The import's own export is as clean: no tenant's name, nowhere.
        again = c.get("/v1/users/ann/export").content
        assert b"other" not in again and b"acme" not in again
    # The first tenant's user is untouched and still its own.
    with _client(data_dir, keys_file, acme) as c:
        assert c.get("/v1/users/ann/agents/helper/profile").json() == PERSONA


def test_an_id_too_long_in_bytes_is_refused_for_its_own_length_without_the_prefix(
    tmp_path: Path,
) -> None:
    keys = KeyStore(tmp_path / "keys.json")
    acme, _ = keys.add("acme")
    longest, too_long = "\U0001f600" * 240, "\U0001f600" * 256  # 960 and 1,024 bytes
    with _client(tmp_path / "data", tmp_path / "keys.json", acme) as c:
        for r in (
            c.post(f"/v1/users/{quote(too_long)}/turns", json={"query": "q", "response": "r"}),
            c.post(
                "/v1/users/ann/turns",
                json={"query": "q", "response": "r", "assistant_id": too_long},
            ),
            c.put(f"/v1/users/ann/agents/{quote(too_long)}/profile", json={"role": "x"}),
        ):
            assert r.status_code == 422, r.text
            message = r.json()["error"]["message"]
            assert "is 1024 UTF-8 bytes; an id may have at most 960" in message
            assert "max_text_bytes" not in message and "acme" not in message
        r = c.post(
            f"/v1/users/{quote(longest)}/turns",
            json={"query": "q", "response": "r", "assistant_id": longest},
        )
        assert r.status_code == 201, r.text
        assert c.get("/v1/users").json()["users"] == [longest]
