"""Chat against the loopback OpenAI-compatible server, on both client paths (plain HTTP and
litellm): a reply in prose is the reply, a reply that echoes the prompt is rejected, and
``chat_stream`` gives the provider's pieces as they come and stores the turn once at the
end (never for a stream that broke off or was abandoned)."""

from __future__ import annotations

import asyncio
import importlib.util
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

if importlib.util.find_spec("litellm") is None:  # imported by the tests that use it
    pytest.skip("litellm is not installed", allow_module_level=True)

from fakeserver import Action, FakeOpenAIServer
from gwhelpers import KEY_ENV

from memoryos_actors import AsyncMemoryOS, MemoryOS
from memoryos_actors.clock import ManualClock
from memoryos_actors.config import MemoryConfig
from memoryos_actors.errors import GatewayError, ProviderUnavailable
from memoryos_actors.gateway.service import HOLD_CHARS

CLIENTS = ["http", "litellm"]
PROSE = "Your kite is red: you told me so when we talked about the beach."
#: A reply streamed in pieces, longer than what is held back before the first piece.
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
WHOLE = "".join(PIECES)


def _config(server: FakeOpenAIServer, client: str, **overrides: Any) -> MemoryConfig:
    base: dict[str, Any] = dict(
        llm_backend="litellm",
        llm_model="openai/fake-model",
        llm_base_url=server.base_url,
        llm_api_key_env=KEY_ENV,
        llm_client=client,
        llm_timeout_seconds=10.0,
        llm_max_retries=0,
        heat_tick_seconds=3600.0,
        fsync="never",
        log_level="error",
    )
    base.update(overrides)
    return MemoryConfig(**base)


@pytest.fixture
def open_mem(tmp_path: Path, litellm_ready: None) -> Iterator[Callable[..., MemoryOS]]:
    opened: list[MemoryOS] = []

    def _open(config: MemoryConfig | None = None) -> MemoryOS:
        mem = MemoryOS.open(
            tmp_path / f"data{len(opened)}", config, clock=ManualClock(1_700_000_000.0)
        )
        opened.append(mem)
        return mem

    yield _open
    for mem in opened:
        mem.close()


def _seed(mem: MemoryOS) -> None:
    """One turn for ``ann``, its background calls done (so the next request the server
    gets, which takes the action scripted next, is the chat)."""
    mem.add_turn("ann", "My kite is red.", "Nice.")
    mem.flush()


def _responses(mem: MemoryOS, user: str) -> list[str]:
    """The responses of the user's stored turns, oldest first (a few turns: all in STM)."""
    mem.flush()
    if user not in mem.users():
        return []
    state = mem.user_state(user)
    return [p.response for p in (*state.outbox, *state.stm)]


def _chat_bodies(server: FakeOpenAIServer) -> list[dict[str, Any]]:
    with server.state.lock:
        bodies = list(server.state.bodies)
    return [b for b in bodies if "Memory context:\n" in b["messages"][1]["content"]]


# -- plain text ---------------------------------------------------------------------------


@pytest.mark.parametrize("client", CLIENTS)
def test_a_reply_in_prose_is_the_reply_stored_and_no_json_mode_is_asked_for(
    open_mem: Callable[..., MemoryOS], server: FakeOpenAIServer, client: str
) -> None:
    server.state.responder = lambda kind, payload: PROSE if kind == "chat_reply" else None
    mem = open_mem(_config(server, client))
    _seed(mem)
    reply = mem.chat_reply("ann", "What colour is my kite?")
    assert (reply.text, reply.degraded, reply.reason) == (PROSE, False, None)
    assert reply.backend == "litellm:openai/fake-model"
    assert _responses(mem, "ann") == ["Nice.", PROSE]
    asked = _chat_bodies(server)
    assert len(asked) == 1 and "response_format" not in asked[0]
    # The prompt carries the memory and the message as text, not as JSON.
    assert "My kite is red." in asked[0]["messages"][1]["content"]
    assert "JSON" not in asked[0]["messages"][0]["content"] + asked[0]["messages"][1]["content"]


@pytest.mark.parametrize("client", CLIENTS)
@pytest.mark.parametrize("echo", ["text", "json"])
def test_a_reply_echoing_the_prompt_is_rejected_counted_and_never_stored(
    open_mem: Callable[..., MemoryOS], server: FakeOpenAIServer, client: str, echo: str
) -> None:
    mem = open_mem(_config(server, client))
    _seed(mem)
    server.script_chat(Action(echo=echo))
    reply = mem.chat_reply("ann", "What colour is my kite?")
    assert reply.degraded and reply.reason is not None
    assert "echoed the prompt back" in reply.reason
    stored = _responses(mem, "ann")
    assert len(stored) == 2 and stored[-1] == reply.text  # the fallback's reply, not the echo
    assert "Memory context" not in reply.text and "helpful assistant" not in reply.text
    stats = mem.stats()
    assert stats["degraded_chats"] == 1
    assert stats["gateway"]["echoed_answers"] == 1
    assert len(_chat_bodies(server)) == 1  # an echo is not asked again


