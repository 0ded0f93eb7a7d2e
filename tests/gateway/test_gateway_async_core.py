"""The async gateway core against the loopback fake provider: provider-bound concurrency,
JSON mode on both client paths, validation retries that spare the breaker."""

from __future__ import annotations

import importlib.util
import threading
from collections.abc import Callable
from typing import Any

import pytest

if importlib.util.find_spec("litellm") is None:  # imported by the tests that use it
    pytest.skip("litellm is not installed", allow_module_level=True)

from fakeserver import Action, FakeOpenAIServer, default_answer
from gwhelpers import chat_payload
from waiting import wait_until

from memoryos_actors.errors import SystemClosed
from memoryos_actors.gateway import GatewayService

Make = Callable[..., GatewayService]


@pytest.mark.parametrize("client", ["http", "litellm"])
def test_both_client_paths_ask_for_json_mode_and_answer_from_the_provider(
    llm_service: Make, server: FakeOpenAIServer, client: str
) -> None:
    svc = llm_service(llm_client=client)
    c = svc.complete("segment_summary", {"pages": []})
    assert c.data == default_answer("segment_summary") and not c.degraded
    assert server.state.bodies[-1]["response_format"] == {"type": "json_object"}


@pytest.mark.parametrize("client", ["http", "litellm"])
def test_a_chain_meta_batch_gets_an_answer_budget_that_grows_with_its_pages(
    llm_service: Make, server: FakeOpenAIServer, client: str
) -> None:
    # 24 pages of chain meta do not fit the 512-token budget of one summary: a batch's
    # answer cut off there is broken JSON, asked again and answered offline in the end.
    from memoryos_actors.gateway.litellm_backend import BATCH_TOKENS_PER_PAGE

    svc = llm_service(llm_client=client)
    pages = [{"query": f"q{i}", "response": "r"} for i in range(24)]
    batch = {"pages": pages, "previous_page": None, "previous_meta_chain": ""}
    assert not svc.complete("page_meta_batch", batch).degraded
    assert not svc.complete("segment_summary", {"pages": pages[:2]}).degraded
    budgets = [b["max_tokens"] for b in server.state.bodies]
    assert budgets == [24 * BATCH_TOKENS_PER_PAGE, 512]


def test_json_mode_off_sends_no_response_format(
    llm_service: Make, server: FakeOpenAIServer
) -> None:
    svc = llm_service(llm_json_mode="off")
    assert not svc.complete("chat_reply", chat_payload(1)).degraded
    assert "response_format" not in server.state.bodies[-1]


def test_a_server_refusing_json_mode_is_asked_again_without_it_and_never_again(
    llm_service: Make, server: FakeOpenAIServer
) -> None:
    server.state.reject_json_mode = True
    svc = llm_service()
    first = svc.complete("segment_summary", {"pages": [{"query": "a", "response": "b"}]})
    second = svc.complete("segment_summary", {"pages": [{"query": "c", "response": "d"}]})
    assert not first.degraded and not second.degraded
    asked = ["response_format" in b for b in server.state.bodies]
    assert asked == [True, False, False]
    assert svc.stats()["errors"] == 0


def test_a_schema_violating_answer_is_retried_without_opening_the_breaker(
    llm_service: Make, server: FakeOpenAIServer
) -> None:
    # A breaker that opens on the first provider failure: invalid answers must not count.
    svc = llm_service(breaker_failure_threshold=1, llm_validation_retries=2)
    server.script_chat(Action(content='{"summary": ""}'), Action(content="no JSON here"))
    c = svc.complete("segment_summary", {"pages": []})
    assert c.data == default_answer("segment_summary") and not c.degraded
    stats = svc.stats()
    assert server.chat_requests == 3
    assert stats["invalid_answers"] == 2 and stats["errors"] == 0
    assert stats["breaker"]["completion"] == "closed"
    assert stats["breaker"]["completion_times_opened"] == 0
    assert stats["pending_redo"] == 0


