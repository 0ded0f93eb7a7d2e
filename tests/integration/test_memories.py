"""Single memories through the public API: list, get, delete, correct, history.

A deleted memory is searched for afterwards in every place it could hide: retrieval (hot
tiers and cold tier), the listing, the archive view, an export, after a restart, after the
cold index is rebuilt from the archive, and after an actor crash.
"""

from __future__ import annotations

import threading
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from sysutil import SMALL, turn_text

from memoryos_actors import (
    InvalidInput,
    MemoryConfig,
    MemoryOS,
    UnknownMemory,
    UnknownUser,
)
from memoryos_actors.actors.base import actor_names
from memoryos_actors.actors.protocol import CompletionDone
from memoryos_actors.store.cold import COLD_FILE
from memoryos_actors.store.userstore import user_path

USER = "mem-user"
TURNS = 120


def _secret(i: int) -> str:
    """A word that occurs in turn ``i`` only (letters only: tokenizers keep it whole)."""
    letters = "abcdefghijklmnopqrstuvwxyz"
    return "zq" + "".join(letters[int(d)] for d in str(i)) + "vex"


def _fill(mem: MemoryOS, user: str = USER, turns: int = TURNS) -> None:
    for i in range(1, turns + 1):
        mem.add_turn(user, f"Turn {i}: the codeword is {_secret(i)} today.", f"Noted {i}.")
    mem.flush()


def _everything_retrieved(mem: MemoryOS, user: str, query: str) -> str:
    """All text retrieval returns for ``query``: pages, segments, the chain summary, facts
    and traits (what the LLM distilled from a deleted page goes with it when it quotes it)."""
    ctx = mem.retrieve(user, query)
    parts: list[str] = [ctx.dialogue_chain]
    parts.extend(f"{t.name} {t.level} {t.evidence}" for t in ctx.traits)
    for group in (ctx.stm, ctx.mtm, ctx.segments, ctx.kb, ctx.agent_traits):
        parts.extend(item.text for item in group)
    return "\n".join(parts)


def _page_in(mem: MemoryOS, tier: str, user: str = USER) -> Any:
    return next(m for m in mem.memories(user, kinds=["page"]) if m.tier == tier)


def _seq(memory_id: str) -> int:
    return int(memory_id.split(":p")[1])


def _teach(
    mem: MemoryOS,
    user: str,
    facts: list[str],
    traits: list[list[str]] | None = None,
    segment: str = "s1",
) -> None:
    """Hand LPM a persona update as the gateway would (an LLM distilled it)."""
    lpm = mem.registry.require(actor_names(user)[2])
    data = {
        "traits": [{"name": n, "level": lv, "evidence": ev} for n, lv, ev in traits or []],
        "facts": facts,
        "agent_traits": [],
    }
    lpm.tell(
        CompletionDone(
            "persona_update", f"{segment}|default", data, degraded=False, epoch=mem.user_epoch(user)
        )
    )
    mem.flush()


@pytest.fixture
def mem(open_mem) -> MemoryOS:
    m = open_mem()
    _fill(m)
    return m


def test_memories_come_in_pages_that_adding_turns_never_skips_or_repeats(mem: MemoryOS) -> None:
    everything = mem.memories(USER)
    assert everything.next_cursor is None
    before = [m.memory_id for m in everything]
    walked: list[str] = []
    cursor = None
    added = TURNS
    while True:
        page = mem.memories(USER, limit=25, cursor=cursor)
        assert len(page) <= 25
        walked += [m.memory_id for m in page]
        cursor = page.next_cursor
        if cursor is None:
            break
        # New turns push older pages from STM to MTM and from MTM to the archive.
        for i in range(added + 1, added + 8):
            mem.add_turn(USER, f"Turn {i}: the codeword is {_secret(i)} today.", "Noted.")
        added += 7
        mem.flush()
    assert added > TURNS + 14
    assert sorted(i for i, n in Counter(walked).items() if n > 1) == []
    assert sorted(set(before) - set(walked)) == []
    # Pages first, oldest first, whichever tier each is in now.
    first = mem.memories(USER, kinds=["page"], limit=10)
    assert [_seq(m.memory_id) for m in first] == list(range(1, 11))
    assert first.next_cursor is not None
    for bad in ("x", first.next_cursor[:-2], first.next_cursor + "A"):
        with pytest.raises(InvalidInput):
            mem.memories(USER, cursor=bad)
    with pytest.raises(InvalidInput):
        mem.memories(USER, limit=0)


