"""The ``memoryos`` command on a data directory a running server holds (issue #25): the
read commands read it, the write commands say where the server listens, the tenant option
names the users the server's keys see."""

from __future__ import annotations

import json
from pathlib import Path

from inprocess import Ran, run_cli
from srvutil import CONFIG_TOML, add_live_key, start_server


def _cli(
    root: Path, data: Path, *args: str, env: dict[str, str] | None = None, stdin: str = ""
) -> Ran:
    # In this process (see tests/inprocess.py): the server is the real process here.
    config = ("--config", str(root / "config.toml"))
    return run_cli(*config, *args, data_dir=data, cwd=root, env=env, stdin=stdin)


def _ok(proc: Ran) -> str:
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    return proc.stdout


def test_read_commands_work_and_write_commands_name_the_server_while_it_runs(
    tmp_path: Path,
) -> None:
    (tmp_path / "config.toml").write_text(CONFIG_TOML, encoding="utf-8")
    data = tmp_path / "data"
    keys = tmp_path / "keys.json"
    server = start_server(tmp_path, data, keys, "--mcp")
    try:
        key = add_live_key(server, tmp_path, "acme")
        with server.client(key) as c:
            r = c.post(
                "/v1/users/zoe/turns",
                json={"query": "My sister Ada lives in Oslo.", "response": "Noted: Ada, Oslo."},
            )
            assert r.status_code == 201, r.text
            assert "zoe" in c.get("/v1/users").text

        # The CLI names the users as the server does for the key's tenant.
        shown = _ok(_cli(tmp_path, data, "--tenant", "acme", "inspect", "zoe"))
        assert "Ada lives in Oslo" in shown
        listed = _ok(_cli(tmp_path, data, "memories", "zoe", env={"MEMORYOS_TENANT": "acme"}))
        assert "page:p1" in listed and "Oslo" in listed
        stats = json.loads(_ok(_cli(tmp_path, data, "--tenant", "acme", "stats")))
        assert stats["stored"]["users"] == 1 and stats["stored"]["turns"] == 1
        exported = json.loads(_ok(_cli(tmp_path, data, "--tenant", "acme", "export", "zoe", "-")))
        assert "Oslo" in json.dumps(exported)
        # Without the tenant the name misses, and the message says where it is.
        miss = _cli(tmp_path, data, "inspect", "zoe")
        assert miss.returncode == 2 and "tenant 'acme'" in miss.stderr
        assert "--tenant acme" in miss.stderr

        # Write commands are refused with one line naming the server's address.
        turns = tmp_path / "turns.jsonl"
        turns.write_text(
            json.dumps({"user_id": "zoe", "query": "hi", "response": "hello"}) + "\n",
            encoding="utf-8",
        )
        for args in (
            ("forget", "zoe", "--yes"),
            ("ingest", str(turns)),
            ("chat", "--user", "zoe"),
            ("mcp", "--skip-provider-check"),
        ):
            refused = _cli(tmp_path, data, "--tenant", "acme", *args, stdin="hello\n")
            assert refused.returncode != 0, args
            lines = refused.stderr.strip().splitlines()
            assert len(lines) == 1 and "Traceback" not in refused.stderr, refused.stderr
            assert server.base_url in lines[0], lines[0]
        with server.client(key) as c:  # nothing changed
            assert c.get("/v1/users/zoe/memories").json()["turns"] == 1
    finally:
        assert server.stop() == 0, server.log_text()
    # Stopped, the server no longer claims the directory, and the writes work again.
    assert not (data / "SERVER").exists()
    assert "forgot 'zoe'" in _ok(_cli(tmp_path, data, "--tenant", "acme", "forget", "zoe", "--yes"))
