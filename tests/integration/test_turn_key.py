"""add_turn's turn_key: a retried turn is stored once."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from memoryos_actors import InvalidInput, MemoryOS


def test_add_turn_with_the_same_turn_key_stores_the_turn_once(
    open_mem: Callable[..., MemoryOS],
) -> None:
    mem = open_mem()
    first = mem.add_turn("ann", "I keep bees", "Lovely", turn_key="client-1")
    again = mem.add_turn("ann", "I keep bees", "Lovely", turn_key="client-1")
    other = mem.add_turn("ann", "I keep bees", "Lovely", turn_key="client-2")
    mem.flush()
    assert again == first and other != first
    assert sorted(mem.stored_page_ids("ann")) == sorted([first, other])


def test_add_turn_turn_key_survives_a_restart(open_mem: Callable[..., MemoryOS]) -> None:
    mem = open_mem(sub="d1")
    first = mem.add_turn("ann", "q", "r", turn_key="k")
    mem.close()
    mem = open_mem(sub="d1")
    assert mem.add_turn("ann", "q", "r", turn_key="k") == first
    assert mem.user_state("ann").turns == 1


@pytest.mark.parametrize("key", ["", 7, "x" * 257, "a\x00b"])
def test_add_turn_rejects_a_bad_turn_key(open_mem: Callable[..., MemoryOS], key: object) -> None:
    mem = open_mem()
    with pytest.raises(InvalidInput, match="turn_key"):
        mem.add_turn("ann", "q", "r", turn_key=key)  # type: ignore[arg-type]
    assert mem.users() == []
