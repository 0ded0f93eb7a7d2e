"""Fixtures for gateway tests: a fake OpenAI-compatible server, services that clean up."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from fakeserver import FakeOpenAIServer
from gwhelpers import KEY_ENV, SleepRecorder, gateway_config

from memoryos_actors.clock import ManualClock
from memoryos_actors.gateway import GatewayService


@pytest.fixture(scope="session")
def litellm_ready() -> Iterator[None]:
    """Import litellm and make one call of each kind so its own worker threads exist
    before any test's thread baseline is taken."""
    pytest.importorskip("litellm")
    os.environ.setdefault(KEY_ENV, "sk-test-dummy")
    with FakeOpenAIServer() as srv:
        svc = GatewayService(
            gateway_config(
                llm_backend="litellm",
                llm_model="openai/fake-model",
                llm_base_url=srv.base_url,
                llm_api_key_env=KEY_ENV,
                embedder="litellm",
                embedding_model="openai/fake-embed",
            )
        )
        svc.complete("chat_reply", {"context": "warm-up", "query": "warm-up"})
        svc.embed(["warm-up"])
        svc.close()
    yield


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    """A running fake server, stopped (threads joined) at test end."""
    srv = FakeOpenAIServer().start()
    try:
        yield srv
    finally:
        srv.stop()


@pytest.fixture
def clock() -> ManualClock:
    """A manual clock at t=1000 s."""
    return ManualClock(1000.0)


@pytest.fixture
def sleeper(clock: ManualClock) -> SleepRecorder:
    """A sleep that returns at once, records the wait and advances ``clock``."""
    return SleepRecorder(clock)


@pytest.fixture
def make_service() -> Iterator[Callable[..., GatewayService]]:
    """Build services (closed automatically at test end)."""
    made: list[GatewayService] = []

    def make(config: Any = None, **kwargs: Any) -> GatewayService:
        svc = GatewayService(config if config is not None else gateway_config(), **kwargs)
        made.append(svc)
        return svc

    yield make
    for svc in made:
        svc.close()


@pytest.fixture
def llm_service(
    litellm_ready: None,
    server: FakeOpenAIServer,
    clock: ManualClock,
    sleeper: SleepRecorder,
    make_service: Callable[..., GatewayService],
) -> Callable[..., GatewayService]:
    """Factory for a litellm-backed service pointed at ``server`` with a manual clock."""

    def make(**overrides: Any) -> GatewayService:
        kwargs = {k: overrides.pop(k) for k in ("on_redo", "pending_limit") if k in overrides}
        config = gateway_config(
            llm_backend="litellm",
            llm_model="openai/fake-model",
            llm_base_url=server.base_url,
            llm_api_key_env=KEY_ENV,
            **overrides,
        )
        return make_service(config, clock=clock, sleep=sleeper, retry_base_delay=0.01, **kwargs)

    return make