def test_every_stored_page_is_listed_once_with_its_tier_and_segment(mem: MemoryOS) -> None:
    listed = mem.memories(USER)
    pages = [m for m in listed if m.kind == "page"]
    assert sorted(_seq(m.memory_id) for m in pages) == list(range(1, TURNS + 1))
    tiers = Counter(m.tier for m in pages)
    assert tiers["stm"] > 0 and tiers["mtm"] > 0 and tiers["archive"] > 0
    assert all(m.segment_id for m in pages if m.tier == "mtm")
    segments = {m.memory_id: m for m in listed if m.kind == "segment"}
    for m in pages:
        if m.tier == "mtm":
            assert m.memory_id.split(":")[1] in segments[f"segment:{m.segment_id}"].page_ids
    one = pages[0]
    assert mem.get_memory(USER, one.memory_id) == one
    assert mem.memories(USER, kinds=["segment"]) == [m for m in listed if m.kind == "segment"]


@pytest.mark.parametrize("tier", ["stm", "mtm", "archive"])
def test_a_deleted_page_is_found_nowhere(
    mem: MemoryOS, open_mem, tmp_path: Path, tier: str
) -> None:
    page = _page_in(mem, tier)
    secret = _secret(_seq(page.memory_id))
    assert secret in _everything_retrieved(mem, USER, f"codeword {secret}")
    event = mem.delete_memory(USER, page.memory_id)
    assert (event.action, event.old, event.new) == ("deleted", page.text, None)

    def nowhere(m: MemoryOS) -> None:
        assert secret not in _everything_retrieved(m, USER, f"codeword {secret}")
        assert page.memory_id not in {x.memory_id for x in m.memories(USER)}
        assert page.memory_id.split(":")[1] not in m.stored_page_ids(USER)
        assert secret not in repr(m.archive(USER))
        assert secret not in repr(m.archive(USER, query=f"codeword {secret}"))
        with pytest.raises(UnknownMemory):
            m.get_memory(USER, page.memory_id)

    nowhere(mem)
    out = mem.export_user(USER, tmp_path / "export.json")
    assert secret not in out.read_text()
    with pytest.raises(UnknownMemory):
        mem.delete_memory(USER, page.memory_id)
    mem.close()
    again = open_mem()  # the edit is in the WAL: a restart does not bring the page back
    nowhere(again)
    history = again.memory_history(USER, page.memory_id)
    assert [e.action for e in history] == ["deleted"]
    # The other pages are all still there, each once.
    ids = again.stored_page_ids(USER)
    assert sorted(ids, key=lambda p: int(p[1:])) == [
        f"p{i}" for i in range(1, TURNS + 1) if i != _seq(page.memory_id)
    ]


def test_a_deleted_segment_takes_its_pages_and_summary(open_mem) -> None:
    cfg = MemoryConfig(**{**SMALL, "mtm_capacity": 3})  # whole segments get evicted
    mem = open_mem(cfg)
    user = "topics"
    for i in range(1, 301):
        mem.add_turn(user, *turn_text(user, i))
    mem.flush()
    for tier in ("mtm", "archive"):
        seg = next(m for m in mem.memories(user, kinds=["segment"]) if m.tier == tier)
        pages = {
            m.memory_id: m
            for m in mem.memories(user, kinds=["page"])
            if m.memory_id in {f"page:{p}" for p in seg.page_ids}
        }
        assert len(pages) == len(seg.page_ids) > 0
        mem.delete_memory(user, seg.memory_id)
        listed = {m.memory_id for m in mem.memories(user)}
        assert seg.memory_id not in listed
        assert listed.isdisjoint(pages)
        for page in pages.values():
            query = page.text.splitlines()[0]
            assert query not in _everything_retrieved(mem, user, query)
    kept = sorted(mem.stored_page_ids(user))
    mem.close()
    again = open_mem(cfg)
    assert sorted(again.stored_page_ids(user)) == kept


