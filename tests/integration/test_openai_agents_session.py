"""The OpenAI Agents SDK session (extra ``openai-agents``), against the real SDK: a
``Runner.run`` with a fake model (no network) over two sessions."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from types import SimpleNamespace
from typing import Any

import pytest

agents = pytest.importorskip("agents")

from agents import Agent, Model, ModelProvider, RunConfig, Runner, function_tool
from agents.items import ModelResponse
from agents.memory import Session
from agents.usage import Usage
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)
from sysutil import SMALL

from memoryos_actors import MemoryConfig, MemoryOS
from memoryos_actors.integrations.openai_agents import (
    ITEMS_MARK,
    MemorySession,
    decode,
    encode,
    memory_instructions,
)


class FakeModel(Model):
    """Calls the ``note`` tool for a user message that starts with "note:", then answers
    with what it saw: how many input items, and every user text among them. Records the
    instructions and the input of each call."""

    def __init__(self) -> None:
        self.calls: list[tuple[str | None, list[Any]]] = []

    async def get_response(
        self, system_instructions: str | None, input: Any, *args: Any, **kwargs: Any
    ) -> ModelResponse:
        items = [{"role": "user", "content": input}] if isinstance(input, str) else list(input)
        self.calls.append((system_instructions, items))
        last = items[-1]
        n = len(self.calls)
        if last.get("role") == "user" and str(last.get("content")).startswith("note:"):
            call = ResponseFunctionToolCall(
                arguments='{"text": "x"}',
                call_id=f"call_{n}",
                name="note",
                type="function_call",
                id=f"fc_{n}",
                status="completed",
            )
            return ModelResponse(output=[call], usage=Usage(), response_id=None)
        users = [i["content"] for i in items if i.get("role") == "user"]
        text = f"saw {len(items)} items; users said: {' | '.join(map(str, users))}"
        msg = ResponseOutputMessage(
            id=f"msg_{n}",
            role="assistant",
            status="completed",
            type="message",
            content=[ResponseOutputText(text=text, type="output_text", annotations=[])],
        )
        return ModelResponse(output=[msg], usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        raise NotImplementedError


class FakeProvider(ModelProvider):
    def __init__(self, model: FakeModel) -> None:
        self.model = model

    def get_model(self, model_name: str | None) -> Model:
        return self.model


@function_tool
def note(text: str) -> str:
    """Take a note."""
    return f"noted {text}"


def _run(agent: Agent[Any], text: str, session: MemorySession, model: FakeModel) -> str:
    config = RunConfig(model_provider=FakeProvider(model), tracing_disabled=True)
    result = asyncio.run(
        Runner.run(agent, text, session=session, context=session, run_config=config)
    )
    return str(result.final_output)


def test_a_second_run_sees_the_first_and_another_session_sees_neither(
    open_mem: Callable[..., MemoryOS],
) -> None:
    mem = open_mem()
    model = FakeModel()
    agent: Agent[Any] = Agent(name="a", instructions="Be brief.", tools=[note])
    alice = MemorySession("alice", mem, prefix="acme:")
    bob = MemorySession("bob", mem, prefix="acme:")
    assert isinstance(alice, Session)  # the SDK's protocol, checked at run time

    _run(agent, "note: my cat is called Tom", alice, model)
    first = asyncio.run(alice.get_items())
    # user, tool call, tool output, assistant: all kept, the tool items as the SDK made them
    assert [i.get("type", "message") for i in first] == [
        "message",
        "function_call",
        "function_call_output",
        "message",
    ]
    assert first[1]["call_id"] == "call_1" and first[2]["output"] == "noted x"

    reply = _run(agent, "what is my cat called?", alice, model)
    # The model's input for the second run starts with the first run's items.
    _, seen = model.calls[-1]
    assert seen[: len(first)] == first
    assert "my cat is called Tom" in reply

    _run(agent, "hello", bob, model)
    _, bob_seen = model.calls[-1]
    assert bob_seen == [{"role": "user", "content": "hello"}]
    assert all("Tom" not in str(i) for i in asyncio.run(bob.get_items()))
    assert len(asyncio.run(alice.get_items())) == len(first) + 2
    assert set(mem.users()) == {"acme:alice", "acme:bob"}


def test_a_run_stores_its_question_and_answer_as_one_turn(
    open_mem: Callable[..., MemoryOS],
) -> None:
    """The SDK stores the input before the model answers and the new items after: the
    two make one page, the user's text its query, the tool call, its output and the reply
    its response (then the pair is what retrieve shows, not two halves)."""
    mem = open_mem()
    model = FakeModel()
    agent: Agent[Any] = Agent(name="a", instructions="Be brief.", tools=[note])
    session = MemorySession("s", mem)
    _run(agent, "note: my cat is called Tom", session, model)
    _run(agent, "and my dog is Rex", session, model)
    pages = mem.memories("s", kinds=["page"])
    assert [p.query for p in pages] == ["note: my cat is called Tom", "and my dog is Rex"]
    first = pages[0].response.splitlines()
    assert first[0] == 'tool call note({"text": "x"})' and first[1] == "tool output: noted x"
    assert first[2].startswith("saw ") and first[3].startswith(ITEMS_MARK)
    assert pages[1].response.startswith("saw ")
    assert len(asyncio.run(session.get_items())) == 6


def test_a_reply_too_big_to_join_its_question_gets_a_page_of_its_own(
    open_mem: Callable[..., MemoryOS],
) -> None:
    mem = open_mem(MemoryConfig(**SMALL, max_text_bytes=2000))
    session = MemorySession("s", mem)
    question = {"role": "user", "content": "q"}
    output = {"type": "function_call_output", "call_id": "c", "output": "x" * 900}
    asyncio.run(session.add_items([question]))
    asyncio.run(session.add_items([output]))  # joins: one page
    asyncio.run(session.add_items([output]))  # would pass 2,000 bytes: a page of its own
    assert len(mem.memories("s", kinds=["page"])) == 2
    assert asyncio.run(session.get_items()) == [question, output, output]


def test_items_round_trip_in_order_after_leaving_short_term_memory(
    open_mem: Callable[..., MemoryOS],
) -> None:
    """Twenty exchanges (STM holds 7 pages): every item comes back, in order, and the old
    turns are found by retrieve."""
    mem = open_mem()
    session = MemorySession("s", mem)
    items: list[dict[str, Any]] = []
    for i in range(20):
        items += [
            {"role": "user", "content": f"turn {i} about topic{i}"},
            {"type": "function_call_output", "call_id": f"c{i}", "output": f"out {i}"},
            {"role": "assistant", "content": [{"type": "output_text", "text": f"ok {i}"}]},
        ]
    asyncio.run(session.add_items(items[:30]))
    asyncio.run(session.add_items(items[30:]))
    mem.flush()
    assert asyncio.run(session.get_items()) == items
    assert asyncio.run(session.get_items(limit=4)) == items[-4:]
    found = mem.retrieve("s", "topic2")
    assert any("turn 2 about topic2" in item.text for item in (*found.stm, *found.mtm))


def test_pop_item_removes_the_last_item_and_clear_session_forgets_the_user(
    open_mem: Callable[..., MemoryOS],
) -> None:
    mem = open_mem()
    session = MemorySession("s", mem)
    assert asyncio.run(session.pop_item()) is None
    assert asyncio.run(session.get_items()) == []
    items = [
        {"role": "user", "content": "a"},
        {"role": "assistant", "content": "b"},
        {"role": "user", "content": "c"},
        {"role": "assistant", "content": "d"},
    ]
    asyncio.run(session.add_items(items))
    assert asyncio.run(session.pop_item()) == items[3]
    assert asyncio.run(session.get_items()) == items[:3]
    assert asyncio.run(session.pop_item()) == items[2]
    assert asyncio.run(session.get_items()) == items[:2]
    asyncio.run(session.clear_session())
    assert asyncio.run(session.get_items()) == []
    assert "s" not in mem.users()
    asyncio.run(session.clear_session())  # clearing an empty session is fine


def test_a_page_stored_by_chat_reads_back_as_a_user_and_an_assistant_message(
    open_mem: Callable[..., MemoryOS],
) -> None:
    mem = open_mem()
    mem.add_turn("s", "hi there", "hello!")
    assert asyncio.run(MemorySession("s", mem).get_items()) == [
        {"role": "user", "content": "hi there"},
        {"role": "assistant", "content": "hello!"},
    ]
    query, response = encode([{"role": "user", "content": "q"}, {"type": "reasoning", "id": "r"}])
    assert query == "q" and decode(query, response)[1] == {"type": "reasoning", "id": "r"}


def test_memory_instructions_carry_what_is_retrieved_for_the_latest_input(
    open_mem: Callable[..., MemoryOS],
) -> None:
    mem = open_mem()
    mem.add_turn("acme:alice", "My favourite colour is teal.", "Noted: teal.")
    model = FakeModel()
    agent: Agent[Any] = Agent(
        name="a", instructions=memory_instructions(mem, "Be brief."), tools=[note]
    )
    _run(agent, "which colour do I like?", MemorySession("alice", mem, prefix="acme:"), model)
    instructions, _ = model.calls[-1]
    assert instructions is not None and instructions.startswith("Be brief.")
    assert "teal" in instructions
    # Another user's run: nothing of alice's in its instructions.
    _run(agent, "which colour do I like?", MemorySession("carol", mem, prefix="acme:"), model)
    assert "teal" not in str(model.calls[-1][0])
    # A user with no memory at all (retrieve raises UnknownUser today): the base alone.
    fn = memory_instructions(mem, "Be brief.", prefix="acme:")
    ctx = SimpleNamespace(
        context=SimpleNamespace(user_id="nobody"), turn_input=[{"role": "user", "content": "hello"}]
    )
    assert asyncio.run(fn(ctx, agent)) == "Be brief."
    assert "acme:nobody" not in mem.users()
