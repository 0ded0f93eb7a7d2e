"""PEP 561: both import packages ship a ``py.typed`` marker, so users' type checkers read
the inline types of ``memoryos_actors`` and ``supervisor`` (#44 item 4)."""

from __future__ import annotations

import fnmatch
import tomllib
from importlib import resources
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("package", ["memoryos_actors", "supervisor"])
def test_each_package_has_a_py_typed_marker_shipped_as_package_data(package: str) -> None:
    # The marker is in the package as imported (an editable install reads the tree)...
    assert resources.files(package).joinpath("py.typed").is_file()
    assert (ROOT / package / "py.typed").is_file()
    # ...and the build ships it: setuptools copies only the data files pyproject lists.
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    listed = config["tool"]["setuptools"]["package-data"].get(package, [])
    assert any(fnmatch.fnmatch("py.typed", pattern) for pattern in listed), listed
    found = config["tool"]["setuptools"]["packages"]["find"]["include"]
    assert any(fnmatch.fnmatch(package, pattern) for pattern in found)
