"""Fixtures for tests that run the whole memory system through its public API."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from sysutil import SMALL

from memoryos_actors import ManualClock, MemoryConfig, MemoryOS


@pytest.fixture
def small_config() -> MemoryConfig:
    return MemoryConfig(**SMALL)


@pytest.fixture
def open_mem(tmp_path: Path) -> Iterator[Callable[..., MemoryOS]]:
    """Open memory systems that are closed at the end of the test."""
    opened: list[MemoryOS] = []

    def _open(config: MemoryConfig | None = None, sub: str = "data", **kw: Any) -> MemoryOS:
        cfg = config if config is not None else MemoryConfig(**SMALL)
        clock = kw.pop("clock", None) or ManualClock(1_700_000_000.0)
        mem = MemoryOS.open(tmp_path / sub, cfg, clock=clock, **kw)
        opened.append(mem)
        return mem

    yield _open
    for mem in opened:
        mem.close()
