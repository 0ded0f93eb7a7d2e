"""Every install hint is true (#46 item 1): memoryos-actors has no package-index entry, so
no hint may name it by its distribution name (``pip install "memoryos-actors[llm]"`` would
find someone else's package, or nothing), and every extra a hint names exists in
pyproject.toml. The code, the benchmarks, the README, the docs pages, the examples and the
container files are read as text; the hints the code builds are checked as printed."""

from __future__ import annotations

import ast
import re
import shlex
import tomllib
from pathlib import Path

import pytest

from memoryos_actors.prerequisites import EXTRAS, install_hint

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT_EXTRAS = set(
    tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"][
        "optional-dependencies"
    ]
)

#: An install command and the rest of its line.
_PIP = re.compile(r"pip install\b([^\n]*)")
#: The distribution's name as a requirement (``memoryos-actors``, ``memoryos_actors[x]``),
#: not as part of a path (``dist/memoryos_actors-0.1.0-...whl``) or a longer name.
_BY_NAME = re.compile(r"(?<![\w./-])memoryos[-_]actors(?![\w.-])")


def _scanned() -> list[Path]:
    files = [ROOT / "README.md", ROOT / ".ci" / "run"]
    for folder, patterns in (
        ("memoryos_actors", ("*.py", "*.html", "*.js")),
        ("supervisor", ("*.py",)),
        ("bench", ("*.py", "*.md")),
        ("docs", ("*.md", "*.py")),
        ("examples", ("*",)),
    ):
        for pattern in patterns:
            files.extend((ROOT / folder).rglob(pattern))
    files.extend(p for p in (ROOT / "Dockerfile", ROOT / "mkdocs.yml") if p.exists())
    return sorted(p for p in files if p.is_file() and "__pycache__" not in p.parts)


def _requirements(rest: str) -> list[str]:
    """The requirement words of the arguments ``rest`` of one ``pip install``, up to the end
    of the command (``&&``, ``;``, a closing backtick or parenthesis, a comment) or the
    prose after it (`` in the source checkout``)."""
    rest = re.split(r"&&|;|`|\)(?!\")|\||\s(?:in|from|or|then|and)\s", rest, maxsplit=1)[0]
    try:
        words = shlex.split(rest, comments=True, posix=True)
    except ValueError:  # an unbalanced quote: a hint split over two string literals
        words = rest.split()
    return [w.strip("'\"") for w in words if w and not w.startswith("-")]


def _problems(path: Path) -> list[str]:
    text = path.read_text(encoding="utf-8", errors="replace")
    found = []
    for match in _PIP.finditer(text):
        line = text.count("\n", 0, match.start()) + 1
        for word in _requirements(match.group(1)):
            if _BY_NAME.search(word) and ".whl" not in word:
                found.append(f"{path.relative_to(ROOT)}:{line}: by index name: {word}")
            bracket = re.search(r"\[([^\]{}]*)\]", word)
            looks_ours = word.startswith((".", "dist/")) or "memoryos" in word
            if bracket and looks_ours:
                for extra in bracket.group(1).split(","):
                    if extra.strip() not in PYPROJECT_EXTRAS:
                        found.append(f"{path.relative_to(ROOT)}:{line}: no extra {extra!r}")
    for match in re.finditer(r"memoryos[-_]actors\[", text):
        line = text.count("\n", 0, match.start()) + 1
        found.append(f"{path.relative_to(ROOT)}:{line}: an extra of the index name")
    return found


def test_the_extras_the_code_knows_are_pyprojects() -> None:
    assert set(EXTRAS) == PYPROJECT_EXTRAS


def test_no_install_hint_names_the_package_by_index_name_or_a_missing_extra() -> None:
    problems = [p for path in _scanned() for p in _problems(path)]
    assert problems == []


def test_the_scan_sees_the_hints_it_must_judge() -> None:
    """The scan reads the files where hints live, and finds a wrong one."""
    names = {p.relative_to(ROOT).as_posix() for p in _scanned()}
    assert {"README.md", "memoryos_actors/prerequisites.py", "examples/llamaindex_memory.py"} <= (
        names
    )
    bad = ROOT / "tests" / "docs" / "_bad_hint.md"
    try:
        bad.write_text(
            'pip install "memoryos-actors[llm]"\npip install ".[nope]"\n'
            "pip install -e memoryos_actors\n",
            encoding="utf-8",
        )
        assert len(_problems(bad)) == 4  # by name twice (once as an extra), a missing extra
    finally:
        bad.unlink()


def _install_hint_calls() -> list[tuple[str, list[str]]]:
    """Every ``install_hint(...)`` call in the package with literal extras."""
    calls = []
    for path in (ROOT / "memoryos_actors").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "install_hint":
                literal = [a.value for a in node.args if isinstance(a, ast.Constant)]
                calls.append((f"{path.name}:{node.lineno}", literal))
    return calls


def test_every_install_hint_call_names_an_existing_extra() -> None:
    calls = _install_hint_calls()
    assert len(calls) >= 6
    for where, extras in calls:
        assert set(extras) <= PYPROJECT_EXTRAS, where


@pytest.mark.parametrize("extras", [(), ("llm",), ("server", "mcp")])
def test_install_hint_says_checkout_or_wheel_never_the_index(extras: tuple[str, ...]) -> None:
    hint = install_hint(*extras)
    spec = f"[{','.join(extras)}]" if extras else ""
    assert f'pip install ".{spec}" in the memoryos-actors source checkout' in hint
    assert f'-py3-none-any.whl{spec}"' in hint
    assert not _BY_NAME.search(hint.replace("memoryos-actors source", ""))


def test_install_hint_refuses_an_extra_that_does_not_exist() -> None:
    with pytest.raises(ValueError, match="no such extra: nope"):
        install_hint("nope")


def test_serve_without_the_server_extra_prints_a_true_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    from memoryos_actors.cli import serve
    from memoryos_actors.errors import InvalidInput

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda n, *a: None if n == "uvicorn" else real(n, *a)
    )
    with pytest.raises(InvalidInput) as caught:
        serve._need("server", "fastapi", "uvicorn")
    message = str(caught.value)
    assert "needs uvicorn (the 'server' extra)" in message
    assert 'pip install ".[server]"' in message and "memoryos-actors[" not in message
