"""SIGTERM and SIGINT to ``memoryos chat`` and ``memoryos ingest``, real signals to real
processes: the work in flight is finished, the memory system is closed (a snapshot after
every user's last turn, the data directory released) and the exit code is 0, or 130 after
SIGINT."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from stopcheck import (
    Lines,
    assert_closed_cleanly,
    assert_reopens_with,
    kill_if_running,
    stop_and_wait,
    wait_exit,
)

_GATEWAY_TESTS = Path(__file__).resolve().parents[1] / "gateway"


def _start(
    tmp_path: Path,
    *args: str,
    stdin: int | None = subprocess.PIPE,
    env: dict[str, str] | None = None,
) -> subprocess.Popen[str]:
    config = tmp_path / "config.toml"
    if not config.exists():
        config.write_text('log_level = "error"\n', encoding="utf-8")
    base = {k: v for k, v in os.environ.items() if not k.startswith("MEMORYOS_")}
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "memoryos_actors",
            "--data-dir",
            str(tmp_path / "data"),
            "--config",
            str(config),
            *args,
        ],
        stdin=stdin,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**base, "COLUMNS": "100", **(env or {})},
        cwd=tmp_path,
    )


def _replies(lines: list[str]) -> int:
    return sum(line.startswith("assistant:") for line in lines)


def test_sigterm_at_the_chat_prompt_closes_the_memory_system_and_exits_0(
    tmp_path: Path,
) -> None:
    proc = _start(tmp_path, "chat", "--user", "ann")
    out, err = Lines(proc.stdout), Lines(proc.stderr)  # type: ignore[arg-type]
    try:
        for n in range(3):
            proc.stdin.write(f"My kite number {n} is red\n")  # type: ignore[union-attr]
        proc.stdin.flush()  # type: ignore[union-attr]
        out.wait_for(lambda lines: _replies(lines) == 3, "three replies", proc)
        # stdin stays open: the command waits for the next line when the signal comes.
        assert stop_and_wait(proc, signal.SIGTERM) == 0, err.text
    finally:
        kill_if_running(proc, out, err)
    assert "Traceback" not in err.text
    assert_closed_cleanly(tmp_path / "data", ["ann"])
    assert_reopens_with(tmp_path / "data", {"ann": 3})


def test_sigint_during_a_chat_reply_finishes_prints_and_stores_it(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    if importlib.util.find_spec("litellm") is None:  # the child process imports it
        pytest.skip("litellm is not installed")
    monkeypatch.syspath_prepend(str(_GATEWAY_TESTS))
    from fakeserver import FakeOpenAIServer  # type: ignore[import-not-found]

    arrived, release = threading.Event(), threading.Event()

    def held_reply(kind: str, _payload: dict[str, Any]) -> dict[str, Any] | None:
        if kind != "chat_reply":
            return None  # the default answer
        arrived.set()
        release.wait(60)
        return {"reply": "Your kite is red."}

    with FakeOpenAIServer() as llm:
        llm.state.responder = held_reply
        proc = _start(
            tmp_path,
            "chat",
            "--user",
            "ann",
            "--model",
            "openai/fake-model",
            "--base-url",
            llm.base_url,
            # The start-up check would be the first request this server holds.
            "--skip-provider-check",
            env={"LITELLM_LOCAL_MODEL_COST_MAP": "True", "OPENAI_API_KEY": "x"},
        )
        out, err = Lines(proc.stdout), Lines(proc.stderr)  # type: ignore[arg-type]
        try:
            proc.stdin.write("What colour is my kite?\n")  # type: ignore[union-attr]
            proc.stdin.flush()  # type: ignore[union-attr]
            assert arrived.wait(60), err.text
            proc.send_signal(signal.SIGINT)
            # Released only once the command has taken the signal in.
            err.wait_for(
                lambda lines: any("SIGINT: stopping" in ln for ln in lines), "the stop notice", proc
            )
        finally:
            release.set()
        try:
            assert wait_exit(proc) == 130, err.text
        finally:
            kill_if_running(proc, out, err)
    assert "assistant: Your kite is red." in out.text, out.text + err.text
    assert "Traceback" not in err.text
    assert_closed_cleanly(tmp_path / "data", ["ann"])
    assert_reopens_with(tmp_path / "data", {"ann": 1})


_STOPPED = re.compile(
    r"ingest stopped by (SIG\w+): (\d+) of (\d+) turns stored; the first "
    r"turn not stored is (.+):(\d+)"
)


@pytest.mark.parametrize(
    ("sig", "code"), [(signal.SIGTERM, 0), (signal.SIGINT, 130)], ids=["SIGTERM", "SIGINT"]
)
def test_a_stop_signal_mid_ingest_keeps_the_turns_stored_and_says_where_it_stopped(
    tmp_path: Path,
    sig: int,
    code: int,
) -> None:
    users = [f"u{n}" for n in range(5)]
    # Stopped after the first progress line (5%): the other 950 turns keep the command busy
    # well past the signal (a run that ended first fails: no stop notice).
    total = 1000
    path = tmp_path / "turns.jsonl"
    path.write_text(
        "".join(
            json.dumps(
                {
                    "user_id": users[n % 5],
                    "query": f"question {n} about kites",
                    "response": f"answer {n}",
                }
            )
            + "\n"
            for n in range(total)
        ),
        encoding="utf-8",
    )
    proc = _start(tmp_path, "ingest", str(path), stdin=subprocess.DEVNULL)
    out, err = Lines(proc.stdout), Lines(proc.stderr)  # type: ignore[arg-type]
    try:
        # Without a terminal the command reports progress on stderr every 5% (50 turns).
        err.wait_for(
            lambda lines: any("turns stored" in ln for ln in lines), "a progress line", proc
        )
        assert stop_and_wait(proc, sig) == code, err.text
    finally:
        kill_if_running(proc, out, err)
    assert "Traceback" not in err.text
    found = _STOPPED.search(" ".join(err.text.split()))
    assert found is not None, err.text
    name, stored, of, where, line = found.groups()
    stored_n = int(stored)
    assert name == signal.Signals(sig).name and int(of) == total
    assert (
        total // 20 <= stored_n < total and int(line) == stored_n + 1 and where.endswith(path.name)
    )
    assert_closed_cleanly(tmp_path / "data", users)
    # The first `stored` turns of the file, no more and no fewer.
    assert_reopens_with(
        tmp_path / "data", {u: len(range(n, stored_n, 5)) for n, u in enumerate(users)}
    )