def test_without_fallback_an_echo_raises_and_stores_nothing(
    open_mem: Callable[..., MemoryOS], server: FakeOpenAIServer
) -> None:
    mem = open_mem(_config(server, "http"))
    server.script_chat(Action(echo="text"))
    with pytest.raises(ProviderUnavailable, match="echoed the prompt back"):
        mem.chat_reply("ann", "What colour is my kite?", fallback=False)
    assert mem.users() == []


# -- streaming ----------------------------------------------------------------------------


@pytest.mark.parametrize("client", CLIENTS)
def test_chat_stream_gives_the_providers_pieces_as_they_come_and_stores_one_turn(
    open_mem: Callable[..., MemoryOS], server: FakeOpenAIServer, client: str
) -> None:
    mem = open_mem(_config(server, client))
    _seed(mem)
    held = next(n for n in range(1, len(PIECES) + 1) if len("".join(PIECES[:n])) >= HOLD_CHARS)
    # The provider sends the first `held` pieces, then waits until the caller has the
    # first piece before it sends the rest: a stream given out only at its end would
    # make it wait in vain.
    server.script_chat(Action(pieces=PIECES, piece_delay=0.01, gate_after=held + 1))
    got: list[str] = []
    with mem.chat_stream("ann", "What colour is my kite?") as stream:
        for piece in stream:
            got.append(piece)
            server.state.gate.set()
    # The first HOLD_CHARS characters come as one piece (held back to be checked for an
    # echo); every later piece as the provider sent it, in order.
    assert got == ["".join(PIECES[:held]), *PIECES[held:]]
    # The first piece was given out while the provider was still writing.
    assert server.state.gate_timed_out is False
    assert stream.reply is not None
    assert (stream.reply.text, stream.reply.degraded) == (WHOLE, False)
    assert _responses(mem, "ann") == ["Nice.", WHOLE]
    assert mem.stats()["chats"] == 1
    body = _chat_bodies(server)[-1]
    assert body["stream"] is True and "response_format" not in body


@pytest.mark.parametrize("client", CLIENTS)
def test_a_stream_cut_off_mid_way_raises_and_stores_no_partial_turn(
    open_mem: Callable[..., MemoryOS], server: FakeOpenAIServer, client: str
) -> None:
    mem = open_mem(_config(server, client))
    server.script_chat(Action(pieces=PIECES, cut_after=len(PIECES) - 3))
    got: list[str] = []
    stream = mem.chat_stream("ann", "What colour is my kite?")
    with pytest.raises(ProviderUnavailable, match="broke off"):
        for piece in stream:
            got.append(piece)
    assert got and "".join(got) == "".join(PIECES[: len(PIECES) - 3])
    assert stream.reply is None
    assert mem.users() == [] and mem.stats()["chats"] == 0
    # The system is fine afterwards: the next chat is answered and stored.
    assert mem.chat_reply("ann", "Still there?").text == "provider reply"
    assert _responses(mem, "ann") == ["provider reply"]


def test_an_abandoned_stream_stores_nothing(
    open_mem: Callable[..., MemoryOS], server: FakeOpenAIServer
) -> None:
    mem = open_mem(_config(server, "http"))
    server.script_chat(Action(pieces=PIECES * 4, piece_delay=0.02))
    with mem.chat_stream("ann", "Tell me about my kite.") as stream:
        first = next(stream)
    assert first.startswith("Your kite")
    with pytest.raises(StopIteration):
        next(stream)  # closed: ends at once
    assert stream.reply is None
    assert mem.users() == [] and mem.stats()["chats"] == 0


def test_a_stream_whose_start_echoes_the_prompt_falls_back_like_chat_reply(
    open_mem: Callable[..., MemoryOS], server: FakeOpenAIServer
) -> None:
    mem = open_mem(_config(server, "http"))
    _seed(mem)
    server.script_chat(Action(echo="text"))
    stream = mem.chat_stream("ann", "What colour is my kite?")
    text = "".join(stream)
    assert stream.reply is not None and stream.reply.degraded
    assert "echoed the prompt back" in (stream.reply.reason or "")
    assert "Memory context" not in text and _responses(mem, "ann") == ["Nice.", text]


