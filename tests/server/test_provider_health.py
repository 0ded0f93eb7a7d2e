"""The server over HTTP with a provider that is down or misconfigured: chat answers say
when the offline fallback wrote them, a configuration error is a 502 naming it, and
``/readyz`` and ``/metrics`` show the provider's state and circuit breaker."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "gateway"))

from fakeserver import Action, FakeOpenAIServer
from srvutil import CONFIG_TOML, Server, add_key, start_server
from waiting import wait_until

KEY_ENV = "FAKE_PROVIDER_SERVER_KEY"  # not MEMORYOS_*: the server would read it as config
RIGHT_KEY = "sk-right-0d5e8a3f6c17"
WRONG_KEY = "sk-wrong-7c2f4b9e1a06"


def _start(
    root: Path, provider: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch, *extra: str
) -> tuple[Server, str]:
    (root / "config.toml").write_text(
        CONFIG_TOML + f'llm_backend = "litellm"\nllm_model = "openai/fake-model"\n'
        f'llm_base_url = "{provider.base_url}"\nllm_api_key_env = "{KEY_ENV}"\n'
        "llm_timeout_seconds = 2.0\nllm_max_retries = 0\nbreaker_failure_threshold = 1\n"
        "breaker_reset_seconds = 0.5\n",
        encoding="utf-8",
    )
    monkeypatch.setenv(KEY_ENV, WRONG_KEY)  # inherited by the server process
    keys = root / "keys.json"
    key = add_key(root, keys, "acme")
    return start_server(root, root / "data", keys, *extra), key


@pytest.fixture
def down(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[Server, str, FakeOpenAIServer]]:
    with FakeOpenAIServer(default=Action(status=500)) as provider:
        server, key = _start(tmp_path, provider, monkeypatch)
        try:
            yield server, key, provider
        finally:
            server.stop()


def _metric(text: str, sample: str) -> float:
    for line in text.splitlines():
        if line.startswith(sample + " "):
            return float(line.split()[-1])
    raise AssertionError(f"{sample} not in /metrics")


def test_chat_during_an_outage_is_marked_degraded_and_readyz_and_metrics_show_the_breaker(
    down: tuple[Server, str, FakeOpenAIServer],
) -> None:
    server, key, provider = down
    assert (
        "memoryos: warning: llm: litellm:openai/fake-model is unavailable (HTTP 500)"
        in server.log_text()
    )  # the start-up check warned, and the server started
    with server.client(key) as c:
        r = c.post("/v1/users/ann/chat", json={"query": "My dog is called Rufus."})
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["degraded"] is True and "HTTP 500" in body["reason"]
        assert "SECRET-ERROR-TEXT" not in r.text
        ready = c.get("/readyz")
        assert ready.status_code == 200  # memory calls still work: still ready
        llm = ready.json()["llm"]
        assert llm["state"] == "degraded" and llm["breaker"]["completion"] != "closed"
        assert "HTTP 500" in llm["last_error"]
        metrics = c.get("/metrics").text
        assert _metric(metrics, 'memoryos_llm_breaker_open{breaker="completion"}') == 1.0
        assert _metric(metrics, 'memoryos_llm_provider_state{state="degraded"}') == 1.0
        assert _metric(metrics, "memoryos_degraded_chats_total") == 1.0

        # The provider comes back: once the breaker lets a probe through, replies are the
        # provider's again and say so.
        provider.set_default(Action())

        def provider_reply() -> httpx.Response | None:
            r = c.post("/v1/users/ann/chat", json={"query": "What is my dog called?"})
            assert r.status_code == 200, r.text
            return None if r.json()["degraded"] else r

        r = wait_until(provider_reply, "a reply that is not degraded", interval=0.1)
        assert r.json() == {
            "user_id": "ann",
            "reply": "provider reply",
            "degraded": False,
            "reason": None,
        }
        assert c.get("/readyz").json()["llm"]["breaker"]["completion"] == "closed"


def test_a_rejected_key_met_after_start_is_a_502_naming_it_and_nothing_is_stored(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with FakeOpenAIServer(api_key=RIGHT_KEY) as provider:
        server, key = _start(tmp_path, provider, monkeypatch, "--skip-provider-check")
        try:
            with server.client(key) as c:
                r = c.post("/v1/users/bob/chat", json={"query": "hello"})
                assert r.status_code == 502, r.text
                error = r.json()["error"]
                assert error["type"] == "ProviderAuthError"
                assert "rejected the API key" in error["message"]
                assert "Incorrect API key provided" in error["message"]
                for secret in (WRONG_KEY, WRONG_KEY[:5], WRONG_KEY[-4:]):
                    assert secret not in r.text
                # Nothing stored: bob never came to exist (reads do not create users).
                assert c.get("/v1/users/bob/memories").status_code == 404
                llm = c.get("/readyz").json()["llm"]
                assert llm["state"] == "misconfigured"
                assert llm["breaker"]["completion"] == "closed"  # no outage
        finally:
            server.stop()
