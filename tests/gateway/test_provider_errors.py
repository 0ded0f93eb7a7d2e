"""A misconfigured provider fails loudly; a provider that is down degrades visibly.

Every test talks to a real HTTP server on 127.0.0.1 (fakeserver.py) that answers like a
provider with a wrong key (401), an unknown model (404), an outage (500) or nothing at all
(a request accepted and never answered; a port where nothing listens).
"""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

if importlib.util.find_spec("litellm") is None:  # imported by the tests that use it
    pytest.skip("litellm is not installed", allow_module_level=True)

from fakeserver import Action, FakeOpenAIServer, refused_url
from gwhelpers import KEY_ENV, chat_payload, gateway_config

from memoryos_actors import (
    ChatReply,
    GatewayError,
    MemoryConfig,
    MemoryOS,
    ProviderAuthError,
    ProviderConfigError,
    ProviderModelNotFound,
    ProviderUnavailable,
    ProviderUnreachable,
    doctor,
)
from memoryos_actors.gateway import GatewayService

RIGHT_KEY = "sk-right-93b1e6d0a7c4"
WRONG_KEY = "sk-wrong-4f9d2c71e0b8"
OFFLINE = "offline (extractive, no LLM)"


def _config(base_url: str, **overrides: Any) -> MemoryConfig:
    base: dict[str, Any] = {
        "llm_backend": "litellm",
        "llm_model": "openai/fake-model",
        "llm_base_url": base_url,
        "llm_api_key_env": KEY_ENV,
        "llm_timeout_seconds": 5.0,
        "llm_max_retries": 0,
        "heat_tick_seconds": 3600.0,
        "summary_debounce_seconds": 0.01,
        "fsync": "never",
        "log_level": "error",
    }
    base.update(overrides)
    return MemoryConfig(**base)


def _no_key_in(text: str) -> None:
    """Neither key, nor the first or last characters a provider echoes of it."""
    for key in (WRONG_KEY, RIGHT_KEY):
        assert key not in text and key[:5] not in text and key[-4:] not in text, text


@pytest.fixture
def wrong_key(monkeypatch: pytest.MonkeyPatch, litellm_ready: None) -> str:
    monkeypatch.setenv(KEY_ENV, WRONG_KEY)
    return WRONG_KEY


@pytest.fixture
def open_mem(tmp_path: Path, litellm_ready: None) -> Iterator[Callable[..., MemoryOS]]:
    """Open memory systems, closed at test end (before the fake providers stop, when the
    test asks for this fixture after them)."""
    opened: list[MemoryOS] = []

    def _open(config: MemoryConfig) -> MemoryOS:
        mem = MemoryOS.open(tmp_path / f"data{len(opened)}", config)
        opened.append(mem)
        return mem

    yield _open
    for mem in opened:
        mem.close()


@pytest.fixture
def keyed() -> Iterator[FakeOpenAIServer]:
    """A provider that accepts only RIGHT_KEY."""
    with FakeOpenAIServer(api_key=RIGHT_KEY) as srv:
        yield srv


@pytest.fixture
def one_model() -> Iterator[FakeOpenAIServer]:
    """A provider that serves only the model ``fake-model``."""
    with FakeOpenAIServer(models={"fake-model"}) as srv:
        yield srv


@pytest.fixture
def down() -> Iterator[FakeOpenAIServer]:
    """A provider answering every request with HTTP 500."""
    with FakeOpenAIServer(default=Action(status=500)) as srv:
        yield srv


@pytest.fixture
def silent() -> Iterator[FakeOpenAIServer]:
    """A provider that accepts every request and never answers."""
    with FakeOpenAIServer(default=Action(hang=True)) as srv:
        yield srv


# -- configuration errors: raised, typed, with the provider's reason, never a fallback --------


