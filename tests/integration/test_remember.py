"""Free-text memories through the public API (#44 item 4): ``remember`` stores a note that
retrieval returns, that is listed, read, corrected with history, deleted and exported like
every other memory, sync and async; a user with no data is retrieved as an empty context
and nothing is written for it; hostile input is refused with InvalidInput, writing nothing.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest
from sysutil import SMALL

from memoryos_actors import (
    AsyncMemoryOS,
    InvalidInput,
    ManualClock,
    MemoryConfig,
    MemoryOS,
    UnknownMemory,
)

NOTE = "The user's dog is a beagle called Rexford who hates thunderstorms."
META = {"source": "onboarding form", "confidence": 0.9, "tags": ["pet", "dog"], "ok": True}


def _kb_texts(mem: MemoryOS, user: str, query: str) -> list[str]:
    return [item.text for item in mem.retrieve(user, query).kb]


def test_a_remembered_note_is_retrieved_listed_read_corrected_and_deleted(
    open_mem: Callable[..., MemoryOS],
) -> None:
    mem = open_mem()
    mem.add_turn("ann", "I moved to Lisbon last spring.", "How do you like it?")
    mid = mem.remember("ann", NOTE, metadata=META)
    assert mid.startswith("fact:f")
    # Retrieval: it is in the context for a query about it, and in the prompt text.
    ctx = mem.retrieve("ann", "what is the name of my dog?")
    assert NOTE in [item.text for item in ctx.kb] and "Rexford" in ctx.render()
    # Listed and read, with its origin and metadata.
    (listed,) = [m for m in mem.memories("ann", kinds=["fact"]) if m.memory_id == mid]
    assert (listed.text, listed.origin, listed.metadata) == (NOTE, "remembered", META)
    assert mem.get_memory("ann", mid) == listed
    # Corrected, with history; retrieval gives the new text, the metadata stays.
    mem.correct_memory("ann", mid, "The user's dog is a beagle called Maxwell.")
    assert "Maxwell" in " ".join(_kb_texts(mem, "ann", "what is my dog called?"))
    assert mem.get_memory("ann", mid).metadata == META
    history = mem.memory_history("ann", mid)
    assert [(e.action, e.by) for e in history] == [("created", "remember"), ("corrected", "edit")]
    assert history[0].new == NOTE
    # Deleted: gone from retrieval, listing and reads; the history keeps only the deletion.
    mem.delete_memory("ann", mid)
    assert not any("beagle" in t for t in _kb_texts(mem, "ann", "what is my dog called?"))
    assert mid not in [m.memory_id for m in mem.memories("ann")]
    with pytest.raises(UnknownMemory):
        mem.get_memory("ann", mid)
    assert mem.memory_history("ann", mid)[-1].action == "deleted"
    # A second note gets a new id (ids are never reused).
    assert mem.remember("ann", "Prefers tea to coffee.") != mid


def test_remembered_notes_outlive_a_restart_and_move_with_an_export(
    open_mem: Callable[..., MemoryOS], tmp_path: Path
) -> None:
    mem = open_mem(sub="one")
    mid = mem.remember("ben", NOTE, metadata=META)
    plain = mem.remember("ben", "Allergic to peanuts.")
    mem.close()
    mem = open_mem(sub="one")  # replayed from the WAL (no snapshot of ben yet)...
    assert mem.get_memory("ben", mid).metadata == META
    assert mem.get_memory("ben", plain).metadata is None
    path = mem.export_user("ben", tmp_path / "ben.json")
    assert "Rexford" in path.read_text(encoding="utf-8")
    other = open_mem(sub="two")
    assert other.import_user(path, "ben2") == "ben2"
    moved = other.get_memory("ben2", mid)
    assert (moved.text, moved.origin, moved.metadata) == (NOTE, "remembered", META)
    assert NOTE in _kb_texts(other, "ben2", "what is the name of my dog?")
    # ...and from the snapshot a clean close wrote.
    other.close()
    again = open_mem(sub="two")
    assert again.get_memory("ben2", mid).origin == "remembered"


def test_a_deleted_turn_never_takes_a_remembered_note_along(
    open_mem: Callable[..., MemoryOS],
) -> None:
    mem = open_mem()
    said = "My dog is a beagle called Rexford and he hates thunderstorms."
    page = mem.add_turn("cat", said, "Poor Rexford!")
    mid = mem.remember("cat", said)  # the same words, given by the application
    event = mem.delete_memory("cat", f"page:{page}")
    assert mid not in event.rewrote
    assert mem.get_memory("cat", mid).text == said


def test_notes_pushed_out_of_the_knowledge_base_are_still_retrieved_and_read(
    open_mem: Callable[..., MemoryOS],
) -> None:
    mem = open_mem(MemoryConfig(**{**SMALL, "kb_capacity": 2}))
    first = mem.remember("dan", NOTE, metadata=META)
    for n in range(3):
        mem.remember("dan", f"Unrelated note number {n} about gardening and tomatoes.")
    found = mem.get_memory("dan", first)
    assert (found.tier, found.origin, found.metadata) == ("archive", "remembered", META)
    assert NOTE in _kb_texts(mem, "dan", "what is the name of my dog?")


def test_retrieve_for_a_user_with_no_data_is_empty_and_writes_nothing(
    open_mem: Callable[..., MemoryOS], tmp_path: Path
) -> None:
    mem = open_mem()
    mem.add_turn("ann", "hello", "hi")
    files = sorted(p.name for p in (tmp_path / "data").rglob("*"))
    ctx = mem.retrieve("newcomer", "what do you know about me?")
    assert (ctx.stm, ctx.mtm, ctx.segments, ctx.kb, ctx.traits) == ((), (), (), (), ())
    assert ctx.user_id == "newcomer" and "newcomer" not in mem.active_users()
    assert mem.users() == ["ann"]
    assert sorted(p.name for p in (tmp_path / "data").rglob("*")) == files


@pytest.mark.parametrize(
    ("text", "metadata", "says"),
    [
        ("", None, "text must not be empty"),
        ("   \n ", None, "text must not be blank"),
        ("x" * (SMALL_LIMIT := 4096 + 1), None, "max_text_bytes"),
        ("note", ["not", "a", "dict"], "metadata must be a dict"),
        ("note", {"when": object()}, "metadata values must be JSON"),
        ("note", {"s": {1, 2}}, "metadata values must be JSON"),
        ("note", {1: "int key"}, "metadata keys must be str"),
        ("note", {"x": float("nan")}, "metadata numbers must be finite"),
        ("note", {"big": "y" * 5000}, "the limit is 4096"),
        ("note", {"a": [[[[[[[[[["deep"]]]]]]]]]]}, "nested more than 8"),
        ("nul\x00byte", None, "NUL"),
        (7, None, "text must be a str"),
    ],
)
def test_hostile_input_to_remember_is_refused_and_writes_nothing(
    open_mem: Callable[..., MemoryOS], text: object, metadata: object, says: str
) -> None:
    mem = open_mem(MemoryConfig(**{**SMALL, "max_text_bytes": SMALL_LIMIT - 1}))
    with pytest.raises(InvalidInput, match=says):
        mem.remember("eve", text, metadata=metadata)  # type: ignore[arg-type]
    assert mem.users() == []


def test_remember_and_retrieve_through_the_async_facade(tmp_path: Path) -> None:
    async def run() -> None:
        mem = await AsyncMemoryOS.open(
            tmp_path / "data", MemoryConfig(**SMALL), clock=ManualClock(1_700_000_000.0)
        )
        try:
            empty = await mem.retrieve("fay", "anything?")
            assert empty.kb == () and await mem.users() == []
            mid = await mem.remember("fay", NOTE, metadata=META)
            ctx = await mem.retrieve("fay", "what is the name of my dog?")
            assert NOTE in [item.text for item in ctx.kb]
            assert (await mem.get_memory("fay", mid)).metadata == META
            with pytest.raises(InvalidInput):
                await mem.remember("fay", "note", metadata={"x": float("inf")})
        finally:
            await mem.close()

    asyncio.run(run())
