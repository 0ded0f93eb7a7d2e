"""SIGTERM and SIGINT to ``memoryos serve`` (with and without ``--mcp``), SIGTERM to
``memoryos mcp`` (stdio), real signals to real processes: no new request is taken, the requests in
flight are answered, the memory system is closed (a snapshot after every user's last turn,
the data directory released) and the exit code is 0."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from srvutil import CONFIG_TOML, Server, add_key, start_server
from stopcheck import (
    WAIT_S,
    Lines,
    assert_closed_cleanly,
    assert_reopens_with,
    kill_if_running,
    wait_exit,
)
from waiting import wait_until

from memoryos_actors.server.tenancy import internal_id

_GATEWAY_TESTS = Path(__file__).resolve().parents[1] / "gateway"
# Each command here is stopped by one of the two signals, not by both: they take one path
# (``StopSignals`` owns both, with one handler; only ``chat`` and ``ingest`` exit with
# another code after SIGINT, and tests/cli/test_cli_stop_signals.py sends ``ingest`` each
# signal). ``serve`` gets SIGINT with a request in flight and SIGTERM in the other two of
# its tests; ``mcp`` over stdio gets SIGTERM with a call in flight.


class HeldLLM:
    """A fake OpenAI-compatible provider on 127.0.0.1 whose chat replies wait for
    :meth:`release` (every other prompt gets its default answer at once)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        if importlib.util.find_spec("litellm") is None:  # the child process imports it
            pytest.skip("litellm is not installed")
        monkeypatch.syspath_prepend(str(_GATEWAY_TESTS))
        from fakeserver import FakeOpenAIServer  # type: ignore[import-not-found]

        self.arrived = threading.Event()
        self._release = threading.Event()
        self.server = FakeOpenAIServer()
        self.server.state.responder = self._answer

    def _answer(self, kind: str, _payload: dict[str, Any]) -> dict[str, Any] | None:
        if kind != "chat_reply":
            return None
        self.arrived.set()
        self._release.wait(WAIT_S)
        return {"reply": "Your kite is red."}

    def release(self) -> None:
        self._release.set()

    def config_toml(self) -> str:
        return CONFIG_TOML + (
            f'llm_backend = "litellm"\nllm_model = "openai/fake-model"\n'
            f'llm_base_url = "{self.server.base_url}"\n'
        )


@pytest.fixture
def held_llm(monkeypatch: pytest.MonkeyPatch) -> Iterator[HeldLLM]:
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    monkeypatch.setenv("OPENAI_API_KEY", "not-needed")
    llm = HeldLLM(monkeypatch)
    llm.server.start()
    try:
        yield llm
    finally:
        llm.release()
        llm.server.stop()


def _refused(server: Server) -> bool:
    try:
        with server.client() as c:
            c.get("/healthz")
    except httpx.TransportError:
        return True
    return False


def _post_turns(server: Server, key: str, users: list[str], per_user: int) -> None:
    with server.client(key) as c:
        for n in range(per_user):
            for user in users:
                r = c.post(
                    f"/v1/users/{user}/turns",
                    json={"query": f"turn {n}: I fly kites", "response": "Nice."},
                )
                assert r.status_code == 201, r.text


def test_serve_answers_the_request_in_flight_then_closes_the_memory_system_on_sigint(
    tmp_path: Path,
    held_llm: HeldLLM,
) -> None:
    (tmp_path / "config.toml").write_text(held_llm.config_toml(), encoding="utf-8")
    keys = tmp_path / "keys.json"
    key = add_key(tmp_path, keys, "acme")
    server = start_server(tmp_path, tmp_path / "data", keys, "--skip-provider-check")
    users = ["u0", "u1", "u2"]
    answer: dict[str, httpx.Response] = {}

    def chat() -> None:
        with server.client(key) as c:
            answer["r"] = c.post("/v1/users/u0/chat", json={"query": "My kite's colour?"})

    asker = threading.Thread(target=chat)
    try:
        _post_turns(server, key, users, 3)
        asker.start()
        assert held_llm.arrived.wait(WAIT_S), server.log_text()
        server.proc.send_signal(signal.SIGINT)
        # The listening socket is closed (so the signal was taken in) while the request
        # in flight still waits for its reply.
        wait_until(lambda: _refused(server), "refusal of new connections", WAIT_S)
        held_llm.release()
        asker.join(WAIT_S)
        code = wait_exit(server.proc)
    finally:
        held_llm.release()
        server.stop(signal.SIGKILL)
        if asker.is_alive():
            asker.join(WAIT_S)
    assert answer["r"].status_code == 200 and answer["r"].json()["reply"] == "Your kite is red.", (
        answer["r"].text
    )
    assert code == 0, server.log_text()
    assert "Traceback" not in server.log_text()
    ids = [internal_id("acme", u) for u in users]
    assert_closed_cleanly(tmp_path / "data", ids)
    assert_reopens_with(tmp_path / "data", {ids[0]: 4, ids[1]: 3, ids[2]: 3})


