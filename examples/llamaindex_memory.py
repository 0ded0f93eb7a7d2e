"""A LlamaIndex ``Memory`` with a memory block backed by a user's memory (runs offline).

    pip install ".[llamaindex]"    # from the root of a checkout
    python examples/llamaindex_memory.py [DATA_DIR]

No LLM is called: the example shows the prompt messages the memory hands to one.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile

from llama_index.core.base.llms.types import ChatMessage, MessageRole
from llama_index.core.memory import Memory

from memoryos_actors import MemoryOS
from memoryos_actors.integrations.llamaindex import MemoryOSBlock


async def main(data_dir: str) -> None:
    with MemoryOS.open(data_dir) as mem:
        memory = Memory.from_defaults(
            session_id="alice",
            token_limit=60,  # small, so older messages move into the block at once
            chat_history_token_ratio=0.2,
            token_flush_size=10,
            memory_blocks=[MemoryOSBlock(mem=mem, user_id="alice")],
        )
        try:
            await memory.aput_messages(
                [
                    ChatMessage(role=MessageRole.USER, content="My sister Ines lives in Lisbon."),
                    ChatMessage(role=MessageRole.ASSISTANT, content="Noted."),
                ]
            )
            await memory.aput(ChatMessage(role=MessageRole.USER, content="Where does Ines live?"))
            for message in await memory.aget():
                print(f"[{message.role.value}]\n{message.content}\n")
        finally:
            # LlamaIndex's own chat store (SQLite) has no close(): end its connections.
            engine = memory.sql_store._async_engine  # noqa: SLF001
            if engine is not None:
                await engine.dispose()


if __name__ == "__main__":
    if len(sys.argv) > 1:
        asyncio.run(main(sys.argv[1]))
    else:
        with tempfile.TemporaryDirectory() as tmp:
            asyncio.run(main(tmp))
