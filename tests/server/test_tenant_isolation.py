"""End to end through a live server: no key reads, lists, changes or deletes another
tenant's data, even where two tenants pick the same user id.

The property over every user id is proved on the pure id mapping the server uses
(``test_tenancy.py``, hundreds of examples in well under a second); here a few ids a server
could get wrong (URL-reserved and non-ASCII characters, an id that spells another tenant's
library id) go through every route that reads or changes a user.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from urllib.parse import quote

import pytest
from srvutil import Deployment, add_live_key

#: The second tenant (the session's server is shared: its name is this module's own).
INITECH = "initech-tenant-isolation"
USER_IDS = [
    "ann",
    "Zoë 名前 100% ?#&=+;\\.x",
    f"{INITECH}:ann",  # acme's user spelled like initech's library id of "ann"
]


@pytest.fixture(scope="module")
def initech(deployment: Deployment) -> Iterator[str]:
    yield add_live_key(deployment.server, deployment.root, INITECH)


@pytest.mark.parametrize("user", USER_IDS)
def test_no_key_ever_reads_another_tenants_data(
    deployment: Deployment,
    initech: str,
    user: str,
) -> None:
    path = f"/v1/users/{quote(user, safe='')}"
    marks = {"acme": f"acmemark{uuid.uuid4().hex}", "initech": f"initechmark{uuid.uuid4().hex}"}
    keys = {"acme": deployment.acme, "initech": initech}
    clients = {t: deployment.server.client(k) for t, k in keys.items()}
    try:
        for tenant, c in clients.items():
            r = c.post(
                f"{path}/turns",
                json={"query": f"my code word is {marks[tenant]}", "response": "ok"},
            )
            assert r.status_code == 201, r.text
        for tenant, c in clients.items():
            other = marks["initech" if tenant == "acme" else "acme"]
            seen = [
                c.post(f"{path}/chat", json={"query": "what is my code word?"}),
                c.post(f"{path}/retrieve", json={"query": "what is my code word?"}),
                c.get(f"{path}/memories"),
                c.get(f"{path}/export"),
                c.get("/v1/users"),
                c.get(f"{path}/memories/page:p1"),
                c.get(f"{path}/memories/page:p1/history"),
            ]
            for r in seen:
                assert r.status_code == 200, r.text
                assert other.encode() not in r.content
            assert marks[tenant] in seen[2].text and user in seen[4].json()["users"]
        # One tenant deleting a memory of its user leaves the other's user whole.
        assert clients["acme"].delete(f"{path}/memories/page:p1").status_code == 200
        assert clients["acme"].get(f"{path}/memories/page:p1").status_code == 404
        r = clients["initech"].get(f"{path}/memories/page:p1")
        assert r.status_code == 200 and marks["initech"] in r.text
        assert (
            clients["acme"]
            .post(
                f"{path}/turns",
                json={"query": f"my code word is {marks['acme']}", "response": "ok"},
            )
            .status_code
            == 201
        )
        # One tenant forgetting its user leaves the other's user whole.
        assert clients["initech"].delete(path).status_code == 200
        assert clients["initech"].get(f"{path}/memories").status_code == 404
        r = clients["acme"].get(f"{path}/memories")
        assert r.status_code == 200 and marks["acme"] in r.text
    finally:
        for c in clients.values():
            c.delete(path)
            c.close()
