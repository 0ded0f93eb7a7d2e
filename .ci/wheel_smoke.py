"""CI's smoke run of the built wheel (#46 item 1), run by the Python of a fresh virtual
environment the wheel (with its ``server`` extra) was installed into, from a folder outside
the checkout: ``python wheel_smoke.py CHECKOUT``.

It checks what a user of the wheel would meet first, and what only the wheel can get
wrong: the package is imported from the environment, not the checkout; every file of the
two packages in the checkout (templates, CSS, scripts, ``py.typed``, the demo's script) is
in the wheel; ``memoryos demo`` runs offline; ``memoryos serve`` starts, answers
``/healthz``, stores a turn for a key, serves the memory page (logged in, its templates and
static files) and the API documentation (fastapi-offline's files). Standard library only.
"""

from __future__ import annotations

import http.cookiejar
import importlib.metadata
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

CHECKOUT = Path(sys.argv[1]).resolve()
HERE = Path.cwd()
BIN = Path(sys.executable).parent
PACKAGES = ("memoryos_actors", "supervisor")


def check(ok: bool, what: str) -> None:
    if not ok:
        raise SystemExit(f"wheel smoke: FAILED: {what}")
    print(f"wheel smoke: ok: {what}")


def checkout_files() -> set[str]:
    """The files of the two packages in the checkout (tracked by git when it is a git
    checkout), as paths relative to it."""
    try:
        out = subprocess.run(
            ["git", "-C", str(CHECKOUT), "ls-files", "--", *PACKAGES],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
    except (OSError, subprocess.CalledProcessError):
        out = [
            p.relative_to(CHECKOUT).as_posix()
            for pkg in PACKAGES
            for p in (CHECKOUT / pkg).rglob("*")
            if p.is_file() and "__pycache__" not in p.parts
        ]
    return set(out)


def check_installed_files() -> None:
    import memoryos_actors

    where = Path(memoryos_actors.__file__).resolve()
    check(CHECKOUT not in where.parents, f"memoryos_actors is imported from {where.parent}")
    dist = importlib.metadata.distribution("memoryos-actors")
    in_wheel = {str(f) for f in dist.files or ()}
    missing = sorted(checkout_files() - in_wheel)
    check(missing == [], f"every file of {', '.join(PACKAGES)} is in the wheel {missing}")


def run(*args: str, **kw: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "memoryos"), *args], capture_output=True, text=True, timeout=300, **kw
    )


class Client:
    def __init__(self, base: str) -> None:
        self.base = base
        self.opener = urllib.request.build_opener(
            urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar())
        )

    def call(self, method: str, path: str, body: object = None, **headers: str) -> tuple[int, str]:
        data = None
        if isinstance(body, dict) and headers.get("Content-Type") == "form":
            data = urllib.parse.urlencode(body).encode()
            headers["Content-Type"] = "application/x-www-form-urlencoded"
        elif body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        req = urllib.request.Request(self.base + path, data, headers, method=method)
        try:
            with self.opener.open(req, timeout=30) as resp:
                return resp.status, resp.read().decode("utf-8", "replace")
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode("utf-8", "replace")


def check_server(data: Path) -> None:
    keys = run("keys", "add", "--tenant", "smoke", "--data-dir", str(data))
    check(keys.returncode == 0, f"memoryos keys add {keys.stderr.strip()}")
    key = keys.stdout.splitlines()[0].strip()
    ready = HERE / "ready.json"
    server = subprocess.Popen(
        [str(BIN / "memoryos"), "serve", "--data-dir", str(data), "--port", "0"]
        + ["--ready-file", str(ready)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120
        while not ready.exists() and server.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        check(ready.exists(), "memoryos serve started")
        port = json.loads(ready.read_text())["port"]
        web = Client(f"http://127.0.0.1:{port}")
        check(web.call("GET", "/healthz")[0] == 200, "GET /healthz")
        auth = {"Authorization": f"Bearer {key}"}
        turn = {"query": "I keep bees in Lisbon", "response": "Noted."}
        code, _ = web.call("POST", "/v1/users/ann/turns", turn, **auth)
        check(code == 201, "POST /v1/users/ann/turns with the key")
        code, page = web.call("GET", "/ui/login")
        token = re.search(r'name="csrf" value="([^"]+)"', page)
        check(code == 200 and token is not None, "GET /ui/login (the login template)")
        assert token is not None
        form = {"key": key, "csrf": token.group(1)}
        code, page = web.call("POST", "/ui/login", form, **{"Content-Type": "form"})
        check(code == 200 and "ann" in page, "logged in, /ui/users lists ann")
        code, page = web.call("GET", "/ui/users/ann")
        check(code == 200 and "bees" in page, "GET /ui/users/ann (the user's page)")
        for asset in sorted(set(re.findall(r"/ui/static/[\w.-]+", page))):
            check(web.call("GET", asset)[0] == 200, f"GET {asset}")
        code, page = web.call("GET", "/docs")
        check(code == 200 and "swagger" in page.lower(), "GET /docs (fastapi-offline's files)")
        assets = sorted(set(re.findall(r"""['"](/docs/assets/[^'"]+)['"]""", page)))
        check(
            len(assets) >= 2 and all(web.call("GET", a)[0] == 200 for a in assets),
            f"GET the /docs assets {assets}",
        )
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            _, err = server.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            server.kill()
            _, err = server.communicate()
    check(server.returncode == 0, f"memoryos serve stopped on SIGTERM {err[-2000:]}")


def main() -> None:
    check(CHECKOUT not in HERE.parents and HERE != CHECKOUT, f"running outside it, in {HERE}")
    check_installed_files()
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORYOS_")}
    demo = run("demo", env=env)
    check(demo.returncode == 0 and "gateway: backend offline" in demo.stdout, "memoryos demo")
    check_server(HERE / "data")


if __name__ == "__main__":
    main()
