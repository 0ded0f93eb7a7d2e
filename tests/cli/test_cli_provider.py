"""``memoryos doctor`` and the provider check of ``chat``, ``serve`` and ``mcp``, run as a
user runs them (subprocesses) against a real HTTP provider on 127.0.0.1 that answers 401,
404, 500 or nothing at all. The doctor's checks that reach no provider (and so import no
litellm into the test process) run in this process, through the entry function."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "gateway"))

from fakeserver import Action, FakeOpenAIServer, refused_url
from inprocess import run_cli

_REPO = Path(__file__).resolve().parents[2]
KEY_ENV = "FAKE_PROVIDER_CLI_KEY"  # not MEMORYOS_*: the CLI would refuse it as config
RIGHT_KEY = "sk-right-5b0c9e2d71fa"
WRONG_KEY = "sk-wrong-a8e3d6c4b219"


def _run(
    tmp_path: Path, *args: str, config: str | None = None, key: str | None = None, stdin: str = ""
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORYOS_") and k != KEY_ENV}
    env.update({"COLUMNS": "200", "PYTHONPATH": str(_REPO)})
    if key is not None:
        env[KEY_ENV] = key
    cmd = [sys.executable, "-m", "memoryos_actors", "--data-dir", str(tmp_path / "data")]
    if config is not None:
        path = tmp_path / "config.toml"
        path.write_text(config, encoding="utf-8")
        cmd += ["--config", str(path)]
    return subprocess.run(
        [*cmd, *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
        check=False,
    )


def _provider(url: str, model: str = "openai/fake-model") -> str:
    """A config file's text for ``model`` at ``url``, quick to give up."""
    return (
        f'llm_backend = "litellm"\nllm_model = "{model}"\nllm_base_url = "{url}"\n'
        f'llm_api_key_env = "{KEY_ENV}"\nllm_timeout_seconds = 1.0\nllm_max_retries = 0\n'
        'breaker_failure_threshold = 1\nlog_level = "error"\n'
    )


def _no_key_in(text: str) -> None:
    for key in (RIGHT_KEY, WRONG_KEY):
        assert key not in text and key[:5] not in text and key[-4:] not in text, text


@pytest.fixture
def keyed() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer(api_key=RIGHT_KEY) as srv:
        yield srv


# -- doctor -------------------------------------------------------------------------------------


def test_doctor_offline_prints_one_line_per_check_and_exits_0(tmp_path: Path) -> None:
    done = run_cli("doctor", data_dir=tmp_path / "data", cwd=tmp_path, env={"COLUMNS": "200"})
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert [line.split()[:2] for line in lines] == [
        ["ok", "llm"],
        ["ok", "embedder"],
        ["ok", "data"],
        ["skip", "key"],
    ]
    assert not (tmp_path / "data").exists()  # the doctor changes nothing


def test_doctor_passes_a_working_provider(tmp_path: Path, keyed: FakeOpenAIServer) -> None:
    done = _run(tmp_path, "doctor", config=_provider(keyed.base_url), key=RIGHT_KEY)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "ok    llm       litellm:openai/fake-model answered in" in done.stdout
    _no_key_in(done.stdout + done.stderr)


@pytest.mark.parametrize(
    "scenario, words",
    [
        ("401", ["rejected the API key", "Incorrect API key provided", f"${KEY_ENV}"]),
        ("404", ["`nope` does not exist", "check llm_model"]),
        ("500", ["is unavailable", "HTTP 500", "outage"]),
        ("hang", ["is unavailable", "timeout"]),
        ("refused", ["cannot reach", "llm_base_url"]),
    ],
)
def test_doctor_fails_a_broken_provider_with_exit_1_and_a_line_that_says_what_and_how(
    tmp_path: Path,
    scenario: str,
    words: list[str],
) -> None:
    with FakeOpenAIServer(
        api_key=RIGHT_KEY if scenario == "401" else None,
        models={"fake-model"} if scenario == "404" else None,
        default={"500": Action(status=500), "hang": Action(hang=True)}.get(scenario),
    ) as srv:
        url = refused_url() if scenario == "refused" else srv.base_url
        model = "openai/nope" if scenario == "404" else "openai/fake-model"
        done = _run(tmp_path, "doctor", config=_provider(url, model), key=WRONG_KEY)
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 4 and lines[0].startswith("fail  llm ")
    assert all(w in lines[0] for w in words), lines[0]
    assert [line.split()[0] for line in lines[1:]] == ["ok", "ok", "skip"]
    _no_key_in(done.stdout + done.stderr)


def test_doctor_fails_a_key_file_others_can_read(tmp_path: Path) -> None:
    keys = tmp_path / "keys.json"
    keys.write_text('{"format": "memoryos-actors/api-keys", "version": 1, "keys": []}')
    keys.chmod(0o644)
    done = run_cli(
        "doctor",
        "--keys-file",
        str(keys),
        data_dir=tmp_path / "data",
        cwd=tmp_path,
        env={"COLUMNS": "200"},
    )
    assert done.returncode == 1
    assert f"fail  key file  {keys} can be read by others (mode 0644): chmod 600" in done.stdout


# -- the start-up check of chat, serve and mcp ------------------------------------------------


def _one_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, stderr
    return lines[0]


