"""Run the ``memoryos`` command in the test process, through its entry function.

A ``memoryos`` subprocess costs about 2 s of start-up (the interpreter, then numpy, the
memory system and rich imported anew), and that start-up is not what most command tests
check: they check what a command prints, stores and exits with. :func:`run_cli` calls
:func:`memoryos_actors.cli.main` with the arguments, stdin, working directory and
environment a subprocess would get, and hands back its exit code and output in the shape
of :class:`subprocess.CompletedProcess`. What only a real process shows (the interpreter's
exit, signals, imports at start-up, a terminal) stays in subprocess tests.

The command's global side effects are undone on the way out: the structlog
configuration and the levels of the loggers the command quiets (the test session
configures logging once, and later tests capture log events), the environment, the
working directory and the standard streams.
"""

from __future__ import annotations

import io
import logging
import os
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import structlog

from memoryos_actors import logs
from memoryos_actors.cli import main

__all__ = ["Ran", "run_cli", "run_process"]

# The loggers `quiet_logging` sets a level on.
_QUIETED = ("pykka", "LiteLLM", "litellm", "httpx", "openai")


@dataclass(frozen=True)
class Ran:
    """What a command did: its exit code and what it wrote on stdout and stderr."""

    args: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str


def _stream() -> io.TextIOWrapper:
    # A text stream over bytes, as a process's stdout is: `export -` writes the file's
    # bytes to `sys.stdout.buffer`.
    return io.TextIOWrapper(io.BytesIO(), encoding="utf-8", write_through=True)


def _text(stream: io.TextIOWrapper) -> str:
    stream.flush()
    buffer = stream.buffer
    assert isinstance(buffer, io.BytesIO)
    return buffer.getvalue().decode("utf-8")


def run_cli(
    *args: str,
    data_dir: Path | None = None,
    stdin: str | None = None,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
) -> Ran:
    """Run ``memoryos [--data-dir DATA_DIR] ARGS...`` in this process and return what it did.

    ``stdin`` is the whole input (empty when None, as a subprocess given ``input=""``);
    ``cwd`` the working directory during the command; ``env`` variables set for it, on an
    environment without ``MEMORYOS_*`` variables and 100 columns wide.
    """
    argv = [*(["--data-dir", str(data_dir)] if data_dir is not None else []), *args]
    saved_env = dict(os.environ)
    saved_cwd = os.getcwd()
    saved_streams = (sys.stdin, sys.stdout, sys.stderr)
    saved_structlog = structlog.get_config()
    saved_levels = {name: logging.getLogger(name).level for name in _QUIETED}
    out, err = _stream(), _stream()
    try:
        for name in [n for n in os.environ if n.startswith("MEMORYOS_")]:
            del os.environ[name]
        os.environ["COLUMNS"] = "100"
        os.environ.update(env or {})
        if cwd is not None:
            os.chdir(cwd)
        sys.stdin = io.StringIO(stdin or "")
        sys.stdout, sys.stderr = out, err
        try:
            code = main(argv)
        except SystemExit as exc:  # argparse's --help, --version and usage errors
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        return Ran(tuple(argv), code, _text(out), _text(err))
    finally:
        sys.stdin, sys.stdout, sys.stderr = saved_streams
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
        logs._deferred = None  # a store-only command may leave its set-up pending
        structlog.reset_defaults()
        structlog.configure(**saved_structlog)
        for name, level in saved_levels.items():
            logging.getLogger(name).setLevel(level)


def run_process(
    *args: str,
    cwd: Path,
    env: Mapping[str, str] | None = None,
    drop: tuple[str, ...] = ("MEMORYOS_",),
    timeout: float = 120.0,
) -> subprocess.CompletedProcess[str]:
    """``memoryos ARGS`` as a real child process (this interpreter, ``-m memoryos_actors``)
    in ``cwd``, for what only a process shows: the test's environment without the
    variables starting with one of ``drop``, plus ``env``. ``timeout`` (seconds) only keeps
    a hang from stalling the suite."""
    child_env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
    child_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "memoryos_actors", *args],
        cwd=cwd,
        env=child_env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