def test_a_rejected_key_raises_provider_auth_error_never_a_fallback_and_stores_nothing(
    wrong_key: str, keyed: FakeOpenAIServer, open_mem: Callable[..., MemoryOS]
) -> None:
    mem = open_mem(_config(keyed.base_url, breaker_failure_threshold=2))
    mem.add_turn("ann", "My dog is called Rufus.", "Nice name.")
    for _ in range(3):  # past the breaker's threshold: still not taken for an outage
        with pytest.raises(ProviderAuthError) as caught:
            mem.chat_reply("ann", "What is my dog called?")
        err = caught.value
        assert isinstance(err, ProviderConfigError) and isinstance(err, GatewayError)
        message = str(err)
        assert "rejected the API key" in message and "HTTP 401" in message
        assert "Incorrect API key provided" in message and err.reason in message
        assert f"${KEY_ENV}" in message  # how to fix it
        _no_key_in(message)
    mem.flush()
    assert mem.user_state("ann").turns == 1  # no reply was stored
    stats = mem.stats()
    provider = stats["gateway"]["provider"]
    assert provider["state"] == "misconfigured"
    assert provider["breaker"]["completion"] == "closed"
    assert stats["degraded_chats"] == 0
    _no_key_in(json.dumps(stats))


def test_an_unknown_model_raises_provider_model_not_found(
    one_model: FakeOpenAIServer, open_mem: Callable[..., MemoryOS]
) -> None:
    mem = open_mem(_config(one_model.base_url, llm_model="openai/no-such-model"))
    with pytest.raises(ProviderModelNotFound) as caught:
        mem.chat("ann", "hello")
    message = str(caught.value)
    assert "openai/no-such-model" in message and "HTTP 404" in message
    assert "`no-such-model` does not exist" in message and "llm_model" in message
    assert one_model.state.refused >= 1
    assert "ann" not in mem.users()  # the turn was not stored: no user was created


def test_a_base_url_where_nothing_listens_raises_provider_unreachable(
    open_mem: Callable[..., MemoryOS],
) -> None:
    url = refused_url()
    mem = open_mem(_config(url))
    with pytest.raises(ProviderUnreachable) as caught:
        mem.chat_reply("ann", "hello", fallback=True)
    message = str(caught.value)
    assert f"cannot reach {url}" in message and "llm_base_url" in message


@pytest.mark.parametrize("client", ["http", "litellm"])
@pytest.mark.parametrize("scenario", ["401", "404", "refused"])
def test_both_client_paths_tell_configuration_errors_apart(
    wrong_key: str,
    client: str,
    scenario: str,
    make_service: Callable[..., GatewayService],
) -> None:
    expected: dict[str, type[ProviderConfigError]] = {
        "401": ProviderAuthError,
        "404": ProviderModelNotFound,
        "refused": ProviderUnreachable,
    }
    with FakeOpenAIServer(
        api_key=RIGHT_KEY if scenario == "401" else None,
        models={"other-model"} if scenario == "404" else None,
    ) as srv:
        url = refused_url() if scenario == "refused" else srv.base_url
        svc = make_service(
            gateway_config(
                llm_backend="litellm",
                llm_model="openai/fake-model",
                llm_base_url=url,
                llm_api_key_env=KEY_ENV,
                llm_client=client,
                llm_max_retries=0,
            )
        )
        with pytest.raises(expected[scenario]) as caught:
            svc.complete("chat_reply", chat_payload(1), raise_config_errors=True)
        _no_key_in(str(caught.value))
        # Background work (no one waits for it) still gets an answer, marked degraded with
        # the configuration error as the reason; the breaker stays closed.
        done = svc.complete("chat_reply", chat_payload(2))
        assert done.degraded and done.backend == OFFLINE
        assert done.reason is not None and done.reason.startswith("provider misconfigured")
        stats = svc.stats()
        assert stats["breaker"]["completion"] == "closed"
        assert stats["provider"]["state"] == "misconfigured"
        svc.close()