def test_serve_with_mcp_closes_the_memory_system_on_sigterm_with_a_client_connected(
    tmp_path: Path,
) -> None:
    pytest.importorskip("mcp")
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    keys = tmp_path / "keys.json"
    key = add_key(tmp_path, keys, "acme")
    server = start_server(tmp_path, tmp_path / "data", keys, "--mcp")
    users = ["ann", "bob", "cy"]
    codes: list[int] = []

    async def session() -> None:
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=60.0)
        async with Client(
            streamable_http_client(f"{server.base_url}/mcp", http_client=http)
        ) as client:
            for n in range(2):
                for user in users:
                    result = await client.call_tool(
                        "add_turn",
                        {"user_id": user, "query": f"turn {n}: I fly kites", "response": "Nice."},
                    )
                    assert not result.is_error, result.content
            server.proc.send_signal(signal.SIGTERM)  # the session is still open
            codes.append(await asyncio.to_thread(wait_exit, server.proc))

    try:
        try:
            asyncio.run(session())
        except BaseException:
            if not codes:  # leaving the session after the server is gone may fail
                raise
    finally:
        server.stop(signal.SIGKILL)
    assert codes == [0], server.log_text()
    assert "Traceback" not in server.log_text()
    ids = [internal_id("acme", u) for u in users]
    assert_closed_cleanly(tmp_path / "data", ids)
    assert_reopens_with(tmp_path / "data", dict.fromkeys(ids, 2))


def _rpc(proc: subprocess.Popen[str], msg: dict[str, Any]) -> None:
    proc.stdin.write(json.dumps(msg) + "\n")  # type: ignore[union-attr]
    proc.stdin.flush()  # type: ignore[union-attr]


def _answers(lines: list[str]) -> dict[Any, dict[str, Any]]:
    msgs = [json.loads(line) for line in lines if line.strip()]
    return {m["id"]: m for m in msgs if "id" in m and ("result" in m or "error" in m)}


def _call(proc: subprocess.Popen[str], rid: int, tool: str, **arguments: Any) -> None:
    _rpc(
        proc,
        {
            "jsonrpc": "2.0",
            "id": rid,
            "method": "tools/call",
            "params": {"name": tool, "arguments": arguments},
        },
    )


def test_mcp_over_stdio_answers_the_call_in_flight_refuses_new_ones_and_closes_on_sigterm(
    tmp_path: Path,
    held_llm: HeldLLM,
) -> None:
    pytest.importorskip("mcp")
    config = tmp_path / "config.toml"
    config.write_text(held_llm.config_toml(), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORYOS_")}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "memoryos_actors",
            "--data-dir",
            str(tmp_path / "data"),
            "--config",
            str(config),
            "mcp",
            "--tenant",
            "acme",
            "--skip-provider-check",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=tmp_path,
    )
    out, err = Lines(proc.stdout), Lines(proc.stderr)  # type: ignore[arg-type]
    users = ["ann", "bob"]
    try:
        _rpc(
            proc,
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {},
                    "clientInfo": {"name": "test", "version": "1"},
                },
            },
        )
        out.wait_for(lambda lines: 1 in _answers(lines), "the initialize answer", proc)
        _rpc(proc, {"jsonrpc": "2.0", "method": "notifications/initialized"})
        for n, user in enumerate(users * 2):
            _call(
                proc,
                10 + n,
                "add_turn",
                user_id=user,
                query=f"turn {n}: I fly kites",
                response="Nice.",
            )
        out.wait_for(
            lambda lines: {10, 11, 12, 13} <= set(_answers(lines)), "add_turn answers", proc
        )
        _call(proc, 2, "chat", user_id="ann", query="What colour is my kite?")
        assert held_llm.arrived.wait(WAIT_S), err.text
        proc.send_signal(signal.SIGTERM)
        err.wait_for(lambda lines: any("stopping" in ln for ln in lines), "the stop notice", proc)
        _call(proc, 3, "list_users")  # after the signal: refused, never run
        out.wait_for(lambda lines: 3 in _answers(lines), "an answer to the late call", proc)
        held_llm.release()
        code = wait_exit(proc)
    finally:
        held_llm.release()
        kill_if_running(proc, out, err)
    answers = _answers(out.lines)
    assert all(
        "result" in answers[i] and not answers[i]["result"].get("isError") for i in (10, 11, 12, 13)
    ), answers
    late = answers[3]
    assert "error" in late and "stopping" in late["error"]["message"], late
    in_flight = answers[2]
    assert "result" in in_flight and not in_flight["result"].get("isError"), in_flight
    assert "Your kite is red." in json.dumps(in_flight["result"])
    assert code == 0, err.text
    assert "Traceback" not in err.text
    ids = [internal_id("acme", u) for u in users]
    assert_closed_cleanly(tmp_path / "data", ids)
    assert_reopens_with(tmp_path / "data", {ids[0]: 3, ids[1]: 2})


