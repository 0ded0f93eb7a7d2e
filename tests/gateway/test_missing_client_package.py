"""A client path whose package is not installed is a configuration error, refused at
start in one line (#46 item 2), never an outage answered by the offline fallback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from memoryos_actors import MemoryConfig, MemoryOS
from memoryos_actors.errors import ConfigError

HTTP_PATH = dict(
    llm_backend="litellm", llm_model="openai/some-model", llm_base_url="http://127.0.0.1:9/v1"
)


def test_the_http_path_without_aiohttp_refuses_to_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "aiohttp", None)  # as if the 'llm' extra were missing
    with pytest.raises(ConfigError, match=r"needs the 'llm' extra \(aiohttp is missing\)"):
        MemoryOS.open(tmp_path, MemoryConfig(**HTTP_PATH))


def test_the_litellm_path_without_litellm_refuses_to_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "litellm", None)
    config = MemoryConfig(llm_backend="litellm", llm_model="ollama/llama3")
    with pytest.raises(ConfigError, match=r"needs the 'llm' extra \(litellm is missing\)"):
        MemoryOS.open(tmp_path, config)


@pytest.mark.parametrize("command", ["serve", "chat"])
def test_a_command_on_the_http_path_without_aiohttp_stops_at_start(
    tmp_path: Path, command: str
) -> None:
    (tmp_path / "config.toml").write_text(
        "".join(f'{k} = "{v}"\n' for k, v in HTTP_PATH.items()), encoding="utf-8"
    )
    argv = ["--data-dir", str(tmp_path / "d"), "--config", str(tmp_path / "config.toml"), command]
    argv += ["--port", "0"] if command == "serve" else ["--user", "ann"]
    script = (
        "import sys; sys.modules['aiohttp'] = None\n"
        "from memoryos_actors.cli.app import main\n"
        f"sys.exit(main({argv!r}))\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORYOS_")}
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "aiohttp is missing" in done.stderr
    assert "Traceback" not in done.stderr
