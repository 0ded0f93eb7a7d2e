"""A server's first contact (#46 item 6): ``GET /`` sends a browser to the memory page and
tells any other client where things are, and the start-up line names the addresses."""

from __future__ import annotations

from srvutil import Deployment

from memoryos_actors.server.uvicorn_server import startup_line


def test_a_browser_at_the_root_goes_to_the_memory_page(deployment: Deployment) -> None:
    with deployment.server.client() as c:
        r = c.get("/", headers={"Accept": "text/html,application/xhtml+xml,*/*;q=0.8"})
        assert r.status_code == 307
        assert r.headers["location"] == "/ui"
        assert c.get("/", headers={"Accept": "text/html"}, follow_redirects=True).status_code in (
            200,
            303,
        )


def test_any_other_client_at_the_root_gets_an_index_without_a_key(
    deployment: Deployment,
) -> None:
    with deployment.server.client() as c:
        r = c.get("/", headers={"Accept": "application/json"})
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["name"] == "memoryos-actors" and body["version"]
        links = body["links"]
        # The shared server serves MCP (--mcp).
        assert links["mcp"] == "/mcp"
        for name in ("ui", "docs", "openapi", "healthz", "readyz", "metrics"):
            # Every address the index names answers (the page asks for a login, the rest
            # needs no key).
            answer = c.get(links[name], follow_redirects=False)
            assert answer.status_code in (200, 303), (name, answer.status_code)
        assert c.get(links["api"] + "/users").status_code == 401  # the API needs a key
        # The root is not part of the API's schema.
        assert "/" not in c.get("/openapi.json").json()["paths"]


def test_the_start_up_line_names_every_address(deployment: Deployment) -> None:
    assert startup_line("http://127.0.0.1:8080", mcp=False) == (
        "memoryos: serving http://127.0.0.1:8080 (API http://127.0.0.1:8080/v1, docs "
        "http://127.0.0.1:8080/docs, memory page http://127.0.0.1:8080/ui)"
    )
    assert startup_line("http://h:1", mcp=True).endswith(", MCP http://h:1/mcp)")
    # The running server (started with --mcp) printed its own.
    base = deployment.server.base_url
    assert startup_line(base, mcp=True) in deployment.server.log_text()
