"""With ``--tenant``, the command line names users as the server does for that tenant's
keys, in what it prints and in the files it writes, not only in what it reads (issue #25:
one namespace). Every command runs in this process, through the entry function
(:mod:`inprocess`)."""

from __future__ import annotations

import json
from pathlib import Path

from inprocess import run_cli

from memoryos_actors.store.export import read_export

_REPO = Path(__file__).resolve().parents[2]


def _ok(*args: str, data: Path) -> str:
    done = run_cli(*args, data_dir=data, cwd=_REPO)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_inspect_and_export_name_the_user_by_the_tenants_id(tmp_path: Path) -> None:
    data = tmp_path / "data"
    turns = tmp_path / "t.jsonl"
    turns.write_text(
        json.dumps({"user_id": "zoe", "query": "I live in Lyon.", "response": "Lovely city."})
        + "\n",
        encoding="utf-8",
    )
    _ok("--tenant", "acme", "ingest", str(turns), data=data)

    state = json.loads(_ok("--tenant", "acme", "inspect", "zoe", "--json", data=data))
    assert state["user_id"] == "zoe" and state["turns"] == 1
    shown = _ok("--tenant", "acme", "inspect", "zoe", data=data)
    assert "user zoe" in shown and "acme:" not in shown

    for name in ("zoe.json", "zoe.bin"):  # JSON and msgpack exports alike
        _ok("--tenant", "acme", "export", "zoe", str(tmp_path / name), data=data)
        assert read_export(tmp_path / name)["user_id"] == "zoe"
        assert b"acme:" not in (tmp_path / name).read_bytes()
    piped = _ok("--tenant", "acme", "export", "zoe", "-", data=data)
    assert "acme:" not in piped and '"user_id": "zoe"' in piped

    # The file moves between tenants as the server's export would.
    _ok("--tenant", "beta", "import", str(tmp_path / "zoe.bin"), data=data)
    moved = json.loads(_ok("--tenant", "beta", "inspect", "zoe", "--json", data=data))
    assert moved["user_id"] == "zoe" and moved["turns"] == 1


def test_a_tenants_user_named_by_its_library_id_under_that_tenant_gets_the_right_hint(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    turns = tmp_path / "t.jsonl"
    turns.write_text(
        json.dumps({"user_id": "zoe", "query": "I live in Lyon.", "response": "Lovely city."})
        + "\n",
        encoding="utf-8",
    )
    _ok("--tenant", "acme", "ingest", str(turns), data=data)
    miss = run_cli(
        "--tenant", "acme", "inspect", "acme:zoe", data_dir=data, cwd=_REPO, env={"COLUMNS": "200"}
    )
    assert miss.returncode != 0
    # Not "drop --tenant": the user meant is acme's zoe, named 'zoe' under --tenant acme.
    assert "name it 'zoe'" in miss.stderr, miss.stderr
    assert "drop --tenant" not in miss.stderr, miss.stderr
