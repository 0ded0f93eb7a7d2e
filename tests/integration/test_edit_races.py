"""Edits of one memory racing each other have one outcome (#41, item 4).

A correction racing a deletion of the same memory either lands before it (and the deletion
then erases its values) or gets ``UnknownMemory``: it never answers ``corrected`` for a
memory that stays deleted, and a deleted memory's history holds no text. Of several
deletions of one memory exactly one answers; the others get ``UnknownMemory`` and the
history records one deletion.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from test_memories import USER, _teach

from memoryos_actors import MemoryOS, UnknownMemory
from memoryos_actors.store.edits import EditLog

ROUNDS = 12


def _race(calls: list[Callable[[], Any]]) -> list[Any]:
    """Run ``calls`` at once (released together); each one's result or exception."""
    start = threading.Barrier(len(calls))
    out: list[Any] = [None] * len(calls)

    def run(i: int) -> None:
        start.wait()
        try:
            out[i] = calls[i]()
        except Exception as exc:  # noqa: BLE001 - the outcome is what is checked
            out[i] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(calls))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not any(t.is_alive() for t in threads)
    return out


def _facts(mem: MemoryOS, n: int) -> list[str]:
    _teach(mem, USER, [f"User owns secret item number {i} zqx{i}." for i in range(n)])
    return [m.memory_id for m in mem.memories(USER, kinds=["fact"])]


def _no_text(mem: MemoryOS, memory_id: str) -> None:
    history = mem.memory_history(USER, memory_id)
    assert [e.action for e in history].count("deleted") == 1, history
    assert history[-1].action == "deleted", history
    assert all(e.old is None and e.new is None for e in history), history


def test_a_correction_racing_a_deletion_never_outlives_it(open_mem: Any, tmp_path: Path) -> None:
    mem = open_mem()
    mem.add_turn(USER, "hello", "hi")
    facts = _facts(mem, ROUNDS)
    assert len(facts) == ROUNDS
    for i, fact in enumerate(facts):
        corrected, deleted = _race(
            [
                lambda f=fact, i=i: mem.correct_memory(USER, f, f"User owns new item {i}."),
                lambda f=fact: mem.delete_memory(USER, f),
            ]
        )
        assert not isinstance(deleted, Exception), deleted
        if not isinstance(corrected, UnknownMemory):
            assert not isinstance(corrected, Exception), corrected
            # It landed before the deletion, which erased what it wrote.
            assert corrected.at <= deleted.at
        _no_text(mem, fact)
        assert not any(m.memory_id == fact for m in mem.memories(USER, kinds=["fact"]))
    mem.close()
    mem = open_mem()
    for fact in facts:
        _no_text(mem, fact)
    # Written into the export: no deleted fact's text at all.
    path = mem.export_user(USER, tmp_path / "export.json")
    assert "new item" not in path.read_text(encoding="utf-8")


def test_of_racing_deletions_one_answers_and_the_others_get_unknown_memory(
    open_mem: Any,
) -> None:
    mem = open_mem()
    mem.add_turn(USER, "hello", "hi")
    facts = _facts(mem, ROUNDS)
    for fact in facts:
        outcomes = _race([lambda f=fact: mem.delete_memory(USER, f) for _ in range(3)])
        answered = [o for o in outcomes if not isinstance(o, Exception)]
        assert len(answered) == 1, outcomes
        assert all(isinstance(o, UnknownMemory) for o in outcomes if o not in answered)
        _no_text(mem, fact)


def test_a_correction_logged_after_a_deletion_is_kept_without_its_text() -> None:
    # A log written before the fix can hold a correction after the deletion: reading it
    # gives the correction no text and does not bring the memory back.
    log = EditLog(
        [
            {"t": "edit", "op": "delete", "id": "fact:f1", "old": "", "ts": 1.0, "lsn": 3},
            {
                "t": "edit",
                "op": "correct",
                "id": "fact:f1",
                "old": "User lives in Lisbon.",
                "new": "User lives in Porto.",
                "ts": 2.0,
                "lsn": 4,
            },
        ]
    )
    assert log.is_deleted("fact:f1")
    assert "fact:f1" not in log.corrected
    assert all(not r.get("old") and "new" not in r for r in log.history("fact:f1"))
