"""Fixtures for the supervisor tests: log capture and a leak check after every test."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pykka
import pytest
import structlog
from waiting import wait_until


@pytest.fixture(autouse=True)
def sv_logs() -> Iterator[list[dict[str, Any]]]:
    """Structured log entries emitted during the test (nothing reaches stdout)."""
    with structlog.testing.capture_logs() as logs:
        yield logs


@pytest.fixture(autouse=True)
def no_leaks(sv_logs: list[dict[str, Any]]) -> Iterator[None]:
    """Every test must leave as many threads and pykka actors as it found."""
    threads = threading.active_count()
    actors = len(pykka.ActorRegistry.get_all())
    yield
    try:
        wait_until(
            lambda: (
                threading.active_count() <= threads and len(pykka.ActorRegistry.get_all()) <= actors
            ),
            "the test's threads and actors to end",
            timeout=5.0,
        )
        return
    except AssertionError:
        pass
    leaked_threads = [t.name for t in threading.enumerate()]
    leaked_actors = [str(r) for r in pykka.ActorRegistry.get_all()]
    pykka.ActorRegistry.stop_all(block=True, timeout=5)
    pytest.fail(
        f"leak: threads {threading.active_count()} > {threads} ({leaked_threads}), "
        f"actors {len(leaked_actors)} > {actors} ({leaked_actors})"
    )
