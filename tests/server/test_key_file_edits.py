"""A key file edited into something invalid is refused loudly, never served stale (#41,
item 9).

A running server that finds its key file malformed accepts no key at all (not the ones the
file held before: the edit may have been meant to remove one) and answers 503 naming the
problem, until the file is fixed. ``serve``, ``keys list`` and ``doctor`` refuse such a
file at once with one line.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from inprocess import run_cli
from srvutil import START_TIMEOUT_S, add_key, start_server
from waiting import wait_until

from memoryos_actors.server.keys import KeyStore

#: What a hand edit can leave (each replaces the whole "keys" list or the file).
BROKEN: dict[str, Any] = {
    "bad JSON": "{not json",
    "a key that is a number": {"keys": [5]},
    "version is not a number": {"version": "x"},
    "keys is a map": {"keys": {"a": 1}},
}


def _break(path: Path, how: Any) -> None:
    if isinstance(how, str):
        path.write_text(how, encoding="utf-8")
        return
    data = json.loads(path.read_text(encoding="utf-8"))
    data.update(how)
    path.write_text(json.dumps(data), encoding="utf-8")


@pytest.mark.parametrize("case", list(BROKEN))
def test_a_key_store_serves_no_key_from_a_file_edited_into_an_invalid_one(
    tmp_path: Path, case: str
) -> None:
    path = tmp_path / "keys.json"
    store = KeyStore(path)
    key, _ = store.add("acme")
    good = path.read_text(encoding="utf-8")
    assert store.lookup(key) is not None and store.problem is None
    _break(path, BROKEN[case])
    store._checked = -1e9  # noqa: SLF001 - skip the once-a-second stat throttle
    assert store.lookup(key) is None
    assert store.problem is not None and str(path) in store.problem
    assert "\n" not in store.problem
    path.write_text(good, encoding="utf-8")
    store._checked = -1e9  # noqa: SLF001
    assert store.lookup(key) is not None and store.problem is None


@pytest.mark.parametrize("case", list(BROKEN))
def test_serve_keys_list_and_doctor_refuse_an_invalid_key_file_in_one_line(
    tmp_path: Path, case: str
) -> None:
    keys = tmp_path / "keys.json"
    add_key(tmp_path, keys, "acme")
    _break(keys, BROKEN[case])
    for args in (
        ("keys", "list", "--keys-file", str(keys)),
        ("serve", "--keys-file", str(keys), "--port", "0"),
    ):
        ran = run_cli(*args, data_dir=tmp_path / "data", env={"MEMORYOS_LOG_LEVEL": "critical"})
        assert ran.returncode != 0, args
        assert "Traceback" not in ran.stderr + ran.stdout, args
        lines = [line for line in ran.stderr.splitlines() if line.strip()]
        assert len(lines) == 1 and "keys.json" in lines[0], (args, ran.stderr)
    ran = run_cli(
        "doctor",
        "--keys-file",
        str(keys),
        data_dir=tmp_path / "data",
        env={"MEMORYOS_LOG_LEVEL": "critical"},
    )
    assert "Traceback" not in ran.stderr + ran.stdout
    assert ran.returncode != 0
    assert any("key file" in line and "keys.json" in line for line in ran.stdout.splitlines())


def test_a_running_server_answers_503_while_its_key_file_is_invalid(tmp_path: Path) -> None:
    keys = tmp_path / "keys.json"
    key = add_key(tmp_path, keys, "acme")
    good = keys.read_text(encoding="utf-8")
    server = start_server(tmp_path, tmp_path / "data", keys)
    try:
        with server.client(key) as c:
            assert c.get("/v1/users").status_code == 200
            _break(keys, {"version": "x"})
            wait_until(
                lambda: c.get("/v1/users").status_code == 503,
                "the server to refuse every key",
                START_TIMEOUT_S,
                0.05,
            )
            answer = c.get("/v1/users")
            assert "key file" in answer.text and "version" in answer.text
            keys.write_text(good, encoding="utf-8")
            wait_until(
                lambda: c.get("/v1/users").status_code == 200,
                "the server to take the fixed file",
                START_TIMEOUT_S,
                0.05,
            )
        assert server.stop() == 0
        # One log line for the change, not one per request or per second.
        assert server.log_text().count("key_file_invalid") == 1
    finally:
        server.stop()
