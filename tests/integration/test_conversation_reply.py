"""``Conversation.reply``: the answer ``chat_reply`` gives, without the turn stored.

A cluster shard answers a chat with it and leaves storing the turn to the facade (with a
turn key, so a reply sent again after a shard death stores the turn once).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from memoryos_actors import MemoryOS, UnknownUser


def test_a_reply_stores_nothing_and_is_what_chat_reply_answers(
    open_mem: Callable[..., MemoryOS],
) -> None:
    mem = open_mem()
    mem.add_turn("alice", "I like green tea.", "Noted.")
    mem.flush()
    before = mem.stored_page_ids("alice")
    chats = mem.stats()["chats"]

    answer = mem.conversation.reply("alice", "what do I like?")

    assert answer.text and not answer.degraded
    assert mem.stored_page_ids("alice") == before, "reply stored a turn"
    assert mem.stats()["chats"] == chats, "reply counted as a chat"
    stored = mem.chat_reply("alice", "what do I like?")
    assert (stored.text, stored.degraded, stored.backend) == (
        answer.text,
        answer.degraded,
        answer.backend,
    )
    assert len(mem.stored_page_ids("alice")) == len(before) + 1


def test_a_new_user_is_answered_from_an_empty_memory_and_not_created(
    open_mem: Callable[..., MemoryOS],
) -> None:
    mem = open_mem()
    assert mem.conversation.reply("nobody", "hello?").text
    assert "nobody" not in mem.users()
    with pytest.raises(UnknownUser):
        mem.user_state("nobody")