def test_a_rebuilt_cold_index_and_a_restarted_mtm_keep_deletions(
    mem: MemoryOS, tmp_path: Path
) -> None:
    archived = _page_in(mem, "archive")
    hot = _page_in(mem, "mtm")
    for page in (archived, hot):
        mem.delete_memory(USER, page.memory_id)
    mem.passivate(USER)
    cold = user_path(tmp_path / "data", USER) / COLD_FILE
    cold.write_bytes(b"this is not a database")  # rebuilt from the archive on next use
    assert mem.kill_actor(USER, "mtm")  # and MTM recovers from snapshot + WAL
    for page in (archived, hot):
        secret = _secret(_seq(page.memory_id))
        assert secret not in _everything_retrieved(mem, USER, f"codeword {secret}")
    assert {archived.memory_id, hot.memory_id}.isdisjoint(m.memory_id for m in mem.memories(USER))


def test_a_corrected_fact_is_retrieved_new_and_keeps_its_old_value_in_history(open_mem) -> None:
    mem = open_mem()
    mem.add_turn(USER, "hello", "hi")
    _teach(mem, USER, ["User lives in Lisbon.", "User keeps three cats."])
    fact = next(m for m in mem.memories(USER, kinds=["fact"]) if "Lisbon" in m.text)
    assert fact.tier == "lpm" and fact.source_segment == "s1"
    event = mem.correct_memory(USER, fact.memory_id, "User lives in Porto.")
    assert (event.action, event.old, event.new) == (
        "corrected",
        "User lives in Lisbon.",
        "User lives in Porto.",
    )
    texts = [item.text for item in mem.retrieve(USER, "where does the user live").kb]
    assert "User lives in Porto." in texts and "User lives in Lisbon." not in texts
    got = mem.get_memory(USER, fact.memory_id)
    assert got.text == "User lives in Porto." and got.edited
    mem.close()
    mem = open_mem()
    history = mem.memory_history(USER, fact.memory_id)
    assert [(e.action, e.old, e.new) for e in history] == [
        ("created", None, "User lives in Lisbon."),
        ("corrected", "User lives in Lisbon.", "User lives in Porto."),
    ]
    assert history[0].by == "persona update of s1"
    assert mem.get_memory(USER, fact.memory_id).text == "User lives in Porto."
    mem.delete_memory(USER, fact.memory_id)
    assert "Porto" not in _everything_retrieved(mem, USER, "where does the user live Porto")
    # A deletion erases the values from the history: only what happened, and when.
    assert [(e.action, e.old, e.new) for e in mem.memory_history(USER, fact.memory_id)] == [
        ("corrected", None, None),
        ("deleted", None, None),
    ]


def test_archived_facts_can_be_corrected_and_deleted(open_mem) -> None:
    mem = open_mem(MemoryConfig(**{**SMALL, "kb_capacity": 2}))
    mem.add_turn(USER, "hello", "hi")
    _teach(
        mem,
        USER,
        [
            "User collects antique maps.",
            "User plays the oboe.",
            "User grows chili peppers.",
            "User speaks Finnish.",
        ],
    )
    archived = [m for m in mem.memories(USER, kinds=["fact"]) if m.tier == "archive"]
    assert {m.text for m in archived} == {"User collects antique maps.", "User plays the oboe."}
    maps = next(m for m in archived if "maps" in m.text)
    oboe = next(m for m in archived if "oboe" in m.text)
    mem.correct_memory(USER, maps.memory_id, "User collects antique globes.")
    mem.delete_memory(USER, oboe.memory_id)
    for m in (mem,):
        kb = [item.text for item in m.retrieve(USER, "antique globes maps oboe").kb]
        assert "User collects antique globes." in kb
        assert not any("maps" in t or "oboe" in t for t in kb)
    mem.close()
    mem = open_mem(MemoryConfig(**{**SMALL, "kb_capacity": 2}))
    facts = {m.memory_id: m for m in mem.memories(USER, kinds=["fact"])}
    assert facts[maps.memory_id].text == "User collects antique globes."
    assert facts[maps.memory_id].edited
    assert oboe.memory_id not in facts


def test_a_trait_can_be_corrected_and_cleared_with_its_history(open_mem) -> None:
    mem = open_mem()
    mem.add_turn(USER, "hello", "hi")
    _teach(mem, USER, [], [["sense_of_humor", "high", "tells jokes"]], segment="s4")
    trait = mem.get_memory(USER, "trait:sense_of_humor")
    assert (trait.text, trait.evidence) == ("high", "tells jokes")
    mem.correct_memory(USER, trait.memory_id, "low", evidence="said so himself")
    levels = {t.name: t.level for t in mem.user_state(USER).traits}
    assert levels["sense_of_humor"] == "low"
    assert [(e.action, e.old, e.new, e.by) for e in mem.memory_history(USER, trait.memory_id)] == [
        ("changed", None, "high", "persona update of s4"),
        ("corrected", "high", "low", "edit"),
    ]
    mem.delete_memory(USER, trait.memory_id)
    assert "sense_of_humor" not in {t.name for t in mem.user_state(USER).traits}
    mem.passivate(USER)
    history = mem.memory_history(USER, trait.memory_id)
    assert [(e.action, e.old, e.new, e.by) for e in history] == [
        ("corrected", None, None, "edit"),
        ("deleted", None, None, "edit"),
    ]
    with pytest.raises(UnknownMemory):
        mem.get_memory(USER, trait.memory_id)