def test_a_second_sigterm_stops_waiting_for_the_request_in_flight_but_still_closes(
    tmp_path: Path,
    held_llm: HeldLLM,
) -> None:
    (tmp_path / "config.toml").write_text(held_llm.config_toml(), encoding="utf-8")
    keys = tmp_path / "keys.json"
    key = add_key(tmp_path, keys, "acme")
    server = start_server(tmp_path, tmp_path / "data", keys, "--skip-provider-check")
    users = ["u0", "u1", "u2"]

    def chat() -> None:
        with server.client(key) as c:
            try:
                c.post("/v1/users/u0/chat", json={"query": "My kite's colour?"})
            except httpx.TransportError:
                pass  # given up by the second signal: the connection goes away unanswered

    asker = threading.Thread(target=chat)
    try:
        _post_turns(server, key, users, 3)
        asker.start()
        assert held_llm.arrived.wait(WAIT_S), server.log_text()
        server.proc.send_signal(signal.SIGTERM)
        wait_until(lambda: _refused(server), "refusal of new connections", WAIT_S)
        server.proc.send_signal(signal.SIGTERM)
        wait_until(
            lambda: "no longer waiting" in server.log_text(), "the second stop notice", WAIT_S
        )
        # The reply comes only now: closing waits for the memory system's own call in
        # flight (within --shutdown-timeout), never for the HTTP request given up.
        held_llm.release()
        code = wait_exit(server.proc)
    finally:
        held_llm.release()
        server.stop(signal.SIGKILL)
        asker.join(WAIT_S)
    assert code == 0, server.log_text()
    assert "Traceback" not in server.log_text()
    ids = [internal_id("acme", u) for u in users]
    assert_closed_cleanly(tmp_path / "data", ids)
    assert_reopens_with(tmp_path / "data", {ids[1]: 3, ids[2]: 3})


def test_mcp_over_stdio_on_a_locked_data_directory_exits_2_without_waiting_for_stdin(
    tmp_path: Path,
) -> None:
    pytest.importorskip("mcp")
    from memoryos_actors import MemoryOS

    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORYOS_")}
    with MemoryOS.open(tmp_path / "data"):  # holds the data directory's lock
        proc = subprocess.Popen(
            [sys.executable, "-m", "memoryos_actors", "--data-dir", str(tmp_path / "data"), "mcp"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            cwd=tmp_path,
        )
        out, err = Lines(proc.stdout), Lines(proc.stderr)  # type: ignore[arg-type]
        try:
            code = wait_exit(proc)  # stdin stays open, as a client keeps it
        finally:
            kill_if_running(proc, out, err)
    assert code == 2, err.text
    assert "DataDirLocked" in err.text and "Traceback" not in err.text


def test_sigusr1_prints_every_threads_stack_and_the_server_goes_on(tmp_path: Path) -> None:
    # What an operator (and a test whose stop takes too long) reads to see what it waits for.
    keys = tmp_path / "keys.json"
    key = add_key(tmp_path, keys, "acme")
    server = start_server(tmp_path, tmp_path / "data", keys)
    try:
        _post_turns(server, key, ["u0"], 2)
        server.proc.send_signal(signal.SIGUSR1)
        # Every thread: the main one (handling the signal) and the actors' among the others.
        wait_until(
            lambda: "Current thread 0x" in (t := server.log_text()) and t.count("Thread 0x") > 3,
            "the stack dump",
            WAIT_S,
        )
        _post_turns(server, key, ["u0"], 1)  # still serving
        assert server.stop() == 0
    finally:
        server.stop(signal.SIGKILL)