def test_a_whole_streamed_reply_found_to_echo_the_prompt_raises_and_stores_nothing(
    open_mem: Callable[..., MemoryOS], server: FakeOpenAIServer
) -> None:
    mem = open_mem(_config(server, "http"))
    # Past the part held back, the reply turns into the prompt's own closing line.
    server.script_chat(Action(pieces=(*PIECES, " Your reply (plain text):")))
    with pytest.raises(GatewayError, match="echoed the prompt back"):
        "".join(mem.chat_stream("ann", "What colour is my kite?"))
    assert mem.users() == []
    assert mem.stats()["gateway"]["echoed_answers"] == 1


def test_a_provider_down_before_the_first_piece_streams_the_fallback_reply(
    open_mem: Callable[..., MemoryOS], server: FakeOpenAIServer
) -> None:
    mem = open_mem(_config(server, "http"))
    _seed(mem)
    server.script_chat(Action(status=500))
    stream = mem.chat_stream("ann", "What colour is my kite?")
    pieces = list(stream)
    assert len(pieces) > 1 and stream.reply is not None and stream.reply.degraded
    assert "HTTP 500" in (stream.reply.reason or "")
    assert _responses(mem, "ann") == ["Nice.", "".join(pieces)]
    assert mem.stats()["degraded_chats"] == 1


@pytest.mark.parametrize("client", CLIENTS)
def test_the_async_stream_gives_the_same_pieces_and_stores_one_turn(
    open_mem: Callable[..., MemoryOS], server: FakeOpenAIServer, client: str
) -> None:
    mem = open_mem(_config(server, client))
    server.script_chat(Action(pieces=PIECES))

    async def talk() -> tuple[list[str], Any, str]:
        amem = AsyncMemoryOS(mem)
        try:
            stream = amem.chat_stream("ann", "What colour is my kite?")
            got = [piece async for piece in stream]
            await amem.flush()  # the stored turn's background calls, before the next script
            server.script_chat(Action(pieces=PIECES * 4, piece_delay=0.02))
            async with amem.chat_stream("ann", "And again?") as abandoned:
                first = await anext(abandoned)
            return got, stream.reply, first
        finally:
            await amem.detach()

    got, reply, first = asyncio.run(talk())
    assert "".join(got) == WHOLE and len(got) > 1
    assert reply is not None and reply.text == WHOLE
    assert first.startswith("Your kite")
    assert _responses(mem, "ann") == [WHOLE]  # the abandoned second stream stored nothing


def test_the_offline_backend_streams_its_reply_in_pieces(
    open_mem: Callable[..., MemoryOS],
) -> None:
    mem = open_mem(MemoryConfig(fsync="never", log_level="error", heat_tick_seconds=3600.0))
    mem.add_turn("ann", "I live in Lyon.", "Nice city.")
    stream = mem.chat_stream("ann", "Where do I live?")
    pieces = list(stream)
    assert len(pieces) > 1 and "Lyon" in "".join(pieces)
    assert stream.reply is not None and not stream.reply.degraded
    assert _responses(mem, "ann") == ["Nice city.", "".join(pieces)]


def test_an_async_stream_closed_while_a_piece_is_awaited_ends_and_stores_nothing(
    open_mem: Callable[..., MemoryOS], server: FakeOpenAIServer
) -> None:
    """What a server does when its client disconnects mid-stream: the task waiting for
    the next piece is abandoned from the event loop while a pool thread waits for it."""
    mem = open_mem(_config(server, "http"))
    pieces = (PIECES[0] * 10, *PIECES * 2)
    server.script_stream(Action(pieces=pieces, piece_delay=0.05))
    started = time.monotonic()

    async def talk() -> tuple[str, bool]:
        amem = AsyncMemoryOS(mem)
        try:
            stream = amem.chat_stream("ann", "Tell me a long story.")
            first = await anext(stream)
            waiting = asyncio.ensure_future(anext(stream, None))
            await asyncio.sleep(0.02)  # the next piece is being waited for in the pool
            await stream.aclose()
            rest = await asyncio.wait_for(waiting, 5.0)  # the wait ends: no hang
            return first, rest is None or isinstance(rest, str)
        finally:
            await amem.detach()

    first, ended = asyncio.run(talk())
    assert first.startswith("Your kite") and ended
    # Past the time the whole reply would have taken, and then some: nothing stored.
    time.sleep(max(0.0, 0.05 * len(pieces) + 0.5 - (time.monotonic() - started)))
    assert mem.users() == [] and mem.stats()["chats"] == 0


def test_a_server_that_does_not_stream_gives_its_whole_reply_on_the_http_path(
    open_mem: Callable[..., MemoryOS], server: FakeOpenAIServer
) -> None:
    mem = open_mem(_config(server, "http"))
    server.script_stream(Action(content=PROSE, no_stream=True))
    stream = mem.chat_stream("ann", "What colour is my kite?")
    assert "".join(stream) == PROSE
    assert stream.reply is not None and not stream.reply.degraded
    assert _responses(mem, "ann") == [PROSE]
