"""Fixtures for the sharded backends: the facade over in-process shards and over Ray."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pykka
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration"))

from backends import BACKENDS, make_cluster, own_shards
from sysutil import SMALL
from waiting import wait_until

from memoryos_actors import ManualClock, MemoryConfig, MemoryOS


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def open_mem(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[Callable[..., Any]]:
    """Open memory systems on the test's backend; all closed at the end of the test.

    Two shards, but one over Ray unless the test asks for more (``shards=``): each Ray
    shard is a process whose start costs more than the rest of such a test, and these
    tests are about one system's own life (reads of no data, stats, close and reopen, a
    second open, calls after close). What spans shards is checked on the module's shared
    system (``mem``, two Ray shards) and over local shards (two per system, cheap).
    """
    opened: list[Any] = []

    def _open(config: MemoryConfig | None = None, sub: str = "data", **kw: Any) -> Any:
        cfg = config if config is not None else MemoryConfig(**SMALL)
        clock = kw.pop("clock", None) or ManualClock(1_700_000_000.0)
        shards = kw.pop("shards", own_shards(backend))
        mem = MemoryOS.open(
            tmp_path / sub, cfg, clock=clock, cluster=make_cluster(backend, request, shards)
        )
        opened.append(mem)
        return mem

    yield _open
    for mem in opened:
        mem.close()


@pytest.fixture(scope="module")
def _shared_ray_system(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """Holds the module's one memory system over Ray shards (opened by ``mem`` on first
    use), closed when the module's tests are done."""
    held: dict[str, Any] = {}
    yield held
    if "mem" in held:
        held["mem"].close()


@pytest.fixture
def mem(
    backend: str,
    request: pytest.FixtureRequest,
    open_mem: Callable[..., Any],
    _shared_ray_system: dict[str, Any],
    tmp_path_factory: pytest.TempPathFactory,
) -> Any:
    """A memory system (``SMALL`` config, manual clock) for a test that reads and writes
    only users of its own and never closes it.

    Over Ray it is one system shared by the module's tests: each opening starts two shard
    processes, seconds each, most of such a test's time. The other backends open a fresh
    one per test (milliseconds), so each test's body runs both on a system of its own and
    on one other tests have used.
    """
    if backend != "ray":
        return open_mem()
    if "mem" not in _shared_ray_system:
        _shared_ray_system["mem"] = MemoryOS.open(
            tmp_path_factory.mktemp("shared-ray"),
            MemoryConfig(**SMALL),
            clock=ManualClock(1_700_000_000.0),
            cluster=make_cluster(backend, request),
        )
    return _shared_ray_system["mem"]


#: Name prefixes of the threads Ray's driver library starts in this process when the
#: session's cluster is first used; they live until the session ends.
_RAY_DRIVER_THREADS = ("ray_", "PythonGCThread")


def _our_threads() -> int:
    return sum(1 for t in threading.enumerate() if not t.name.startswith(_RAY_DRIVER_THREADS))


@pytest.fixture(autouse=True)
def _no_leaked_actors_or_threads() -> Iterator[None]:
    """The leak check of ``tests/conftest.py``, not counting Ray's driver threads.

    The first test that uses Ray starts the session's cluster after the check's baseline
    was taken, and Ray's driver threads stay for the session: they are Ray's, not a leak
    of ours. Every other thread and every pykka actor is still counted.
    """
    actors_before = len(pykka.ActorRegistry.get_all())
    threads_before = _our_threads()
    yield
    wait_until(
        lambda: len(pykka.ActorRegistry.get_all()) <= actors_before,
        lambda: f"no actor left running (still running: {pykka.ActorRegistry.get_all()[:5]})",
        timeout=5.0,
    )
    wait_until(
        lambda: _our_threads() <= threads_before,
        lambda: f"no thread left running (running: {[t.name for t in threading.enumerate()]})",
        timeout=5.0,
    )
