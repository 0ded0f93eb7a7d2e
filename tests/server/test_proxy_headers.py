"""Which client address the server believes: the connection's peer, unless
``serve --forwarded-allow-ips`` names the proxy that sends ``X-Forwarded-For``. The memory
page's login limit counts failed logins by that address, so a client that could pick its
own address in a header could guess keys without limit. Checked on real servers on
127.0.0.1 (uvicorn's default trusts that peer's headers)."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
from inprocess import run_cli
from srvutil import Server, add_key, start_server

CSRF = re.compile(r'name="csrf" value="([^"]+)"')
#: Failed logins sent before giving up on seeing a 429 (the limit allows 10 at once,
#: then one a second).
ATTEMPTS = 40
WRONG_KEY = "mos_000000000000_" + "x" * 43


def _failed_logins(server: Server, forwarded_for: list[str]) -> list[int]:
    """The statuses of wrong-key logins sent with each of ``forwarded_for`` in turn as
    ``X-Forwarded-For``, stopping at the first 429."""
    statuses: list[int] = []
    with httpx.Client(base_url=server.base_url, timeout=60.0, follow_redirects=False) as c:
        token = CSRF.search(c.get("/ui/login").text)
        assert token is not None
        for address in forwarded_for:
            r = c.post(
                "/ui/login",
                data={"csrf": token.group(1), "key": WRONG_KEY},
                headers={"X-Forwarded-For": address},
            )
            statuses.append(r.status_code)
            if r.status_code == 429:
                break
            assert r.status_code == 401, r.text
            token = CSRF.search(r.text)  # each answer sets a new form token
            assert token is not None
    return statuses


def _rotating() -> list[str]:
    return [f"203.0.113.{n}" for n in range(1, ATTEMPTS + 1)]


def _server(tmp_path: Path, *extra: str) -> Server:
    keys = tmp_path / "keys.json"
    add_key(tmp_path, keys, "acme")
    return start_server(tmp_path, tmp_path / "data", keys, *extra)


def test_a_rotating_x_forwarded_for_does_not_escape_the_login_limit_by_default(
    tmp_path: Path,
) -> None:
    server = _server(tmp_path)
    try:
        statuses = _failed_logins(server, _rotating())
        assert statuses[-1] == 429, f"{len(statuses)} wrong keys tried, none refused"
        assert len(statuses) <= 15  # 10 at once, then one a second
    finally:
        assert server.stop() == 0


def test_x_forwarded_for_is_believed_from_the_proxy_named_by_forwarded_allow_ips(
    tmp_path: Path,
) -> None:
    server = _server(tmp_path, "--forwarded-allow-ips", "127.0.0.1")
    try:
        # Each client behind the proxy has a limit of its own ...
        assert 429 not in _failed_logins(server, _rotating())
        # ... and one client is limited, whichever proxy connection it comes through.
        assert _failed_logins(server, ["198.51.100.7"] * ATTEMPTS)[-1] == 429
    finally:
        assert server.stop() == 0


def test_a_forwarded_allow_ips_that_names_no_address_is_refused(tmp_path: Path) -> None:
    keys = tmp_path / "keys.json"
    add_key(tmp_path, keys, "acme")
    done = run_cli(
        "--data-dir",
        str(tmp_path / "data"),
        "serve",
        "--port",
        "0",
        "--keys-file",
        str(keys),
        "--forwarded-allow-ips",
        "127.0.0.1,proxy.example",
        cwd=tmp_path,
    )
    assert done.returncode == 2, done
    assert "'proxy.example' is not an IP address or network" in done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "data").exists()