@pytest.mark.parametrize("client", ["http", "litellm"])
def test_a_bad_request_naming_the_model_is_an_unknown_model_any_other_is_not(
    litellm_ready: None,
    server: FakeOpenAIServer,
    client: str,
    make_service: Callable[..., GatewayService],
) -> None:
    svc = make_service(
        gateway_config(
            llm_backend="litellm",
            llm_model="openai/fake-model",
            llm_base_url=server.base_url,
            llm_api_key_env=KEY_ENV,
            llm_client=client,
            llm_max_retries=0,
        )
    )
    server.script_chat(
        Action(status=400, message="Invalid model name passed: fake-model"),
        Action(status=400, message="context length exceeded"),
    )
    with pytest.raises(ProviderModelNotFound, match="Invalid model name passed"):
        svc.complete("chat_reply", chat_payload(1), raise_config_errors=True)
    other = svc.complete("chat_reply", chat_payload(2), raise_config_errors=True)
    assert other.degraded and other.reason == "provider call failed: " + (
        "HTTP 400" if client == "http" else "BadRequestError (HTTP 400)"
    )


# -- outages: a fallback reply that says so, or ProviderUnavailable when asked ----------------


def test_an_outage_gives_a_degraded_reply_that_says_why_or_raises_when_asked(
    down: FakeOpenAIServer, open_mem: Callable[..., MemoryOS]
) -> None:
    mem = open_mem(_config(down.base_url, breaker_failure_threshold=1))
    mem.add_turn("ann", "My dog is called Rufus.", "Nice name.")
    reply = mem.chat_reply("ann", "What is my dog called?")
    assert isinstance(reply, ChatReply) and reply.degraded and reply.backend == OFFLINE
    assert reply.reason is not None and "HTTP 500" in reply.reason
    assert "SECRET-ERROR-TEXT" not in reply.reason  # the provider's body is never shown
    assert isinstance(mem.chat("ann", "And my dog's name again?"), str)  # chat stays a str
    with pytest.raises(ProviderUnavailable, match="circuit breaker open"):
        mem.chat_reply("ann", "Still there?", fallback=False)
    mem.flush()
    assert mem.user_state("ann").turns == 3  # the two fallback replies, not the refused one
    stats = mem.stats()
    assert stats["degraded_chats"] == 2
    assert stats["gateway"]["breaker"]["completion"] == "open"
    assert stats["gateway"]["provider"]["state"] == "degraded"


def test_a_provider_that_never_answers_times_out_into_a_degraded_reply(
    silent: FakeOpenAIServer, open_mem: Callable[..., MemoryOS]
) -> None:
    mem = open_mem(_config(silent.base_url, llm_timeout_seconds=0.5))
    reply = mem.chat_reply("ann", "hello?")
    assert reply.degraded and reply.reason is not None and "timeout" in reply.reason.lower()
    with pytest.raises(ProviderUnavailable):
        mem.chat_reply("ann", "anyone?", fallback=False)