def test_answers_still_invalid_after_the_validation_retries_degrade_but_keep_the_breaker_closed(
    llm_service: Make, server: FakeOpenAIServer
) -> None:
    svc = llm_service(breaker_failure_threshold=1, llm_validation_retries=1)
    server.script_chat(*(Action(content="[]") for _ in range(4)))
    first = svc.complete("segment_summary", {"pages": [{"query": "a", "response": "b"}]})
    second = svc.complete("segment_summary", {"pages": [{"query": "c", "response": "d"}]})
    assert first.degraded and second.degraded
    assert server.chat_requests == 4  # the breaker never refused a call
    assert svc.stats()["breaker"]["completion"] == "closed"


def test_calls_in_flight_reach_the_provider_limit_and_no_more(
    litellm_ready: None, make_service: Make
) -> None:
    from gwhelpers import KEY_ENV, gateway_config

    with FakeOpenAIServer(latency=0.3) as slow:
        svc = make_service(
            gateway_config(
                llm_backend="litellm",
                llm_model="openai/fake-model",
                llm_base_url=slow.base_url,
                llm_api_key_env=KEY_ENV,
                llm_max_concurrency=8,
            )
        )
        futures = [svc.submit("chat_reply", chat_payload(i)) for i in range(24)]
        results = [f.result(30) for f in futures]
        stats = svc.stats()
    assert not any(r.degraded for r in results)
    assert stats["concurrency"]["peak"] == 8
    assert stats["concurrency"]["jobs_peak"] == 24
    assert stats["concurrency"]["in_flight"] == 0 and stats["concurrency"]["jobs"] == 0
    assert slow.chat_requests == 24


def test_submit_returns_a_future_and_the_offline_default_answers_through_the_same_core(
    make_service: Make,
) -> None:
    svc = make_service()
    future = svc.submit("segment_summary", {"pages": [{"query": "I like tea.", "response": "ok"}]})
    c = future.result(10)
    assert not c.degraded and c.data["summary"]
    assert svc.stats()["concurrency"]["jobs"] == 0


def test_here_answers_an_offline_job_in_the_callers_thread_as_the_loop_would(
    make_service: Make, monkeypatch: pytest.MonkeyPatch
) -> None:
    # No provider: the job is the interpreter's work wherever it runs, so the caller's
    # thread does it (no hand-off to the loop and back): the future is done on return,
    # with the answer the loop gives, counted alike. It is not cached: recomputing the
    # deterministic answer costs less than the cache's canonical-JSON key.
    from memoryos_actors.gateway.offline import OfflineBackend

    answered_in: list[str] = []
    answer = OfflineBackend.answer

    def watched(self: OfflineBackend, kind: str, payload: Any) -> Any:
        answered_in.append(threading.current_thread().name)
        return answer(self, kind, payload)

    monkeypatch.setattr(OfflineBackend, "answer", watched)
    pages = {"pages": [{"query": "I like tea.", "response": "ok"}]}
    svc = make_service()
    assert svc.answers_locally
    here = svc.submit("segment_summary", pages, user_id="u", here=True)
    assert here.done() and answered_in == [threading.current_thread().name]
    on_loop = make_service().submit("segment_summary", pages, user_id="u").result(10)
    assert answered_in[1] != threading.current_thread().name  # the other one's loop
    assert here.result().data == on_loop.data and not here.result().degraded
    stats = svc.stats()
    assert stats["calls"] == 1 and stats["concurrency"]["jobs_peak"] == 0
    again = svc.submit("segment_summary", pages, user_id="u", here=True)
    assert again.result().data == on_loop.data and len(answered_in) == 3  # answered again
    assert svc.stats()["calls"] == 2


