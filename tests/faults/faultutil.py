"""Helpers for the fault-injection tests: configs, deterministic turns, and ledgers.

A *ledger* is what a caller knows for sure: the page ids (and texts) of the turns whose
``add_turn`` returned. The checks below compare a ledger with everything the memory system
holds for the user (STM, MTM and the archive), so a lost or duplicated turn shows up
whichever tier it ended in.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pykka

from memoryos_actors import MemoryConfig, MemoryOS

#: Small tiers, so that a few hundred turns exercise eviction, archive and snapshots.
SMALL: dict[str, Any] = {
    "mtm_capacity": 6,
    "segment_max_pages": 4,
    "heat_tick_seconds": 3600.0,
    "summary_debounce_seconds": 0.01,
    "snapshot_every_turns": 40,
    "fsync": "never",
    "log_level": "critical",
    "gateway_workers": 1,
}


def small_config(**changes: Any) -> MemoryConfig:
    """:data:`SMALL` with ``changes`` applied."""
    return MemoryConfig(**{**SMALL, **changes})


def turn_query(user: str, n: int) -> str:
    """The query text of ``user``'s ``n``-th turn of a test; unique per (user, n)."""
    topics = (
        "glacier hike",
        "sourdough bread",
        "python parser",
        "violin rehearsal",
        "saturn telescope",
        "tomato greenhouse",
    )
    return f"{topics[n % len(topics)]} story number {n} from {user}"


def stored_pages(mem: MemoryOS, user: str) -> list[tuple[str, str]]:
    """``(page_id, query)`` of every page held for ``user`` in STM, MTM and archive.

    Repeats are kept: a page held twice appears twice.
    """
    state = mem.user_state(user)
    pages = [(p.page_id, p.query) for p in state.stm]
    for seg in state.segments:
        pages.extend((p.page_id, p.query) for p in seg.pages)
    for rec in mem.archive(user):
        if rec["t"] == "segment":
            pages.extend((p["page_id"], p["query"]) for p in rec["segment"]["pages"])
        elif rec["t"] == "page":
            pages.append((rec["page"]["page_id"], rec["page"]["query"]))
    return pages


def check_ledger(mem: MemoryOS, user: str, acked: dict[str, str]) -> list[str]:
    """Problems found comparing ``acked`` (page id -> query) with what ``user`` has stored.

    Every acknowledged page must be present exactly once with its own text; no page may be
    held twice; page seqs must be exactly ``1..n`` (a hole means a turn vanished after its
    number was given out). Returns human-readable problems, empty when all is well.
    """
    pages = stored_pages(mem, user)
    problems: list[str] = []
    counts = Counter(pid for pid, _q in pages)
    dup = sorted(pid for pid, c in counts.items() if c > 1)
    if dup:
        problems.append(f"{user}: pages held more than once: {dup[:10]}")
    have = dict(pages)
    missing = sorted((pid for pid in acked if pid not in have), key=lambda p: int(p[1:]))
    if missing:
        problems.append(f"{user}: acknowledged pages missing: {missing[:10]} ({len(missing)})")
    wrong = [pid for pid, q in acked.items() if pid in have and have[pid] != q]
    if wrong:
        problems.append(f"{user}: pages with another turn's text: {wrong[:10]}")
    seqs = sorted(int(pid[1:]) for pid in counts)
    if seqs != list(range(1, len(seqs) + 1)):
        holes = sorted(set(range(1, (seqs[-1] if seqs else 0) + 1)) - set(seqs))
        problems.append(f"{user}: page seqs have holes: {holes[:10]}")
    turns = mem.user_state(user).turns
    if turns != len(counts):
        problems.append(f"{user}: {turns} turns counted but {len(counts)} distinct pages held")
    return problems


def file_listing(root: Path) -> dict[str, tuple[int, int]]:
    """Every regular file under ``root``: relative path -> (size in bytes, mtime in ns)."""
    out: dict[str, tuple[int, int]] = {}
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            p = Path(dirpath) / name
            st = p.stat()
            out[str(p.relative_to(root))] = (st.st_size, st.st_mtime_ns)
    return out


def wait_restarted(mem: MemoryOS, name: str, old: pykka.ActorRef[Any]) -> pykka.ActorRef[Any]:
    """Wait until registry name ``name`` points at a live actor other than ``old``."""
    # Imported here: the kill -9 tests' child processes import this module with only its
    # own folder on their path.
    from waiting import wait_until

    box: list[pykka.ActorRef[Any]] = []

    def fresh() -> bool:
        ref = mem.registry.lookup(name)
        if ref is not None and ref is not old and ref.is_alive():
            box.append(ref)
            return True
        return False

    wait_until(fresh, f"{name} to be restarted")
    return box[0]


def contains_any(haystack: str, needles: Iterable[str]) -> list[str]:
    """The ``needles`` found in ``haystack``."""
    return [n for n in needles if n in haystack]
