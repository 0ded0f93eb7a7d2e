"""Prerequisites that are not Python packages (#46 item 4): on a system without ``fcntl``
(Windows) or without a working hnswlib (no compiler when it was built), the first import
that needs it fails with one line saying what is missing and how to get it, and
``memoryos`` prints that line instead of a traceback. Each case runs in a subprocess whose
import system refuses the module, as it would be missing there."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

_REPO = Path(__file__).resolve().parents[2]

#: Makes ``import <name>`` fail as on a system without it, then runs ``code``.
_BLOCKER = """
import sys
class _Missing:
    def find_spec(self, name, path=None, target=None):
        if name == {name!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None
sys.modules.pop({name!r}, None)
sys.meta_path.insert(0, _Missing())
{code}
"""


def _without(module: str, code: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(_REPO), "COLUMNS": "400"}
    env.pop("MEMORYOS_DATA_DIR", None)
    return subprocess.run(
        [sys.executable, "-c", _BLOCKER.format(name=module, code=code)],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        input="",
        timeout=120,
    )


_CLI = "from memoryos_actors.cli import main\nraise SystemExit(main({argv!r}))"


def test_library_without_fcntl_says_posix_only_and_names_wsl(tmp_path: Path) -> None:
    ran = _without("fcntl", "from memoryos_actors import MemoryOS", tmp_path)
    assert ran.returncode == 1
    last = ran.stderr.strip().splitlines()[-1]
    assert last.startswith("memoryos_actors.prerequisites.MissingPrerequisite: ")
    assert "fcntl" in last and "Windows" in last and "WSL" in last


def test_cli_without_fcntl_prints_one_line_naming_wsl(tmp_path: Path) -> None:
    ran = _without("fcntl", _CLI.format(argv=["chat", "--user", "ann"]), tmp_path)
    assert ran.returncode == 2, ran.stderr
    assert "Traceback" not in ran.stderr
    lines = ran.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("memoryos: error: memoryos-actors runs on")
    assert "WSL" in lines[0]


@pytest.mark.parametrize("argv", [["demo"], ["chat", "--user", "ann"]])
def test_cli_without_hnswlib_says_a_compiler_and_headers_are_needed(
    tmp_path: Path, argv: list[str]
) -> None:
    ran = _without("hnswlib", _CLI.format(argv=argv), tmp_path)
    assert ran.returncode == 2, ran.stderr
    assert "Traceback" not in ran.stderr
    line = ran.stderr.strip().splitlines()[-1]
    assert line.startswith("memoryos: error: hnswlib cannot be imported")
    assert "C++ compiler" in line and "Python headers" in line
    assert "build-essential python3-dev" in line and "xcode-select --install" in line
    assert 'pip install "."' in line  # how to install again: from the checkout, no index name


def test_library_without_hnswlib_raises_an_import_error_with_the_fix(tmp_path: Path) -> None:
    code = (
        "from memoryos_actors.prerequisites import MissingPrerequisite\n"
        "try:\n    import memoryos_actors.tiers.mtm\n"
        "except ImportError as exc:\n"
        "    assert isinstance(exc, MissingPrerequisite), type(exc)\n"
        "    print(exc)\n"
    )
    ran = _without("hnswlib", code, tmp_path)
    assert ran.returncode == 0, ran.stderr
    assert "C++ compiler" in ran.stdout and "xcode-select" in ran.stdout