def test_bad_ids_and_values_are_refused_and_change_nothing(mem: MemoryOS) -> None:
    before = mem.memories(USER)
    for bad in ("", "p1", "page", "page:", "note:1", "agent_trait:x", 5, "x" * 600):
        with pytest.raises(InvalidInput):
            mem.delete_memory(USER, bad)  # type: ignore[arg-type]
    page = _page_in(mem, "stm")
    with pytest.raises(InvalidInput):
        mem.correct_memory(USER, page.memory_id, "rewritten")
    with pytest.raises(InvalidInput):
        mem.correct_memory(USER, "trait:sense_of_humor", "enormous")
    with pytest.raises(InvalidInput):
        mem.memories(USER, kinds=["pages"])
    with pytest.raises(UnknownMemory):
        mem.delete_memory(USER, "page:p99999")
    with pytest.raises(UnknownMemory):
        mem.memory_history(USER, "fact:f404")
    with pytest.raises(UnknownUser):
        mem.memories("nobody-here")
    assert mem.memories(USER) == before


def test_deletes_racing_writers_lose_no_other_turn(open_mem) -> None:
    mem = open_mem()
    ledger: list[str] = [mem.add_turn(USER, "Turn 0: the first one.", "ok")]
    errors: list[BaseException] = []
    stop = threading.Event()

    def writer() -> None:
        try:
            for i in range(1, 301):
                ledger.append(mem.add_turn(USER, f"Turn {i}: the codeword is {_secret(i)}.", "ok"))
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
        finally:
            stop.set()

    t = threading.Thread(target=writer)
    t.start()
    deleted: set[str] = set()
    while not stop.is_set() or not deleted:
        pages = [m for m in mem.memories(USER, kinds=["page"]) if m.memory_id not in deleted]
        if len(pages) > 3:
            victim = pages[len(pages) // 2]
            mem.delete_memory(USER, victim.memory_id)
            deleted.add(victim.memory_id)
    t.join()
    assert not errors
    mem.flush()
    want = sorted((p for p in ledger if f"page:{p}" not in deleted), key=lambda p: int(p[1:]))
    assert sorted(mem.stored_page_ids(USER), key=lambda p: int(p[1:])) == want
    mem.close()
    mem = open_mem()
    assert sorted(mem.stored_page_ids(USER), key=lambda p: int(p[1:])) == want


def test_a_page_that_moves_on_while_the_user_is_listed_is_listed_once(
    mem: MemoryOS, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The listing takes STM's picture, then MTM's, then reads the archive: a page that
    # leaves STM (or MTM) between two of those looks is in two pictures. Here a writer
    # pushes the oldest STM page on to MTM right after STM's picture is taken.
    stm_name = actor_names(USER)[0]
    ask = mem._core.ask
    moved: list[str] = []

    def ask_then_write(name: str, message: object, *args: Any, **kw: Any) -> Any:
        answer = ask(name, message, *args, **kw)
        if name == stm_name and type(message).__name__ == "Inspect" and not moved:
            moved.append(answer.pages[0].page_id)

            def write() -> None:
                mem.add_turn(USER, "One more turn pushes the oldest page on.", "Noted.")
                mem.flush(user_id=USER)

            writer = threading.Thread(target=write)
            writer.start()
            writer.join(60)
            assert not writer.is_alive()
        return answer

    monkeypatch.setattr(mem._core, "ask", ask_then_write)
    listed = [m.memory_id for m in mem.memories(USER, kinds=["page"])]
    monkeypatch.undo()
    assert moved and f"page:{moved[0]}" in listed
    assert sorted(i for i, n in Counter(listed).items() if n > 1) == []
    # Listed once, in the tier it was found in last.
    assert mem.get_memory(USER, f"page:{moved[0]}").tier == "mtm"
