"""What the agent-runtime adapters share: they work over the asyncio facade as over the
synchronous one, and importing the package imports no framework."""

from __future__ import annotations

import asyncio
import importlib.util
import subprocess
import sys
from pathlib import Path

from memoryos_actors import AsyncMemoryOS, ManualClock, MemoryConfig
from memoryos_actors.integrations.openai_agents import MemorySession


def test_import_memoryos_actors_and_its_integrations_imports_no_framework() -> None:
    code = (
        "import sys, memoryos_actors, memoryos_actors.integrations, "
        "memoryos_actors.integrations.openai_agents\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('agents', 'llama_index', 'openai', 'langgraph', 'langchain_core')))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == "[]"


def test_the_session_and_the_block_work_over_the_asyncio_facade(tmp_path: Path) -> None:
    async def scenario() -> tuple[list[dict[str, object]], str]:
        mem = await AsyncMemoryOS.open(
            tmp_path, MemoryConfig(fsync="never", log_level="error"), clock=ManualClock(1.7e9)
        )
        try:
            session = MemorySession("s", mem)
            items: list[dict[str, object]] = [
                {"role": "user", "content": "I live in Porto."},
                {"role": "assistant", "content": "Porto is lovely."},
            ]
            await session.add_items(items)
            got = await session.get_items()
            block_text = ""
            try:
                from llama_index.core.base.llms.types import ChatMessage, MessageRole

                from memoryos_actors.integrations.llamaindex import MemoryOSBlock
            except ImportError:  # the llamaindex extra is not installed
                pass
            else:
                block = MemoryOSBlock(mem=mem, user_id="s")
                question = ChatMessage(role=MessageRole.USER, content="Where do I live?")
                block_text = await block.aget([question])
            await session.clear_session()
            return got, block_text
        finally:
            await mem.close()

    got, block_text = asyncio.run(scenario())
    assert got == [
        {"role": "user", "content": "I live in Porto."},
        {"role": "assistant", "content": "Porto is lovely."},
    ]
    llamaindex = importlib.util.find_spec("llama_index") is not None
    assert ("Porto" in block_text) == llamaindex
