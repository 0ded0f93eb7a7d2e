"""The memory page over plain HTTP: sessions, headers, CSRF and tenant isolation, checked
on a real ``memoryos serve`` process with a real HTTP client (no browser)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest
from srvutil import Deployment, Server, add_live_key, cli
from waiting import wait_until

CSRF = re.compile(r'name="csrf" value="([^"]+)"')


@contextmanager
def _login(server: Server, key: str) -> Iterator[httpx.Client]:
    """A client logged in to the memory page with ``key`` (its session cookie in the jar)."""
    with httpx.Client(base_url=server.base_url, follow_redirects=False, timeout=60.0) as c:
        form = c.get("/ui/login")
        assert form.status_code == 200, form.text
        r = c.post("/ui/login", data={"csrf": CSRF.search(form.text).group(1), "key": key})
        assert r.status_code == 303 and r.headers["location"] == "/ui/users", r.text
        yield c


def _csrf(c: httpx.Client, path: str) -> str:
    r = c.get(path)
    assert r.status_code == 200, r.text
    return CSRF.search(r.text).group(1)


@pytest.fixture(scope="module")
def ann(deployment: Deployment) -> str:
    """User ``ann`` of tenant acme with three turns and a trait."""
    with deployment.server.client(deployment.acme) as c:
        for q in ("I adopted a beagle called Rufus", "My locker code is 7781", "I like tea"):
            assert (
                c.post("/v1/users/ann/turns", json={"query": q, "response": "ok"}).status_code
                == 201
            )
    return "ann"


class _Scripts(HTMLParser):
    """Collects inline scripts and event-handler attributes of a page."""

    def __init__(self) -> None:
        super().__init__()
        self.inline: list[str] = []
        self.handlers: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        names = {k for k, _ in attrs}
        self.handlers.extend(f"{tag}[{k}]" for k in names if k.startswith("on"))
        if tag == "script":
            self._in_script = "src" not in names
            if self._in_script:
                self.inline.append("")

    def handle_endtag(self, tag: str) -> None:
        if tag == "script":
            self._in_script = False

    def handle_data(self, data: str) -> None:
        if self._in_script:
            self.inline[-1] += data


def test_login_sets_an_httponly_samesite_session_cookie_and_the_key_goes_nowhere(
    deployment: Deployment, ann: str
) -> None:
    server = deployment.server
    c = httpx.Client(base_url=server.base_url, follow_redirects=False, timeout=60.0)
    with c:
        form = c.get("/ui/login")
        assert 'type="password"' in form.text
        r = c.post(
            "/ui/login", data={"csrf": CSRF.search(form.text).group(1), "key": deployment.acme}
        )
        assert r.status_code == 303 and r.headers["location"] == "/ui/users"
        cookie = next(
            v
            for k, v in r.headers.multi_items()
            if k == "set-cookie" and v.startswith("memoryos_ui=")
        )
        attrs = {a.strip().split("=")[0].lower() for a in cookie.split(";")}
        assert {"httponly", "samesite", "path"} <= attrs
        assert "samesite=strict" in cookie.lower() and "path=/ui" in cookie.lower()
        sid = cookie.split(";")[0].split("=", 1)[1]
        assert deployment.acme not in cookie and sid and len(sid) >= 40
        pages = [c.get(p) for p in ("/ui/users", "/ui/users/ann", "/ui/users/ann/profile")]
        assert all(p.status_code == 200 for p in pages)
        assert not any(
            deployment.acme in p.text or deployment.acme in str(p.headers) for p in (r, *pages)
        )
    assert deployment.acme not in server.log_text()


def test_a_wrong_key_gets_the_form_again_and_no_session(deployment: Deployment) -> None:
    with httpx.Client(base_url=deployment.server.base_url, timeout=60.0) as c:
        form = c.get("/ui/login")
        r = c.post(
            "/ui/login",
            data={"csrf": CSRF.search(form.text).group(1), "key": "mos_000000000000_" + "x" * 43},
            follow_redirects=False,
        )
        assert r.status_code == 401 and "not a valid API key" in r.text
        assert "memoryos_ui=" not in r.headers.get("set-cookie", "")
        assert c.get("/ui/users", follow_redirects=False).headers["location"] == "/ui/login"


def test_every_page_has_a_csp_without_inline_script_and_no_inline_handlers(
    deployment: Deployment, ann: str
) -> None:
    with _login(deployment.server, deployment.acme) as c:
        paths = [
            "/ui/login",
            "/ui/users",
            "/ui/users/ann",
            "/ui/users/ann/archive",
            "/ui/users/ann/profile",
            "/ui/users/ann/search?q=beagle",
            "/ui/users/ann/memories/page:p1",
            "/ui/users/ann/memories/page:p1/delete",
            "/ui/users/nobody",
            "/ui/users/ann/memories/page:p999",
        ]
        for path in paths:
            r = c.get(path)
            assert r.status_code in (200, 303, 404), (path, r.status_code)
            csp = r.headers["content-security-policy"]
            assert "script-src 'self'" in csp and "unsafe-inline" not in csp
            assert "default-src 'none'" in csp and "frame-ancestors 'none'" in csp
            assert r.headers["cache-control"] == "no-store"
            assert r.headers["x-content-type-options"] == "nosniff"
            parsed = _Scripts()
            parsed.feed(r.text)
            assert parsed.inline == [] and parsed.handlers == [], path


def test_answers_no_page_route_makes_carry_the_security_headers_too(
    deployment: Deployment,
) -> None:
    from memoryos_actors.server.ui.web import PAGE_HEADERS

    with _login(deployment.server, deployment.acme) as c:
        answers = [
            (c.get("/ui/no-such-page"), 404),
            (c.get("/ui/users/ann/memories/page:p1/nothing-here"), 404),
            (c.post("/ui/users"), 405),
            (c.put("/ui/login"), 405),
            (c.post("/ui/login", content=b"x" * 300_000), 413),  # the gate's refusal
            (c.get("/ui/static/ui.css"), 200),  # keeps its own Cache-Control
        ]
        for r, status in answers:
            where = (r.request.method, r.request.url.path, r.status_code)
            assert r.status_code == status, where
            for name, value in PAGE_HEADERS:
                if name == "Cache-Control" and status == 200:
                    assert r.headers[name] == "public, max-age=86400"
                else:
                    assert r.headers.get(name) == value, (where, name)
    with httpx.Client(base_url=deployment.server.base_url) as c:
        api = c.get("/v1/no-such-route")  # the JSON API's answers are not the page's
        assert "content-security-policy" not in api.headers


def test_mutating_forms_need_the_sessions_csrf_token_and_this_origin(
    deployment: Deployment, ann: str
) -> None:
    server = deployment.server
    with _login(server, deployment.acme) as c, server.client(deployment.acme) as api:
        token = _csrf(c, "/ui/users/ann/memories/page:p2/delete")
        url = "/ui/users/ann/memories/page:p2/delete"
        refused = [
            c.post(url, data={"back": "overview"}),
            c.post(url, data={"csrf": "not-the-token"}),
            c.post(url, data={"csrf": token}, headers={"Origin": "http://evil.example"}),
            c.post(url, data={"csrf": token}, headers={"Sec-Fetch-Site": "cross-site"}),
            c.post(
                url, content=f'{{"csrf": "{token}"}}', headers={"Content-Type": "application/json"}
            ),
            c.post(
                "/ui/users/ann/memories/trait:openness/correct",
                data={"csrf": "nope", "value": "high"},
            ),
        ]
        assert [r.status_code for r in refused] == [403, 403, 403, 403, 415, 403]
        assert api.get("/v1/users/ann/memories/page:p2").status_code == 200
        assert api.get("/v1/users/ann/memories/trait:openness/history").status_code == 404
        # Without a session, a form post is sent to the login page and changes nothing.
        with httpx.Client(base_url=server.base_url, timeout=60.0) as anon:
            r = anon.post(url, data={"csrf": token}, follow_redirects=False)
            assert r.status_code == 303 and r.headers["location"] == "/ui/login"
        assert api.get("/v1/users/ann/memories/page:p2").status_code == 200
        # With the token, the same post deletes, as DELETE /v1/.../memories/page:p2 does.
        r = c.post(
            url, data={"csrf": token, "back": "overview"}, headers={"Origin": server.base_url}
        )
        assert r.status_code == 303 and r.headers["location"] == "/ui/users/ann"
        assert api.get("/v1/users/ann/memories/page:p2").status_code == 404
        history = api.get("/v1/users/ann/memories/page:p2/history").json()["events"]
        assert [e["action"] for e in history] == ["deleted"]
        assert "Deleted page:p2." in c.get("/ui/users/ann").text
        assert "locker code" not in api.get("/v1/users/ann/export").text


def test_another_tenants_user_is_a_404_page_and_cannot_be_changed(
    deployment: Deployment, ann: str
) -> None:
    server = deployment.server
    with _login(server, deployment.globex) as c, server.client(deployment.acme) as api:
        token = _csrf(c, "/ui/users")
        for path in (
            "/ui/users/ann",
            "/ui/users/ann/archive",
            "/ui/users/ann/profile",
            "/ui/users/ann/search?q=beagle",
            "/ui/users/ann/memories/page:p1",
            "/ui/users/ann/memories/page:p1/delete",
        ):
            r = c.get(path)
            assert r.status_code == 404 and "No such user" in r.text, path
            assert "beagle" not in r.text and "Rufus" not in r.text
        assert "ann" not in c.get("/ui/users").text.split("<main", 1)[1]
        r = c.post("/ui/users/ann/memories/page:p1/delete", data={"csrf": token})
        assert r.status_code == 404
        r = c.post(
            "/ui/users/ann/memories/trait:openness/correct", data={"csrf": token, "value": "high"}
        )
        assert r.status_code == 404
        assert api.get("/v1/users/ann/memories/page:p1").status_code == 200
        assert api.get("/v1/users/ann/memories/trait:openness/history").status_code == 404


def test_a_revoked_key_ends_its_sessions_and_logout_ends_one(
    deployment: Deployment, ann: str
) -> None:
    server = deployment.server
    key = add_live_key(server, deployment.root, deployment.acme_tenant)
    with _login(server, key) as c, _login(server, deployment.acme) as other:
        assert c.get("/ui/users").status_code == 200
        key_id = key.split("_")[1]
        cli("keys", "revoke", key_id, "--keys-file", str(server.keys_file), cwd=deployment.root)
        # The server re-reads its key file at most once a second.
        r = wait_until(
            lambda: (got := c.get("/ui/users")).status_code != 200 and got,
            "the revoked key's session to end",
            interval=0.05,
        )
        assert r.status_code == 303 and r.headers["location"] == "/ui/login"
        token = _csrf(other, "/ui/users")
        r = other.post("/ui/logout", data={"csrf": token})
        assert r.status_code == 303 and r.headers["location"] == "/ui/login"
        assert other.get("/ui/users").status_code == 303


def test_a_user_id_and_memory_id_with_reserved_characters_round_trip(
    deployment: Deployment,
) -> None:
    user = "dora & co?#%"
    with deployment.server.client(deployment.acme) as api:
        assert (
            api.post(
                f"/v1/users/{quote(user, safe='')}/turns",
                json={"query": "I collect maps", "response": "ok"},
            ).status_code
            == 201
        )
    with _login(deployment.server, deployment.acme) as c:
        listing = c.get("/ui/users", params={"q": "dora"})
        assert f'href="/ui/users/{quote(user, safe="")}"' in listing.text
        assert "dora &amp; co?#%" in listing.text
        r = c.get(f"/ui/users/{quote(user, safe='')}")
        assert r.status_code == 200 and "I collect maps" in r.text


def test_templates_and_static_files_are_package_data() -> None:
    """A non-editable install ships what the page serves: every template and static file
    matches a package-data pattern of pyproject.toml."""
    import fnmatch
    import tomllib

    root = Path(__file__).resolve().parents[2]
    data = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))
    patterns = data["tool"]["setuptools"]["package-data"]["memoryos_actors.server.ui"]
    pkg = root / "memoryos_actors" / "server" / "ui"
    files = [
        p.relative_to(pkg).as_posix()
        for d in ("templates", "static")
        for p in (pkg / d).iterdir()
        if p.is_file()
    ]
    assert files and all(any(fnmatch.fnmatch(f, pat) for pat in patterns) for f in files)
    assert {"templates/base.html", "static/ui.css", "static/ui.js"} <= set(files)