def test_a_good_provider_gives_replies_that_are_not_degraded(
    keyed: FakeOpenAIServer,
    open_mem: Callable[..., MemoryOS],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(KEY_ENV, RIGHT_KEY)
    mem = open_mem(_config(keyed.base_url))
    reply = mem.chat_reply("ann", "hello")
    assert reply == ChatReply("provider reply", False, None, "litellm:openai/fake-model")
    assert mem.stats()["gateway"]["provider"]["state"] == "ok"


# -- doctor -------------------------------------------------------------------------------------


def _lines(report: Any) -> dict[str, str]:
    return {c.name: c.line() for c in report.checks}


def test_doctor_passes_a_working_provider_and_the_offline_default(
    tmp_path: Path,
    keyed: FakeOpenAIServer,
    monkeypatch: pytest.MonkeyPatch,
    litellm_ready: None,
) -> None:
    offline = doctor(tmp_path / "data")
    assert offline.ok and [c.status for c in offline.checks] == ["ok", "ok", "ok", "skip"]
    monkeypatch.setenv(KEY_ENV, RIGHT_KEY)
    report = doctor(tmp_path / "data", _config(keyed.base_url))
    assert report.ok, str(report)
    assert "litellm:openai/fake-model answered" in _lines(report)["llm"]
    assert "JSON mode" in _lines(report)["llm"]
    assert keyed.chat_requests == 1
    with keyed.state.lock:
        assert keyed.state.bodies[0]["response_format"] == {"type": "json_object"}


@pytest.mark.parametrize(
    "scenario, words",
    [
        ("401", ["rejected the API key", "HTTP 401", "Incorrect API key provided"]),
        ("404", ["HTTP 404", "does not exist", "llm_model"]),
        ("500", ["unavailable", "HTTP 500", "outage, not a configuration error"]),
        ("hang", ["unavailable", "timeout"]),
        ("refused", ["cannot reach"]),
        ("no key", [f"{KEY_ENV} is not set", f"export {KEY_ENV}="]),
    ],
)
def test_doctor_fails_each_broken_provider_with_one_line_that_says_what_and_how(
    tmp_path: Path,
    wrong_key: str,
    monkeypatch: pytest.MonkeyPatch,
    scenario: str,
    words: list[str],
) -> None:
    if scenario == "no key":
        monkeypatch.delenv(KEY_ENV)
    with FakeOpenAIServer(
        api_key=RIGHT_KEY if scenario == "401" else None,
        models={"other"} if scenario == "404" else None,
        default={"500": Action(status=500), "hang": Action(hang=True)}.get(scenario),
    ) as srv:
        url = refused_url() if scenario == "refused" else srv.base_url
        # Short only where the provider never answers: a loaded machine once took over
        # 0.5 s for the fake's HTTP 500, and the doctor rightly called that a timeout.
        timeout = 0.5 if scenario == "hang" else 10.0
        report = doctor(tmp_path / "data", _config(url, llm_timeout_seconds=timeout))
    assert not report.ok
    llm = report.checks[0]
    assert llm.name == "llm" and llm.status == "fail"
    assert llm.config_error == (scenario not in ("500", "hang"))
    line = llm.line()
    assert "\n" not in line and all(w in line for w in words), line
    assert all(c.ok for c in report.checks[1:])  # the other checks are unaffected
    _no_key_in(str(report))


def test_doctor_checks_the_data_dir_lock_the_stored_embedder_and_the_key_file(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    with MemoryOS.open(data, MemoryConfig(embedding_dim=64)) as mem:
        mem.add_turn("ann", "hello", "hi")
        mem.flush()
        locked = doctor(data, MemoryConfig(embedding_dim=64))
    assert not locked.ok and "in use by process" in _lines(locked)["data dir"]
    other = doctor(data, MemoryConfig(embedding_dim=128))
    assert not other.ok and "hashing-v1-64" in _lines(other)["embedder"]
    same = doctor(data, MemoryConfig(embedding_dim=64))
    assert same.ok and "matches the 1 stored user" in _lines(same)["embedder"]
    keys = tmp_path / "keys.json"
    keys.write_text(
        json.dumps(
            {
                "format": "memoryos-actors/api-keys",
                "version": 1,
                "keys": [{"key_id": "a" * 12, "tenant": "t", "sha256": "b" * 64}],
            }
        )
    )
    keys.chmod(0o644)
    cfg = MemoryConfig(embedding_dim=64)
    loose = doctor(data, cfg, keys_file=keys)
    assert not loose.ok and f"chmod 600 {keys}" in _lines(loose)["key file"]
    keys.chmod(0o600)
    tight = doctor(data, cfg, keys_file=keys)
    assert tight.ok and "1 key for 1 tenant" in _lines(tight)["key file"]
    bad = tmp_path / "bad.json"
    incomplete_doc = json.loads(keys.read_text())
    del incomplete_doc["keys"][0]["sha256"]
    bad.write_text(json.dumps(incomplete_doc))
    bad.chmod(0o600)
    incomplete = doctor(data, cfg, keys_file=bad)
    assert not incomplete.ok and "sha256" in _lines(incomplete)["key file"]
    missing = doctor(data, cfg, keys_file=tmp_path / "nope.json")
    assert not missing.ok and "memoryos keys add" in _lines(missing)["key file"]
