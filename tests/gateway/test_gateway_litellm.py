"""The litellm path, driven through litellm itself against a local fake OpenAI server."""

from __future__ import annotations

import importlib.util
import json
import threading
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

if importlib.util.find_spec("litellm") is None:  # imported by the tests that use it
    pytest.skip("litellm is not installed", allow_module_level=True)

from fakeserver import Action, FakeOpenAIServer, default_answer
from gwhelpers import SleepRecorder, chat_payload

from memoryos_actors.clock import ManualClock
from memoryos_actors.errors import GatewayError, ProviderUnavailable
from memoryos_actors.gateway import GatewayService

Make = Callable[..., GatewayService]
OFFLINE = "offline (extractive, no LLM)"


def test_completion_goes_through_the_provider_with_tokens_counted(
    llm_service: Make, server: FakeOpenAIServer
) -> None:
    svc = llm_service()
    c = svc.complete("persona_update", {"pages": [], "trait_names": []}, user_id="ann")
    assert c.data == default_answer("persona_update")
    assert not c.degraded and c.backend == "litellm:openai/fake-model"
    assert server.chat_requests == 1 and server.state.kinds == ["persona_update"]
    stats = svc.stats()
    assert stats["by_user"]["ann"]["prompt_tokens"] == 100
    assert stats["by_kind"]["persona_update"]["completion_tokens"] == 20
    assert stats["cost_usd"] == 0.0  # the fake model has no price in litellm's map


def test_identical_completion_is_answered_from_cache_without_http(
    llm_service: Make, server: FakeOpenAIServer
) -> None:
    svc = llm_service()
    svc.complete("chat_reply", chat_payload(1))
    again = svc.complete("chat_reply", chat_payload(1))
    assert again.data == {"reply": "provider reply"} and server.chat_requests == 1


def test_429_500_and_resets_are_retried_and_retry_after_is_honoured(
    llm_service: Make, server: FakeOpenAIServer, sleeper: SleepRecorder
) -> None:
    svc = llm_service(llm_max_retries=3)
    server.script_chat(Action(status=429, retry_after=7), Action(status=500), Action(reset=True))
    c = svc.complete("chat_reply", chat_payload(1))
    assert c.data == {"reply": "provider reply"} and not c.degraded
    assert server.chat_requests == 4
    assert len(sleeper.calls) == 3 and sleeper.calls[0] == pytest.approx(7.0)
    assert all(d < 1.0 for d in sleeper.calls[1:])  # plain backoff, small base in tests
    assert svc.stats()["retries"] == 3 and svc.stats()["errors"] == 3


def test_a_slow_provider_times_out_and_the_retry_succeeds(
    llm_service: Make, server: FakeOpenAIServer
) -> None:
    svc = llm_service(llm_timeout_seconds=0.2)
    server.script_chat(Action(delay=0.6))
    c = svc.complete("chat_reply", chat_payload(1))
    assert c.data == {"reply": "provider reply"} and server.chat_requests == 2


def test_a_bad_request_is_not_retried_and_falls_back(
    llm_service: Make, server: FakeOpenAIServer
) -> None:
    svc = llm_service(llm_max_retries=3)
    server.script_chat(Action(status=400))
    c = svc.complete("chat_reply", chat_payload(1))
    assert c.degraded and c.backend == OFFLINE and server.chat_requests == 1


def test_fenced_and_sloppy_json_is_repaired(llm_service: Make, server: FakeOpenAIServer) -> None:
    svc = llm_service()
    server.script_chat(
        Action(
            content='Here it is:\n```json\n{"summary": "Hiking talk", "keywords": ["Boots",],}\n```'
        )
    )
    c = svc.complete("segment_summary", {"pages": []})
    assert c.data == {"summary": "Hiking talk", "keywords": ["boots"]}
    assert server.chat_requests == 1


def test_malformed_answers_are_retried_then_fall_back_never_returned_raw(
    llm_service: Make, server: FakeOpenAIServer
) -> None:
    svc = llm_service(llm_validation_retries=1)
    server.script_chat(Action(content='{"summary": 42}'), Action(content="I cannot comply."))
    c = svc.complete("segment_summary", {"pages": [{"query": "q", "response": "r"}]})
    assert c.degraded and c.backend == OFFLINE
    assert isinstance(c.data["summary"], str) and "comply" not in c.data["summary"]
    assert server.chat_requests == 2