def test_chat_refuses_to_start_without_the_key_and_says_how_to_fix_it(
    tmp_path: Path,
    keyed: FakeOpenAIServer,
) -> None:
    done = _run(
        tmp_path, "chat", "--user", "sam", config=_provider(keyed.base_url), stdin="hello\n"
    )
    assert done.returncode == 2 and done.stdout == ""
    line = _one_line(done.stderr)
    assert line == (
        f"memoryos: error: ProviderAuthError: LLM openai/fake-model: {KEY_ENV} "
        f"is not set: export {KEY_ENV}=<your key>, or remove llm_api_key_env "
        f"if the server at {keyed.base_url} needs no key"
    )
    assert keyed.chat_requests == 0 and not (tmp_path / "data").exists()


def test_chat_refuses_to_start_with_a_rejected_key(
    tmp_path: Path,
    keyed: FakeOpenAIServer,
) -> None:
    done = _run(
        tmp_path,
        "chat",
        "--user",
        "sam",
        config=_provider(keyed.base_url),
        key=WRONG_KEY,
        stdin="hello\n",
    )
    assert done.returncode == 2 and done.stdout == ""
    line = _one_line(done.stderr)
    assert line.startswith(
        "memoryos: error: ProviderAuthError: LLM openai/fake-model: the "
        "provider rejected the API key (HTTP 401: Incorrect API key"
    )
    _no_key_in(done.stderr)


def test_chat_with_the_check_skipped_fails_on_the_first_reply_not_with_a_stub(
    tmp_path: Path,
    keyed: FakeOpenAIServer,
) -> None:
    done = _run(
        tmp_path,
        "chat",
        "--user",
        "sam",
        "--skip-provider-check",
        config=_provider(keyed.base_url),
        key=WRONG_KEY,
        stdin="hello\n",
    )
    assert done.returncode == 2 and "assistant:" not in done.stdout
    assert "ProviderAuthError" in _one_line(done.stderr)


def test_chat_during_an_outage_starts_with_a_warning_and_marks_every_degraded_reply(
    tmp_path: Path,
) -> None:
    with FakeOpenAIServer(default=Action(status=500)) as srv:
        done = _run(
            tmp_path,
            "chat",
            "--user",
            "sam",
            config=_provider(srv.base_url),
            key=RIGHT_KEY,
            stdin="My dog is Rufus.\nWhat is my dog called?\n",
        )
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("assistant: ") == 2
    err = done.stderr.splitlines()
    assert err[0].startswith(
        "memoryos: warning: llm: litellm:openai/fake-model is unavailable (HTTP 500)"
    )
    degraded = [line for line in err if "degraded reply from the offline fallback" in line]
    assert len(degraded) == 2 and "HTTP 500" in degraded[0]
    assert "circuit breaker open" in degraded[1]


def test_chat_reports_each_degraded_reply_once_at_the_default_log_level(
    tmp_path: Path,
) -> None:
    # At log level "warning" the library's own chat.degraded event came on top of the
    # command's line: every degraded reply was reported twice (#46 item 7).
    with FakeOpenAIServer(default=Action(status=500)) as srv:
        config = _provider(srv.base_url).replace('log_level = "error"\n', "")
        done = _run(
            tmp_path,
            "chat",
            "--user",
            "sam",
            "--skip-provider-check",
            config=config,
            key=RIGHT_KEY,
            stdin="My dog is Rufus.\nWhat is my dog called?\n",
        )
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("assistant: ") == 2
    reports = [line for line in done.stderr.splitlines() if "degraded" in line]
    assert len(reports) == 2, done.stderr
    assert all(line.startswith("memoryos: degraded reply from") for line in reports), reports


@pytest.mark.parametrize("command", [["serve", "--port", "0"], ["mcp"]])
def test_serve_and_mcp_refuse_to_start_on_a_configuration_error(
    tmp_path: Path,
    keyed: FakeOpenAIServer,
    command: list[str],
) -> None:
    pytest.importorskip("mcp" if command[0] == "mcp" else "fastapi")
    done = _run(tmp_path, *command, config=_provider(keyed.base_url), key=WRONG_KEY)
    assert done.returncode == 2 and done.stdout == ""  # (mcp speaks its protocol on stdout)
    assert "ProviderAuthError" in _one_line(done.stderr)
    _no_key_in(done.stderr)


def test_chat_prints_the_providers_streamed_reply_and_stores_it(
    tmp_path: Path, keyed: FakeOpenAIServer
) -> None:
    pieces = ("Your kite ", "is red,\n", "and you fly it ", "on Sundays.")
    keyed.script_stream(Action(pieces=pieces))
    done = _run(
        tmp_path,
        "chat",
        "--user",
        "sam",
        config=_provider(keyed.base_url),
        key=RIGHT_KEY,
        stdin="What colour is my kite?\n",
    )
    assert done.returncode == 0, done.stderr
    assert f"assistant: {''.join(pieces)}\n" in done.stdout
    with keyed.state.lock:
        asked = [b for b in keyed.state.bodies if b.get("stream")]
    assert len(asked) == 1 and "response_format" not in asked[0]
    listed = _run(tmp_path, "memories", "sam", config=_provider(keyed.base_url), key=RIGHT_KEY)
    assert "Your kite is red," in listed.stdout, listed.stdout + listed.stderr
