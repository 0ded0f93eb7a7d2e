"""Helpers shared by the gateway tests (kept out of conftest so tests can import them)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from memoryos_actors.clock import ManualClock

# Not MEMORYOS_*: MemoryConfig.from_env (and so the CLI) rejects unknown MEMORYOS_ variables,
# and the gateway tests leave this one set for the rest of the session.
KEY_ENV = "FAKE_PROVIDER_TEST_KEY"


def gateway_config(**overrides: Any) -> SimpleNamespace:
    """A config object with MemoryConfig's gateway field names and quick test defaults."""
    base: dict[str, Any] = dict(
        llm_backend="offline",
        llm_model=None,
        llm_base_url=None,
        llm_api_key_env=None,
        llm_timeout_seconds=2.0,
        llm_max_retries=2,
        llm_max_concurrency=4,
        llm_requests_per_minute=None,
        llm_tokens_per_minute=None,
        breaker_failure_threshold=5,
        breaker_reset_seconds=30.0,
        cache_size=128,
        embed_coalesce_ms=2.0,
        embedder="hashing",
        embedding_dim=64,
        embedding_model=None,
        seed=0,
    )
    base.update(overrides)
    return SimpleNamespace(**base)


class SleepRecorder:
    """An injected ``sleep`` that records requested waits and advances a manual clock."""

    def __init__(self, clock: ManualClock) -> None:
        self.clock = clock
        self.calls: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.calls.append(seconds)
        self.clock.advance(max(0.0, seconds))


def chat_payload(n: int | str) -> dict[str, Any]:
    """A distinct chat_reply payload (distinct so the cache does not answer it)."""
    return {"context": f"- memory line number {n} about hiking boots", "query": f"question {n}?"}


#: Turns on one topic (comedy): a persona update from them names humour.
TOPIC_TURNS = [
    ("I tell jokes at every family dinner and my friends laugh at my puns.", "Ha, nice."),
    ("My favourite comedian does wordplay, I collect funny one-liners.", "Great hobby."),
    ("Yesterday I made the whole office laugh with a pun about printers.", "Well done."),
    ("I write short humorous stories for my blog every week.", "Sounds fun."),
    ("My sister says I joke too much, but laughter keeps me going.", "Fair enough."),
    ("I am preparing a comedy set for an open mic night.", "Good luck!"),
    ("The open mic went well, people laughed at my puns.", "Congratulations."),
]
