"""The facade's modules import without a circle: ``system`` needs neither the asyncio
facade nor the cluster package, and each of ``system``, ``aio`` and ``cluster`` imports on
its own in a fresh interpreter (the first import of a module in a circle sees the other
half-initialised)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

_REPO = Path(__file__).resolve().parents[2]


def _loaded_after_import(module: str) -> set[str]:
    """The ``memoryos_actors`` modules loaded by importing ``module`` in a fresh process."""
    code = (
        "import importlib, json, sys\n"
        f"importlib.import_module({module!r})\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('memoryos_actors'))))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=_REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return set(json.loads(done.stdout.strip().splitlines()[-1]))


_FACADES = ("memoryos_actors.system", "memoryos_actors.aio", "memoryos_actors.cluster")


@pytest.mark.parametrize("module", [*_FACADES[:2], "memoryos_actors.cluster._facade"])
def test_no_facade_module_needs_another_to_import(module: str) -> None:
    """Imported first, in a fresh process, each facade module loads none of the other
    two: ``system`` no longer re-exports ``AsyncMemoryOS`` (the circle ``system -> aio ->
    cluster -> system``), ``aio`` loads ``system`` on its first ``open``, and the cluster
    facade reaches ``system`` only inside its shard processes."""
    loaded = _loaded_after_import(module)
    assert module in loaded
    others = sorted(
        m for m in loaded for f in _FACADES if not module.startswith(f) and m.startswith(f)
    )
    assert others == []


def test_the_api_protocols_load_no_facade() -> None:
    loaded = _loaded_after_import("memoryos_actors.api")
    assert sorted(m for m in loaded for f in _FACADES if m.startswith(f)) == []