def test_here_puts_an_offline_answers_failure_in_its_future(
    make_service: Make, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As on the loop, a failing answer fails the job's future; the caller is not raised at.
    from memoryos_actors.gateway.offline import OfflineBackend

    def broken(self: OfflineBackend, kind: str, payload: Any) -> Any:
        raise RuntimeError("fault injection: the offline backend fails")

    monkeypatch.setattr(OfflineBackend, "answer", broken)
    future = make_service().submit("segment_summary", {"pages": []}, here=True)
    assert future.done() and isinstance(future.exception(), RuntimeError)


def test_here_leaves_a_providers_call_on_the_loop(
    llm_service: Make, server: FakeOpenAIServer
) -> None:
    # A provider's call is a wait, not the interpreter's work: it stays on the loop.
    svc = llm_service()
    assert not svc.answers_locally
    server.script_chat(Action(delay=0.3))
    future = svc.submit("segment_summary", {"pages": []}, here=True)
    assert not future.done()
    assert future.result(10).data == default_answer("segment_summary")


def test_submit_after_close_is_refused(make_service: Make) -> None:
    svc = make_service()
    svc.complete("chat_reply", chat_payload(1))
    svc.close()
    with pytest.raises(SystemClosed):
        svc.submit("chat_reply", chat_payload(2))


def test_close_leaves_no_caller_waiting_for_a_call_that_cannot_end(
    litellm_ready: None, make_service: Make
) -> None:
    import concurrent.futures

    from gwhelpers import KEY_ENV, gateway_config

    with FakeOpenAIServer(latency=2.0) as slow:
        svc = make_service(
            gateway_config(
                llm_backend="litellm",
                llm_model="openai/fake-model",
                llm_base_url=slow.base_url,
                llm_api_key_env=KEY_ENV,
                llm_max_concurrency=2,
            )
        )
        futures = [svc.submit("chat_reply", chat_payload(i)) for i in range(6)]
        svc.close(grace=0.1)
        done, not_done = concurrent.futures.wait(futures, timeout=10)
        assert not not_done
        assert all(f.cancelled() for f in futures)
        assert svc.stats()["concurrency"]["jobs"] == 0


def _pages(*queries: str) -> list[dict[str, str]]:
    return [{"query": q, "response": "r"} for q in queries]


def _behind_one_held_slot(
    llm_service: Make, server: FakeOpenAIServer, calls: list[tuple[str, dict[str, Any]]]
) -> None:
    """With one provider slot, held by user x's call, user u submits ``calls`` (kind,
    payload) in order; once all of them wait, the slot is let go and every call ends."""
    import threading

    entered, release = threading.Event(), threading.Event()

    def responder(kind: str, payload: dict[str, object]) -> None:
        if payload.get("pages") == _pages("held"):
            entered.set()
            release.wait(10)

    server.state.responder = responder
    svc = llm_service(llm_max_concurrency=1)
    held = svc.submit("segment_summary", {"pages": _pages("held")}, user_id="x")
    assert entered.wait(10)
    futures = [svc.submit(kind, payload, user_id="u") for kind, payload in calls]
    wait_until(
        lambda: svc.stats()["concurrency"]["waiting"] >= len(calls),
        "u's calls to wait for the slot",
        10,
    )
    assert svc.stats()["concurrency"]["waiting"] == len(calls)
    release.set()
    for f in (held, *futures):
        assert not f.result(10).degraded


def test_a_users_chain_meta_reaches_the_provider_ahead_of_its_own_summaries(
    llm_service: Make, server: FakeOpenAIServer
) -> None:
    # User u asks for three segment summaries and one batch of chain meta (its pages'
    # placement waits for that one): among u's calls the meta goes to the provider first;
    # the summaries keep their order.
    import re

    meta = {"pages": _pages("m1", "m2"), "previous_page": None, "previous_meta_chain": ""}
    summaries = [("segment_summary", {"pages": _pages(f"s{i}")}) for i in range(3)]
    _behind_one_held_slot(llm_service, server, [*summaries, ("page_meta_batch", meta)])
    asked = [
        re.findall(r'"query": "(\w+)"', b["messages"][1]["content"]) for b in server.state.bodies
    ]
    assert asked == [["held"], ["m1", "m2"], ["s0"], ["s1"], ["s2"]]


def test_a_users_chat_reply_reaches_the_provider_ahead_of_its_own_summaries(
    llm_service: Make, server: FakeOpenAIServer
) -> None:
    # User u has two segment summaries waiting when it asks for a chat reply (a caller
    # waits for that one): the reply goes to the provider first.
    summaries = [("segment_summary", {"pages": _pages(f"s{i}")}) for i in range(2)]
    _behind_one_held_slot(llm_service, server, [*summaries, ("chat_reply", chat_payload("c"))])
    assert server.state.kinds == [
        "segment_summary",
        "chat_reply",
        "segment_summary",
        "segment_summary",
    ]
