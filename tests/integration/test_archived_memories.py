"""``archived_memories``: the archive a page at a time, newest first, from the cold index."""

from __future__ import annotations

import pytest
from sysutil import SMALL

from memoryos_actors import InvalidInput, MemoryConfig, MemoryOS, UnknownUser

USER = "arch-user"
T0 = 1_700_000_000.0
DAY = 86400.0
TURNS = 150


def _word(i: int) -> str:
    """A word only turn ``i`` has (letters only, so the tokenizer keeps it whole)."""
    return "zq" + "".join("abcdefghij"[int(d)] for d in str(i)) + "vex"


@pytest.fixture
def mem(open_mem) -> MemoryOS:
    m = open_mem()
    # Ten turns a day: the archive spans several days.
    for i in range(1, TURNS + 1):
        m.add_turn(
            USER,
            f"Turn {i} mentions {_word(i)} once.",
            f"Noted {i}.",
            timestamp=T0 + (i - 1) * DAY / 10,
        )
    m.flush()
    return m


def _archived_pages(mem: MemoryOS) -> list:
    return [m for m in mem.memories(USER, kinds=["page"]) if m.tier == "archive"]


def test_pages_come_newest_first_a_page_at_a_time_and_match_the_listing(mem: MemoryOS) -> None:
    listed = _archived_pages(mem)
    assert len(listed) > 20
    first = mem.archived_memories(USER, offset=0, limit=10)
    assert first.total == len(listed) and first.has_more and first.kind == "page"
    seen = list(first.memories)
    offset = 10
    while True:
        more = mem.archived_memories(USER, offset=offset, limit=10)
        seen.extend(more.memories)
        offset += 10
        if not more.has_more:
            break
    assert [m.memory_id for m in seen] == [
        m.memory_id for m in sorted(listed, key=lambda m: -m.timestamp)
    ]
    by_id = {m.memory_id: m for m in listed}
    assert all(by_id[m.memory_id] == m for m in seen)
    # One archived memory read alone (from the cold index) is the same record.
    assert all(mem.get_memory(USER, m.memory_id) == m for m in seen[::7])


def test_a_query_finds_the_one_matching_page_and_a_deleted_one_is_gone(mem: MemoryOS) -> None:
    target = _archived_pages(mem)[3]
    seq = int(target.memory_id.split(":p")[1])
    found = mem.archived_memories(USER, query=f"what about {_word(seq)}", limit=5)
    assert [m.memory_id for m in found.memories] == [target.memory_id]
    assert found.query is not None and not found.has_more
    before = mem.archived_memories(USER, limit=0)
    mem.delete_memory(USER, target.memory_id)
    after = mem.archived_memories(USER, limit=500)
    assert after.total == before.total - 1
    assert target.memory_id not in {m.memory_id for m in after.memories}
    assert mem.archived_memories(USER, query=_word(seq)).memories == ()


def test_per_day_counts_cover_every_archived_page(mem: MemoryOS) -> None:
    got = mem.archived_memories(USER, limit=0, per_day=True)
    assert got.memories == () and sum(n for _day, n in got.per_day) == got.total
    days = [day for day, _n in got.per_day]
    assert days == sorted(days) and all(day % DAY == 0 for day in days)
    listed = _archived_pages(mem)
    assert {int(m.timestamp // DAY) * DAY for m in listed} == set(days)


def test_archived_facts_are_listed_and_bad_arguments_refused(open_mem) -> None:
    mem = open_mem(MemoryConfig(**{**SMALL, "kb_capacity": 2}))
    mem.add_turn(USER, "hello", "hi")
    assert mem.archived_memories(USER, kind="fact").total == 0
    from memoryos_actors.actors.base import actor_names
    from memoryos_actors.actors.protocol import CompletionDone

    lpm = mem.registry.require(actor_names(USER)[2])
    lpm.tell(
        CompletionDone(
            "persona_update",
            "s1|default",
            {
                "traits": [],
                "agent_traits": [],
                "facts": [
                    "User collects antique maps.",
                    "User plays the oboe.",
                    "User grows chili peppers.",
                ],
            },
            degraded=False,
            epoch=mem.user_epoch(USER),
        )
    )
    mem.flush()
    facts = mem.archived_memories(USER, kind="fact")
    assert [m.text for m in facts.memories] == ["User collects antique maps."]
    assert facts.memories[0].memory_id.startswith("fact:f") and facts.total == 1
    assert mem.get_memory(USER, facts.memories[0].memory_id) == facts.memories[0]
    mem.correct_memory(USER, facts.memories[0].memory_id, "User collects antique globes.")
    fixed = mem.archived_memories(USER, kind="fact").memories[0]
    assert fixed.text == "User collects antique globes." and fixed.edited
    assert mem.get_memory(USER, fixed.memory_id) == fixed
    for bad in ({"kind": "segment"}, {"limit": 501}, {"offset": -1}, {"limit": True}):
        with pytest.raises(InvalidInput):
            mem.archived_memories(USER, **bad)
    with pytest.raises(UnknownUser):
        mem.archived_memories("nobody-here")
