"""The README's and the documentation's examples run as written, their tables match the
code, and the README keeps the two commands a fresh machine needs."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

import pytest

from memoryos_actors import MemoryConfig

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
TEXT = README.read_text(encoding="utf-8")
#: Every page the examples are taken from: the README and the documentation site's pages.
PAGES = [README, *sorted((ROOT / "docs").rglob("*.md"))]
BLOCKS = [
    (page.relative_to(ROOT).as_posix(), n, block)
    for page in PAGES
    for n, block in enumerate(
        re.findall(r"```python\n(.*?)```", page.read_text(encoding="utf-8"), flags=re.DOTALL), 1
    )
]


def test_the_pages_have_python_examples() -> None:
    assert len(BLOCKS) >= 8
    assert {name for name, _n, _block in BLOCKS} >= {"README.md", "docs/library/index.md"}


@pytest.mark.parametrize(
    ("name", "number", "block"), BLOCKS, ids=[f"{name}:{n}" for name, n, _b in BLOCKS]
)
def test_example_runs_as_written(
    name: str, number: int, block: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Temporary files go to this test's own folder, which the example must leave empty:
    # a reader who copies it (and every run of this test) should not pile up data
    # directories in the system's temporary folder.
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    code = compile(block, f"{name} example {number}", "exec")
    exec(code, {"__name__": f"example_{number}"})  # noqa: S102 - our own documentation
    assert sorted(p.name for p in tmp_path.iterdir()) == [], "the example leaves files"


def test_the_configuration_page_lists_every_field_with_its_default() -> None:
    page = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    for name, default, _doc in MemoryConfig.describe():
        assert f"| `{name}` | `{default!r}` |" in page, name


def test_readme_gives_exactly_the_two_fresh_machine_commands() -> None:
    for marker in ("demo-command", "test-command"):
        block = TEXT.split(f"<!-- {marker} -->", 1)[1].split(f"<!-- /{marker} -->", 1)[0]
        lines = [ln for ln in block.strip().splitlines() if not ln.startswith("```")]
        assert len(lines) == 1 and lines[0].startswith("python3 -m venv .venv && ")


def test_the_readme_stays_a_front_page() -> None:
    # The details live in docs/; the README is what a newcomer reads first.
    assert len(TEXT.splitlines()) <= 320


#: ``pip install "memoryos-actors[...]"`` names a package index entry that does not exist
#: (and similar names there are other people's code): install hints name the checkout
#: (``pip install ".[server]"``) or a wheel built from it.
_INDEX_HINT = re.compile(r"pip3? install [^\n`]*['\"]?memoryos[-_]actors\s*\[")


def test_no_install_hint_names_a_package_index_entry() -> None:
    files = [*PAGES, ROOT / "bench" / "README.md", *sorted((ROOT / "examples").glob("*.py"))]
    files += sorted((ROOT / "bench").glob("*.py"))
    wrong = [
        f"{path.relative_to(ROOT)}: {match.group(0)}"
        for path in files
        for match in _INDEX_HINT.finditer(path.read_text(encoding="utf-8"))
    ]
    assert wrong == []


def test_every_result_file_the_pages_name_is_committed() -> None:
    """``bench/results/`` keeps one current file per benchmark (older runs are in git's
    history): a page that cites a result names one that is there. The benchmarks page
    names its files without the folder in its tables."""
    named = set()
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        found = re.findall(r"bench/results/([\w.\-]+\.(?:json|png))", text)
        if page.name == "benchmarks.md":  # its tables; the data files come after them
            found += re.findall(r"`([\w.\-]+\.json)`", text.split("## Data", 1)[0])
        named |= {(page.relative_to(ROOT).as_posix(), name) for name in found}
    missing = sorted(
        f"{page}: {name}"
        for page, name in named
        if not (ROOT / "bench" / "results" / name).exists()
    )
    assert missing == []


def test_what_the_code_points_readers_to_is_in_the_docs() -> None:
    """The README is a front page: what the package's messages and docstrings send a reader
    to read is a page under ``docs/`` that exists, never a README section."""
    named, stale = set(), []
    for path in sorted((ROOT / "memoryos_actors").rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        named |= {
            (path.relative_to(ROOT).as_posix(), m) for m in re.findall(r"docs/[\w/\-]+\.md", text)
        }
        stale += [
            f"{path.relative_to(ROOT)}: {m}" for m in re.findall(r"[^\n]*in the README[^\n]*", text)
        ]
    assert stale == []
    assert sorted(f"{src}: {page}" for src, page in named if not (ROOT / page).exists()) == []
    assert ("memoryos_actors/cli/serve.py", "docs/cluster.md") in named
