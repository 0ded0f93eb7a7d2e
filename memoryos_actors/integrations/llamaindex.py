"""A LlamaIndex memory block backed by a user's memory (extra ``llamaindex``).

::

    from llama_index.core.memory import Memory
    from memoryos_actors import MemoryOS
    from memoryos_actors.integrations.llamaindex import MemoryOSBlock

    mem = MemoryOS.open("./memdata")
    memory = Memory.from_defaults(
        session_id="alice", memory_blocks=[MemoryOSBlock(mem=mem, user_id="alice")]
    )

LlamaIndex puts into a long-term block the messages that leave its short-term chat history
(when that history outgrows its token budget), and asks the block for its content with the
recent messages each time the memory is read. This block stores each user message with the
assistant's answer to it as one turn (``add_turn``; tool results join the answer's text, a
system message is an instruction, not conversation, and is not stored) and answers with
what ``retrieve`` finds for the latest user message, rendered as prompt text.

Importing this module imports ``llama_index.core`` (the block is one of its pydantic
models); ``import memoryos_actors`` does not.
"""

from __future__ import annotations

from typing import Any

from llama_index.core.base.llms.types import ChatMessage, MessageRole
from llama_index.core.memory import BaseMemoryBlock
from pydantic import Field

from ..errors import UnknownUser
from ._bridge import call

__all__ = ["MemoryOSBlock", "turns_of"]


def _text(message: ChatMessage) -> str:
    return message.content or ""


def turns_of(messages: list[ChatMessage]) -> list[tuple[str, str]]:
    """``messages`` as (query, response) turns: a user message opens a turn, the assistant
    and tool messages after it make its response (a line each); messages before the first
    user message make a turn without a query."""
    turns: list[tuple[str, list[str]]] = []
    for message in messages:
        if message.role == MessageRole.SYSTEM:
            continue
        if message.role == MessageRole.USER:
            turns.append((_text(message), []))
            continue
        if not turns:
            turns.append(("", []))
        text = _text(message)
        if text:
            turns[-1][1].append(text if message.role != MessageRole.TOOL else f"tool: {text}")
    return [(query, "\n".join(lines)) for query, lines in turns]


class MemoryOSBlock(BaseMemoryBlock[str]):
    """A long-term memory block whose content is what ``mem`` retrieves for ``user_id``.

    Attributes:
        mem: a running memory system, a :class:`~memoryos_actors.api.MemoryAPI` (its
            calls run in a worker thread) or an :class:`~memoryos_actors.api.AsyncMemoryAPI`.
        user_id: whose memory this block reads and writes.
        assistant_id: the assistant the turns are stored for and retrieved with.
    """

    name: str = Field(default="memoryos", description="The name of the memory block.")
    mem: Any = Field(description="A MemoryAPI or AsyncMemoryAPI.")
    user_id: str = Field(description="The user whose memory this block is.")
    assistant_id: str = Field(default="default")

    async def _aget(self, messages: list[ChatMessage] | None = None, **block_kwargs: Any) -> str:
        """What the user's memory holds about the latest user message ("" if nothing)."""
        query = next((_text(m) for m in reversed(messages or []) if m.role == MessageRole.USER), "")
        if not query:
            return ""
        try:
            found = await call(self.mem, "retrieve", self.user_id, query, self.assistant_id)
        except UnknownUser:
            # Nothing stored for the user yet. Once `retrieve` answers such a user with an
            # empty context (#44 item 4), this stays as a guard for older servers.
            return ""
        return "" if found.is_empty() else str(found.render())

    async def _aput(self, messages: list[ChatMessage]) -> None:
        """Store ``messages`` as turns (see :func:`turns_of`), durable on return."""
        for query, response in turns_of(messages):
            await call(
                self.mem, "add_turn", self.user_id, query, response, assistant_id=self.assistant_id
            )
