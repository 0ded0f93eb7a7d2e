"""PyPI's ``supervisor`` (supervisord) shares our top-level package name: when it is the one
``import supervisor`` finds, ``import memoryos_actors`` fails at once with a message that
names the conflict and the way out, not later with ``cannot import name 'ChildKind'``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest


def _python(code: str, tmp_path: Path, first_on_path: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(first_on_path), env.get("PYTHONPATH", "")) if p
    )
    # cwd is tmp_path: `python -c` puts the working directory ahead of PYTHONPATH.
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture
def supervisord_first(tmp_path: Path) -> Path:
    """A stand-in for supervisord's ``supervisor`` package, in a folder put first on the
    path."""
    shadow = tmp_path / "shadow"
    (shadow / "supervisor").mkdir(parents=True)
    (shadow / "supervisor" / "__init__.py").write_text("# supervisord's package\n")
    return shadow


@pytest.mark.parametrize("import_supervisor_first", [False, True])
def test_importing_memoryos_actors_names_the_supervisor_conflict(
    tmp_path: Path, supervisord_first: Path, import_supervisor_first: bool
) -> None:
    code = ("import supervisor\n" if import_supervisor_first else "") + "import memoryos_actors"
    result = _python(code, tmp_path, supervisord_first)
    assert result.returncode != 0
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError:"), result.stderr
    assert str(supervisord_first / "supervisor" / "__init__.py") in last
    assert "PyPI's 'supervisor' (supervisord)" in last
    assert "virtual environment of its own" in last


def test_the_cli_refuses_to_start_with_the_conflict(
    tmp_path: Path, supervisord_first: Path
) -> None:
    result = _python(
        "from memoryos_actors.cli import main; main(['--help'])", tmp_path, supervisord_first
    )
    assert result.returncode != 0
    assert "(supervisord)" in result.stderr
    assert "ChildKind" not in result.stderr
