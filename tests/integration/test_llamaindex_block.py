"""The LlamaIndex memory block (extra ``llamaindex``), against the real
``llama-index-core``: used as LlamaIndex documents it, in ``Memory.from_defaults``."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

pytest.importorskip("llama_index.core")

from llama_index.core.base.llms.types import ChatMessage, MessageRole
from llama_index.core.memory import Memory

from memoryos_actors import MemoryOS
from memoryos_actors.integrations.llamaindex import MemoryOSBlock, turns_of


def _msg(role: MessageRole, text: str) -> ChatMessage:
    return ChatMessage(role=role, content=text)


def test_a_fact_put_through_the_memory_comes_back_in_its_block_and_only_for_its_user(
    open_mem: Callable[..., MemoryOS],
) -> None:
    mem = open_mem()

    def memory(user: str) -> Memory:
        # A tiny chat-history budget: LlamaIndex moves older messages into the block.
        return Memory.from_defaults(
            session_id=user,
            token_limit=60,
            chat_history_token_ratio=0.2,
            token_flush_size=10,
            memory_blocks=[MemoryOSBlock(mem=mem, user_id=user)],
        )

    async def scenario() -> tuple[str, str]:
        alice, bob = memory("alice"), memory("bob")
        try:
            for text in ("My sister Ines lives in Lisbon.", "I play the cello on Sundays."):
                await alice.aput_messages(
                    [_msg(MessageRole.USER, text), _msg(MessageRole.ASSISTANT, "Noted.")]
                )
            await bob.aput_messages(
                [_msg(MessageRole.USER, "I collect stamps."), _msg(MessageRole.ASSISTANT, "Ok.")]
            )
            assert "alice" in mem.users()  # the flush out of the chat history reached us
            for m in (alice, bob):
                await m.aput(_msg(MessageRole.USER, "Where does Ines live?"))
            prompts = ["\n".join(str(msg.content) for msg in await m.aget()) for m in (alice, bob)]
            return prompts[0], prompts[1]
        finally:
            for m in (alice, bob):  # LlamaIndex's SQLite chat store keeps connection threads
                if m.sql_store._async_engine is not None:
                    await m.sql_store._async_engine.dispose()

    alice_prompt, bob_prompt = asyncio.run(scenario())
    # The fact left LlamaIndex's chat history and comes back from our block.
    block = alice_prompt.split("<memoryos>", 1)[1].split("</memoryos>", 1)[0]
    assert "Lisbon" in block
    assert "Lisbon" not in alice_prompt.split("</memory>", 1)[1]
    assert "Lisbon" not in bob_prompt and "stamps" not in alice_prompt


def test_the_block_stores_pairs_as_turns_and_answers_retrieve(
    open_mem: Callable[..., MemoryOS],
) -> None:
    mem = open_mem()
    block = MemoryOSBlock(mem=mem, user_id="u")
    question = [_msg(MessageRole.USER, "What is my dog's name?")]
    # Nothing stored yet (retrieve raises UnknownUser today): empty, and nothing written.
    assert asyncio.run(block.aget(question)) == ""
    assert "u" not in mem.users()
    asyncio.run(
        block.aput(
            [
                _msg(MessageRole.SYSTEM, "be nice"),
                _msg(MessageRole.USER, "My dog is called Biscuit."),
                _msg(MessageRole.ASSISTANT, "Biscuit is a lovely name."),
                _msg(MessageRole.USER, "bye"),
            ]
        )
    )
    pages = mem.memories("u", kinds=["page"])
    assert [(p.query, p.response) for p in pages] == [
        ("My dog is called Biscuit.", "Biscuit is a lovely name."),
        ("bye", ""),
    ]
    assert "Biscuit" in asyncio.run(block.aget(question))


def test_turns_of_keeps_tool_results_and_leading_replies() -> None:
    turns = turns_of(
        [
            _msg(MessageRole.ASSISTANT, "hello"),
            _msg(MessageRole.USER, "q"),
            _msg(MessageRole.TOOL, "42"),
            _msg(MessageRole.ASSISTANT, "it is 42"),
        ]
    )
    assert turns == [("", "hello"), ("q", "tool: 42\nit is 42")]
