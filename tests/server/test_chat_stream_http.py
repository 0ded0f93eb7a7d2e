"""``POST /v1/users/{user}/chat/stream`` end to end: a real server process whose LLM is the
loopback fake provider, read with a real HTTP client as server-sent events."""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "gateway"))

from fakeserver import Action, FakeOpenAIServer
from srvutil import CONFIG_TOML, Server, add_key, start_server

KEY_ENV = "FAKE_PROVIDER_STREAM_KEY"  # not MEMORYOS_*: the server would read it as config
PIECES = (
    "Your kite ",
    "is red, ",
    "and you ",
    "fly it ",
    "on Sundays ",
    "at the beach ",
    "near Brest, ",
    "with your ",
    "sister ",
    "Anna, ",
    "when the ",
    "wind is ",
    "strong.",
)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, str, Any]]:
    root = tmp_path_factory.mktemp("stream")
    with FakeOpenAIServer() as provider:
        (root / "config.toml").write_text(
            CONFIG_TOML + f'llm_backend = "litellm"\nllm_model = "openai/fake-model"\n'
            f'llm_base_url = "{provider.base_url}"\nllm_api_key_env = "{KEY_ENV}"\n'
            "llm_timeout_seconds = 5.0\nllm_max_retries = 0\n",
            encoding="utf-8",
        )
        env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORYOS_")}
        env[KEY_ENV] = "sk-stream-test"
        key = add_key(root, root / "keys.json", "acme")
        server = start_server(root, root / "data", root / "keys.json", env=env)
        try:
            yield server, key, provider
        finally:
            server.stop()


def _events(server: Server, key: str, user: str, query: str) -> list[tuple[str, Any]]:
    """The stream's events, ``(name, data)``, in order."""
    events: list[tuple[str, Any]] = []
    with (
        server.client(key) as c,
        c.stream("POST", f"/v1/users/{user}/chat/stream", json={"query": query}) as r,
    ):
        assert r.status_code == 200, r.read()
        assert r.headers["content-type"].startswith("text/event-stream")
        name = None
        for line in r.iter_lines():
            if line.startswith("event: "):
                name = line.removeprefix("event: ")
            elif line.startswith("data: "):
                events.append((str(name), json.loads(line.removeprefix("data: "))))
    return events


def test_the_reply_streams_as_events_in_order_and_the_turn_is_stored_once(
    served: tuple[Server, str, FakeOpenAIServer],
) -> None:
    server, key, provider = served
    provider.script_stream(Action(pieces=PIECES))
    events = _events(server, key, "ann", "What colour is my kite?")
    names = [name for name, _ in events]
    assert names[-1] == "done" and set(names[:-1]) == {"piece"} and len(names) > 2
    text = "".join(data["text"] for name, data in events if name == "piece")
    assert text == "".join(PIECES)
    assert events[-1][1] == {"user_id": "ann", "reply": text, "degraded": False, "reason": None}
    with server.client(key) as c:
        pages = c.get("/v1/users/ann/memories").json()["pages"]
    assert [(p["query"], p["response"]) for p in pages] == [("What colour is my kite?", text)]


def test_a_provider_dying_mid_stream_ends_with_an_error_event_and_stores_nothing(
    served: tuple[Server, str, FakeOpenAIServer],
) -> None:
    server, key, provider = served
    provider.script_stream(Action(pieces=PIECES, cut_after=len(PIECES) - 2))
    events = _events(server, key, "bob", "Where do I fly my kite?")
    assert [name for name, _ in events][-1] == "error"
    assert events[0][0] == "piece"
    error = events[-1][1]["error"]
    assert error["type"] == "ProviderUnavailable" and "broke off" in error["message"]
    with server.client(key) as c:
        assert c.get("/v1/users/bob/memories").status_code == 404  # bob was never stored


def test_an_error_before_the_first_piece_is_an_ordinary_error_answer(
    served: tuple[Server, str, FakeOpenAIServer],
) -> None:
    server, key, _provider = served
    with server.client(key) as c:
        r = c.post("/v1/users/cy/chat/stream", json={"query": ""})
        assert r.status_code == 422, r.text
        assert r.json()["error"]["type"] == "InvalidInput"


def test_a_client_gone_before_the_end_stores_nothing(
    served: tuple[Server, str, FakeOpenAIServer],
) -> None:
    server, key, provider = served
    provider.script_stream(Action(pieces=PIECES * 3, piece_delay=0.05))
    started = time.monotonic()
    with (
        server.client(key) as c,
        c.stream("POST", "/v1/users/dee/chat/stream", json={"query": "Tell me a story."}) as r,
    ):
        assert r.status_code == 200
        first = next(line for line in r.iter_lines() if line.startswith("data: "))
        assert json.loads(first.removeprefix("data: "))["text"].startswith("Your kite")
    # Past the time the whole reply would have taken, and then some: still nothing stored.
    time.sleep(max(0.0, 0.05 * len(PIECES) * 3 + 1.0 - (time.monotonic() - started)))
    with server.client(key) as c:
        assert c.get("/v1/users/dee/memories").status_code == 404


def test_a_stream_that_echoes_the_prompt_is_answered_by_the_fallback_and_counted(
    served: tuple[Server, str, FakeOpenAIServer],
) -> None:
    server, key, provider = served
    provider.script_stream(Action(echo="text"))
    events = _events(server, key, "eve", "Which book did I like?")
    done = events[-1]
    assert done[0] == "done" and done[1]["degraded"] is True
    assert "echoed the prompt back" in done[1]["reason"]
    text = "".join(data["text"] for name, data in events if name == "piece")
    assert text == done[1]["reply"] and "Memory context" not in text
    with server.client(key) as c:
        metrics = c.get("/metrics").text
    assert "memoryos_llm_echoed_answers_total 1.0" in metrics
