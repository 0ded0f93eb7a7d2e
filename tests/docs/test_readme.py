"""The README's examples run as written, and its tables match the code."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from memoryos_actors import MemoryConfig

README = Path(__file__).resolve().parents[2] / "README.md"
TEXT = README.read_text(encoding="utf-8")
BLOCKS = re.findall(r"```python\n(.*?)```", TEXT, flags=re.DOTALL)


def test_readme_has_python_examples() -> None:
    assert len(BLOCKS) >= 3


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_readme_example_runs_as_written(index: int) -> None:
    code = compile(BLOCKS[index], f"README.md example {index + 1}", "exec")
    exec(code, {"__name__": f"readme_example_{index}"})  # noqa: S102 - our own README


def test_readme_config_table_lists_every_field_with_its_default() -> None:
    for name, default, _doc in MemoryConfig.describe():
        assert f"| `{name}` | `{default!r}` |" in TEXT, name


def test_readme_gives_exactly_the_two_fresh_machine_commands() -> None:
    for marker in ("demo-command", "test-command"):
        block = TEXT.split(f"<!-- {marker} -->", 1)[1].split(f"<!-- /{marker} -->", 1)[0]
        lines = [ln for ln in block.strip().splitlines() if not ln.startswith("```")]
        assert len(lines) == 1 and lines[0].startswith("python3 -m venv .venv && ")
