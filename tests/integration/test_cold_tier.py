"""The cold tier through the public API: what left the hot tiers is found again."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sysutil import SMALL, turn_text

from memoryos_actors import MemoryConfig, MemoryOS
from memoryos_actors.store.cold import COLD_FILE
from memoryos_actors.store.userstore import user_path

USER = "cold-user"
# Enough turns for ~100 pages to leave the hot tiers under SMALL (160 turns archive 95
# pages; 400 archived 333 at 3x the CPU).
TURNS = 160


def _fill(mem: MemoryOS, user: str = USER) -> None:
    for i in range(1, TURNS + 1):
        mem.add_turn(user, *turn_text(user, i))
    mem.flush()


def _an_archived_page(mem: MemoryOS, user: str = USER) -> dict[str, Any]:
    """An archived page whose turn number is unique enough to query for."""
    for rec in mem.archive(user):
        if rec.get("t") == "segment" and rec["segment"]["pages"]:
            return dict(rec["segment"]["pages"][0])
        if rec.get("t") == "page":
            return dict(rec["page"])
    raise AssertionError("nothing was evicted: the test needs a smaller MTM")


def _query_for(page: dict[str, Any]) -> str:
    return str(page["query"])


def _archive_items(mem: MemoryOS, query: str, user: str = USER) -> dict[str, Any]:
    ctx = mem.retrieve(user, query)
    return {item.item_id: item for item in ctx.mtm if item.tier == "archive"}


def test_an_evicted_page_is_retrieved_from_the_archive_with_provenance(open_mem) -> None:
    mem = open_mem()
    _fill(mem)
    page = _an_archived_page(mem)
    assert page["page_id"] not in mem.user_state(USER).page_ids()
    items = _archive_items(mem, _query_for(page))
    assert page["page_id"] in items
    item = items[page["page_id"]]
    assert item.kind == "page"
    assert item.segment_id is not None and item.segment_id.startswith("s")
    assert item.timestamp == pytest.approx(page["timestamp"])
    assert "archive record" in item.why and "bm25" in item.why
    assert page["query"] in item.text


def test_hot_and_archived_pages_are_ranked_in_one_list_best_first(open_mem) -> None:
    mem = open_mem()
    _fill(mem)
    page = _an_archived_page(mem)
    ctx = mem.retrieve(USER, _query_for(page))
    scores = [item.score for item in ctx.mtm]
    assert scores == sorted(scores, reverse=True)
    assert {item.tier for item in ctx.mtm} <= {"mtm", "archive"}
    assert ctx.mtm[0].item_id == page["page_id"]


def test_an_evicted_page_is_found_again_after_restart(open_mem) -> None:
    mem = open_mem()
    _fill(mem)
    page = _an_archived_page(mem)
    mem.close()
    mem = open_mem()
    assert page["page_id"] in _archive_items(mem, _query_for(page))


def test_a_damaged_cold_index_is_rebuilt_from_the_archive(open_mem, tmp_path: Path) -> None:
    mem = open_mem()
    _fill(mem)
    page = _an_archived_page(mem)
    mem.close()
    index = user_path(tmp_path / "data", USER) / COLD_FILE
    assert index.exists()
    index.write_bytes(b"\x00garbage" * 4096)
    mem = open_mem()
    assert page["page_id"] in _archive_items(mem, _query_for(page))
    assert index.read_bytes()[:16] == b"SQLite format 3\x00"


def test_a_deleted_cold_index_is_rebuilt_from_the_archive(open_mem, tmp_path: Path) -> None:
    mem = open_mem()
    _fill(mem)
    page = _an_archived_page(mem)
    mem.close()
    (user_path(tmp_path / "data", USER) / COLD_FILE).unlink()
    mem = open_mem()
    assert page["page_id"] in _archive_items(mem, _query_for(page))


def test_forget_user_leaves_no_trace_in_the_cold_index(open_mem, tmp_path: Path) -> None:
    mem = open_mem()
    _fill(mem)
    _fill(mem, "other-user")
    page = _an_archived_page(mem)
    assert _archive_items(mem, _query_for(page))
    index = user_path(tmp_path / "data", USER) / COLD_FILE
    report = mem.forget_user(USER)
    assert str(index) in report.removed_files
    assert not index.exists()
    marker = f"{USER}, turn".encode()
    for path in (tmp_path / "data").rglob("*"):
        if path.is_file():
            assert marker not in path.read_bytes(), path
    # The other user's cold tier is untouched.
    other = _an_archived_page(mem, "other-user")
    assert other["page_id"] in _archive_items(mem, _query_for(other), "other-user")


def test_export_then_import_brings_the_cold_tier_back(open_mem, tmp_path: Path) -> None:
    mem = open_mem()
    _fill(mem)
    page = _an_archived_page(mem)
    out = mem.export_user(USER, tmp_path / "cold-user.msgpack")
    mem.forget_user(USER)
    assert mem.import_user(out) == USER
    assert page["page_id"] in _archive_items(mem, _query_for(page))


def test_activation_reads_only_the_archive_records_after_the_snapshot(
    open_mem, monkeypatch: pytest.MonkeyPatch
) -> None:
    from memoryos_actors.store.archive import Archive

    mem = open_mem()
    _fill(mem)
    total = len(mem.archive(USER))
    assert mem.passivate(USER)  # a snapshot at the cut
    read: list[int] = []
    real_iter = Archive.iter

    def counting_iter(self: Archive, after_seq: int = 0):  # type: ignore[no-untyped-def]
        for seq, rec in real_iter(self, after_seq):
            read.append(seq)
            yield seq, rec

    monkeypatch.setattr(Archive, "iter", counting_iter)
    mem.add_turn(USER, "back again after a pause", "welcome back")
    mem.flush()
    monkeypatch.setattr(Archive, "iter", real_iter)
    assert total > 20 and len(read) < total // 4  # the tail, not the history
    # Every turn is stored exactly once, hot or archived.
    ids = mem.stored_page_ids(USER)
    assert len(ids) == len(set(ids)) == TURNS + 1


def test_paper_mode_never_reads_the_cold_index(open_mem, tmp_path: Path) -> None:
    mem = open_mem(MemoryConfig(**{**SMALL, "retrieval_mode": "paper"}))
    _fill(mem)
    page = _an_archived_page(mem)
    mem.close()
    index = user_path(tmp_path / "data", USER) / COLD_FILE
    # Were the index read, this file would be found damaged and rebuilt.
    garbage = b"\x00garbage" * 4096
    index.write_bytes(garbage)
    mem = open_mem(MemoryConfig(**{**SMALL, "retrieval_mode": "paper"}))
    ctx = mem.retrieve(USER, _query_for(page))
    assert [item for item in ctx.mtm if item.tier == "archive"] == []
    assert index.read_bytes() == garbage


def test_cold_tier_off_returns_only_hot_pages(open_mem) -> None:
    mem = open_mem(MemoryConfig(**{**SMALL, "cold_tier": False}))
    _fill(mem)
    page = _an_archived_page(mem)
    assert _archive_items(mem, _query_for(page)) == {}


def test_kb_facts_pushed_out_of_the_fifo_are_archived_once(open_mem) -> None:
    cfg = MemoryConfig(**{**SMALL, "kb_capacity": 2})
    mem: MemoryOS = open_mem(cfg)
    for i in range(1, TURNS + 1):
        q, r = turn_text(USER, i)
        # First-person statements: the offline backend turns them into KB facts.
        mem.add_turn(USER, f"I love gadget number {i}. {q}", r)
    mem.flush()
    facts = [r for r in mem.archive(USER) if r.get("t") == "fact"]
    assert facts, "the KB never overflowed: the test needs more facts"
    assert all(isinstance(r.get("emb"), bytes) for r in facts)
    ids = [r["entry"]["entry_id"] for r in facts]
    assert len(ids) == len(set(ids))
    mem.close()
    mem = open_mem(cfg)  # WAL replay evicts the same facts again: not archived twice
    mem.flush()
    again = [r["entry"]["entry_id"] for r in mem.archive(USER) if r.get("t") == "fact"]
    assert again == ids


def test_kb_facts_pushed_out_of_the_fifo_are_retrieved_from_the_archive(open_mem) -> None:
    mem: MemoryOS = open_mem(MemoryConfig(**{**SMALL, "kb_capacity": 2}))
    for i in range(1, TURNS + 1):
        q, r = turn_text(USER, i)
        mem.add_turn(USER, f"I love gadget number {i}. {q}", r)
    mem.flush()
    fact = next(r for r in mem.archive(USER) if r.get("t") == "fact")
    ctx = mem.retrieve(USER, fact["entry"]["text"])
    archived = [item for item in ctx.kb if item.tier == "archive"]
    assert fact["entry"]["entry_id"] in [item.item_id for item in archived]
    assert all("archive" in item.why for item in archived)
    assert {item.entry_id for item in mem.user_state(USER).kb}.isdisjoint(
        item.item_id for item in archived
    )