def logging_threads() -> int:
    """Threads of litellm's logging pool (its workers are named after it)."""
    return sum(1 for t in threading.enumerate() if t.name.startswith("litellm-logging"))


def test_calls_made_while_litellm_is_still_logging_start_no_thread(
    litellm_ready: None, server: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # litellm's blocking API (used by the litellm embedder and LiteLLMBackend.call) logs each
    # successful call on its own pool, which starts a worker whenever none is idle; tests pin
    # it to one worker (tests/conftest.py) so the leak check cannot trip on a slow logger.
    # Hold that worker busy, as a loaded machine would, and call again.
    from gwhelpers import KEY_ENV
    from litellm.litellm_core_utils.thread_pool_executor import executor

    from memoryos_actors.gateway.litellm_backend import LiteLLMBackend

    monkeypatch.setenv(KEY_ENV, "sk-test-dummy")
    backend = LiteLLMBackend(
        "openai/fake-model", api_base=server.base_url, api_key_env=KEY_ENV, client="litellm"
    )
    backend.call("chat_reply", chat_payload(99))  # the pool's one worker exists from here
    executor.submit(int).result(30)
    release = threading.Event()
    busy = executor.submit(release.wait, 30)
    try:
        before = logging_threads()
        for i in range(3):
            backend.call("chat_reply", chat_payload(i))
        assert logging_threads() == before == 1
    finally:
        release.set()
        busy.result(30)
        executor.submit(int).result(30)  # one worker, FIFO: the calls' logging has run
    assert server.chat_requests == 4


def test_error_text_from_the_provider_never_reaches_results_or_stats(
    llm_service: Make, server: FakeOpenAIServer
) -> None:
    svc = llm_service(llm_max_retries=1)
    server.script_chat(Action(status=500), Action(status=503))
    c = svc.complete("chat_reply", chat_payload(1))
    assert c.degraded
    assert "SECRET-ERROR-TEXT" not in json.dumps(c.data)
    assert "SECRET-ERROR-TEXT" not in json.dumps(svc.stats())


def test_breaker_opens_falls_back_recovers_half_open_and_redo_applies_results(
    llm_service: Make, server: FakeOpenAIServer, clock: ManualClock
) -> None:
    redone: list[tuple[str, Any, Any, dict[str, Any]]] = []
    svc = llm_service(
        llm_max_retries=0,
        breaker_failure_threshold=2,
        breaker_reset_seconds=10.0,
        on_redo=lambda kind, payload, user, data: redone.append((kind, payload, user, data)),
    )
    server.script_chat(Action(status=500), Action(status=500))
    first = [svc.complete("chat_reply", chat_payload(i), user_id="ann") for i in range(2)]
    assert all(c.degraded for c in first) and svc.stats()["breaker"]["completion"] == "open"
    # While open, no request reaches the provider; answers still come, degraded.
    third = svc.complete("chat_reply", chat_payload(2), user_id="bob")
    assert third.degraded and server.chat_requests == 2
    assert svc.redo_pending() == [] and svc.pending_count() == 3  # still open: nothing redone

    clock.advance(10.0)
    assert svc.stats()["breaker"]["completion"] == "half_open"
    probe = svc.complete("chat_reply", chat_payload(99))
    assert not probe.degraded and svc.stats()["breaker"]["completion"] == "closed"

    results = svc.redo_pending()
    assert [r.payload for r in results] == [chat_payload(0), chat_payload(1), chat_payload(2)]
    assert [r.user_id for r in results] == ["ann", "ann", "bob"]
    assert all(r.completion.data == {"reply": "provider reply"} for r in results)
    assert [(k, u, d) for k, _, u, d in redone] == [
        ("chat_reply", u, {"reply": "provider reply"}) for u in ("ann", "ann", "bob")
    ]
    assert svc.pending_count() == 0 and svc.stats()["degraded"] == 3
    # The redone answer is now what the cache holds for that request.
    assert svc.complete("chat_reply", chat_payload(0)).data == {"reply": "provider reply"}


def test_failed_half_open_probe_keeps_serving_degraded(
    llm_service: Make, server: FakeOpenAIServer, clock: ManualClock
) -> None:
    svc = llm_service(llm_max_retries=0, breaker_failure_threshold=1, breaker_reset_seconds=5.0)
    server.script_chat(Action(status=500), Action(status=502))
    assert svc.complete("chat_reply", chat_payload(0)).degraded
    clock.advance(5.0)
    assert svc.complete("chat_reply", chat_payload(1)).degraded  # the probe failed
    assert svc.complete("chat_reply", chat_payload(2)).degraded  # re-opened: no HTTP
    assert server.chat_requests == 2
    assert svc.stats()["breaker"]["completion_times_opened"] == 2


def test_redo_queue_is_bounded_oldest_dropped(llm_service: Make, server: FakeOpenAIServer) -> None:
    svc = llm_service(llm_max_retries=0, breaker_failure_threshold=1, pending_limit=2)
    server.script_chat(Action(status=500))
    for i in range(4):
        svc.complete("chat_reply", chat_payload(i))
    assert svc.pending_count() == 2 and svc.stats()["pending_dropped"] == 2


def test_request_rate_limit_paces_calls(
    llm_service: Make, server: FakeOpenAIServer, sleeper: SleepRecorder
) -> None:
    svc = llm_service(llm_requests_per_minute=2)  # burst of 2, then one per 30 s
    for i in range(4):
        assert not svc.complete("chat_reply", chat_payload(i)).degraded
    assert sleeper.calls == pytest.approx([30.0, 30.0])
    assert server.chat_requests == 4
    assert svc.stats()["rate_limit"]["requests_waits"] == 2


def test_concurrent_embeds_are_coalesced_into_fewer_http_calls(
    litellm_ready: None, server: FakeOpenAIServer, make_service: Make
) -> None:
    from gwhelpers import KEY_ENV, gateway_config

    svc = make_service(
        gateway_config(
            embedder="litellm",
            embedding_model="openai/fake-embed",
            llm_base_url=server.base_url,
            llm_api_key_env=KEY_ENV,
            embed_coalesce_ms=5.0,
        )
    )
    server.script_embed(Action(delay=0.3))  # holds batch 1 while the others queue up
    n = 12
    results: dict[int, np.ndarray] = {}
    started = threading.Barrier(n)

    def worker(i: int) -> None:
        started.wait(10)
        results[i] = svc.embed([f"sentence {i}"])

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    assert len(results) == n
    assert server.embed_requests < n
    assert sum(server.state.embed_batch_sizes) == n  # every text sent exactly once
    # Each caller got its own text's vector, whatever batch it rode in.
    solo = svc.embed([f"sentence {n - 1}", "sentence 0"])  # from the cache now
    assert np.allclose(solo[0], results[n - 1][0]) and np.allclose(solo[1], results[0][0])
    assert server.embed_requests == len(server.state.embed_batch_sizes)
    assert np.allclose(np.linalg.norm(results[3], axis=1), 1.0)
    assert svc.embedder_info() == ("litellm:openai/fake-embed", 16)


def test_embedding_failures_retry_then_raise_typed_errors(
    litellm_ready: None,
    server: FakeOpenAIServer,
    make_service: Make,
    clock: ManualClock,
    sleeper: SleepRecorder,
) -> None:
    from gwhelpers import KEY_ENV, gateway_config

    svc = make_service(
        gateway_config(
            embedder="litellm",
            embedding_model="openai/fake-embed",
            llm_base_url=server.base_url,
            llm_api_key_env=KEY_ENV,
            llm_max_retries=1,
            breaker_failure_threshold=2,
        ),
        clock=clock,
        sleep=sleeper,
        retry_base_delay=0.01,
    )
    server.script_embed(Action(status=500))
    assert svc.embed(["recovers after one retry"]).shape == (1, 16)
    server.script_embed(Action(status=500), Action(status=500))
    with pytest.raises(GatewayError) as info:
        svc.embed(["fails twice"])
    assert "SECRET-ERROR-TEXT" not in str(info.value)
    with pytest.raises(ProviderUnavailable):
        svc.embed(["breaker is open now"])
    assert server.embed_requests == 4
