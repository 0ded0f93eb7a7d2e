"""The ``MEMORYOS_*`` environment variables: one table (``OTHER_ENV_VARS`` in config.py,
plus ``MEMORYOS_<FIELD>`` for each config field) is the allow-list, the table of
``docs/configuration.md`` is generated from it (checked by cog in test_public_api.py), and every variable the code,
the benches or the documentation name is in it, and is accepted by the command line."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from memoryos_actors.config import ENV_PREFIX, OTHER_ENV_VARS, MemoryConfig
from memoryos_actors.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
_NAME = re.compile(r"\bMEMORYOS_[A-Z][A-Z0-9_]*[A-Z0-9]\b")
_FIELDS = {ENV_PREFIX + name.upper() for name in MemoryConfig.__dataclass_fields__}


def _named_in(path: Path) -> set[str]:
    return set(_NAME.findall(path.read_text(encoding="utf-8")))


def _sources() -> list[Path]:
    files = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    files += sorted((ROOT / "memoryos_actors").rglob("*.py"))
    files += sorted((ROOT / "bench").glob("*.py")) + [ROOT / "bench" / "README.md"]
    return [f for f in files if f.exists()]


def test_every_variable_the_project_names_is_in_the_table() -> None:
    stray = {
        f"{name} ({path.relative_to(ROOT)})"
        for path in _sources()
        for name in _named_in(path)
        if name not in OTHER_ENV_VARS and name not in _FIELDS
    }
    assert not stray, (
        "MEMORYOS_* variables named but not in config.OTHER_ENV_VARS (add them there, "
        f"then run cog -r docs/configuration.md): {sorted(stray)}"
    )


def test_the_configuration_page_lists_every_variable_of_the_table() -> None:
    page = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    for name in OTHER_ENV_VARS:
        assert f"| `{name}` |" in page, name
    assert f"| `{ENV_PREFIX}<FIELD>` |" in page


def test_the_table_is_the_allow_list() -> None:
    env = {name: "x" for name in OTHER_ENV_VARS} | {"MEMORYOS_STM_CAPACITY": "9"}
    assert MemoryConfig.from_env(env).stm_capacity == 9
    with pytest.raises(ConfigError, match="MEMORYOS_STM_CAPACTY"):
        MemoryConfig.from_env({**env, "MEMORYOS_STM_CAPACTY": "9"})


@pytest.mark.parametrize("name", ["MEMORYOS_KEYS_FILE", "MEMORYOS_LONGMEMEVAL_PATH"])
def test_a_documented_variable_does_not_break_a_command(tmp_path: Path, name: str) -> None:
    # Each of these was refused as unknown by every command once (#46 item 3).
    env = {**os.environ, name: str(tmp_path / "somewhere"), "MEMORYOS_DATA_DIR": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-m", "memoryos_actors.cli", "stats"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "unknown environment variable" not in done.stderr
