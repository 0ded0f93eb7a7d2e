"""``flush`` is a barrier on the work stored before it, and ``export_user`` waits only for
its own user: both return while other threads keep writing.

Each operation that must return runs in a thread watched with a generous deadline (a
liveness guard, not a speed check): an operation that waits for the whole process to be
quiet fails the test there instead of hanging the suite, and returns once the writers stop.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sysutil import SMALL, turn_text
from waiting import wait_until

from memoryos_actors import MemoryConfig, MemoryOS
from memoryos_actors.errors import Overloaded

#: How long an operation may run before it counts as hanging (seconds).
WATCHDOG_S = 60.0

#: Summaries are asked for only by flush (their debounce window never ends in a test),
#: and segments are never evicted, so every page stays in MTM where a test can see it.
CONFIG = dict(
    SMALL,
    summary_debounce_seconds=3600.0,
    summary_every_pages=2,
    mtm_capacity=100_000,
    log_level="critical",
)


class Flood:
    """Writer threads, each adding turns for its own user until stopped; what was
    acknowledged is recorded per user, in order."""

    def __init__(self, mem: MemoryOS, users: list[str]) -> None:
        self.mem = mem
        self.users = users
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.acked: dict[str, list[str]] = {u: [] for u in users}
        self.errors: list[BaseException] = []
        self.threads = [
            threading.Thread(target=self._write, args=(u,), name=f"flood-{u}") for u in users
        ]

    def _write(self, user: str) -> None:
        n = 0
        while not self.stop.is_set():
            q, r = turn_text(user, n)
            try:
                page_id = self.mem.add_turn(user, q, r)
            except Overloaded:
                continue  # backpressure: the flood is doing its job
            except BaseException as exc:  # noqa: BLE001 - reported by the test
                self.errors.append(exc)
                return
            n += 1
            with self.lock:
                self.acked[user].append(page_id)

    def acknowledged(self, user: str) -> list[str]:
        """The page ids of ``user``'s turns acknowledged so far."""
        with self.lock:
            return list(self.acked[user])

    def wait_for_turns(self, turns: int, deadline_s: float = WATCHDOG_S) -> None:
        """Return once every writer has had ``turns`` turns acknowledged."""

        def done() -> bool:
            assert not self.errors, self.errors
            return min(len(self.acknowledged(u)) for u in self.users) >= turns

        wait_until(done, f"every writer to have {turns} turns acknowledged", deadline_s)


@contextmanager
def flooding(mem: MemoryOS, users: list[str]) -> Iterator[Flood]:
    flood = Flood(mem, users)
    for t in flood.threads:
        t.start()
    try:
        flood.wait_for_turns(20)
        yield flood
    finally:
        flood.stop.set()
        for t in flood.threads:
            t.join(WATCHDOG_S)
    assert not flood.errors, flood.errors


class Watched:
    """``fn()`` in a thread; :meth:`finished` says whether it returned within the deadline."""

    def __init__(self, fn: Callable[[], Any]) -> None:
        self.result: Any = None
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, args=(fn,), name="watched")
        self.thread.start()

    def _run(self, fn: Callable[[], Any]) -> None:
        try:
            self.result = fn()
        except BaseException as exc:  # noqa: BLE001 - re-raised by the test
            self.error = exc

    def finished(self) -> bool:
        self.thread.join(WATCHDOG_S)
        return not self.thread.is_alive()

    def outcome(self) -> Any:
        """Wait for the end (after the writers stopped) and return the result."""
        self.thread.join()
        if self.error is not None:
            raise self.error
        return self.result


def _open(open_mem: Callable[..., MemoryOS], sub: str = "data") -> MemoryOS:
    return open_mem(MemoryConfig(**CONFIG), sub=sub)


def _seq(page_id: str) -> int:
    return int(page_id[1:])


def _placed(mem: MemoryOS, user: str) -> set[str]:
    """Ids of the user's pages MTM placed: in its segments, or evicted to the archive."""
    ids = {p.page_id for seg in mem.user_state(user).segments for p in seg.pages}
    for rec in mem.archive(user):
        if rec["t"] == "segment":
            ids.update(p["page_id"] for p in rec["segment"]["pages"])
        elif rec["t"] == "page":
            ids.add(rec["page"]["page_id"])
    return ids


def _exported_page_ids(open_mem: Callable[..., MemoryOS], path: Path, user: str) -> list[str]:
    other = _open(open_mem, sub=f"import-{path.stem}")
    other.import_user(path)
    return other.stored_page_ids(user)


def test_export_of_an_idle_user_returns_while_two_threads_write_for_others(
    open_mem: Callable[..., MemoryOS], tmp_path: Path
) -> None:
    mem = _open(open_mem)
    stored = [mem.add_turn("idle", *turn_text("idle", i)) for i in range(20)]
    out = tmp_path / "idle.json"
    with flooding(mem, ["w1", "w2"]):
        export = Watched(lambda: mem.export_user("idle", out))
        returned = export.finished()
    export.outcome()
    assert returned, (
        f"export_user of an idle user did not return within {WATCHDOG_S} s "
        "while other users were written"
    )
    assert sorted(_exported_page_ids(open_mem, out, "idle"), key=_seq) == stored


def test_flush_returns_under_a_flood_with_the_work_stored_before_it_done(
    open_mem: Callable[..., MemoryOS],
) -> None:
    mem = _open(open_mem)
    stored = [mem.add_turn("quiet", *turn_text("quiet", i)) for i in range(30)]
    with flooding(mem, ["w1", "w2"]) as flood:
        before = {u: flood.acknowledged(u) for u in flood.users}
        flush = Watched(mem.flush)
        returned = flush.finished()
    flush.outcome()
    assert returned, f"flush() did not return within {WATCHDOG_S} s under a write flood"
    cap = mem.config.stm_capacity
    for user, pages in [("quiet", stored), *before.items()]:
        left_stm = {p for p in pages if _seq(p) <= len(pages) - cap}  # when flush was called
        assert left_stm <= _placed(mem, user), f"{user}: pages left STM but were not placed"
    # What flush asked for: the quiet user's pages have their chain meta, and each of its
    # segments its summary (the debounce window would have held them back for an hour).
    state = mem.user_state("quiet")
    assert all(p.chain_id for p in state.stm)
    assert all(p.chain_id for seg in state.segments for p in seg.pages)
    assert state.segments and all(seg.summary for seg in state.segments)


def test_flush_of_a_user_being_written_covers_its_turns_stored_before_it(
    open_mem: Callable[..., MemoryOS],
) -> None:
    mem = _open(open_mem)
    with flooding(mem, ["busy", "w1"]) as flood:
        before = flood.acknowledged("busy")
        flush = Watched(lambda: mem.flush(user_id="busy"))
        returned = flush.finished()
    flush.outcome()
    assert returned, (
        f"flush(user_id=...) did not return within {WATCHDOG_S} s while the user was written"
    )
    state = mem.user_state("busy")
    pages = {p.page_id: p for p in state.stm}
    pages.update((p.page_id, p) for seg in state.segments for p in seg.pages)
    archived = _placed(mem, "busy") - set(pages)
    for page_id in before:
        if page_id in archived:
            continue
        assert page_id in pages, f"{page_id} (acknowledged before flush) is missing"
        assert pages[page_id].chain_id, f"{page_id} has no chain meta after flush"
    # The pages that had left STM when flush was called are placed in MTM.
    left_stm = {p for p in before if _seq(p) <= len(before) - mem.config.stm_capacity}
    assert left_stm <= _placed(mem, "busy")


def test_export_of_a_user_being_written_holds_every_turn_acknowledged_before_it(
    open_mem: Callable[..., MemoryOS], tmp_path: Path
) -> None:
    mem = _open(open_mem)
    out = tmp_path / "busy.msgpack"
    with flooding(mem, ["busy", "w1"]) as flood:
        before = flood.acknowledged("busy")
        export = Watched(lambda: mem.export_user("busy", out))
        returned = export.finished()
    export.outcome()
    assert returned, f"export_user of a user being written did not return within {WATCHDOG_S} s"
    exported = _exported_page_ids(open_mem, out, "busy")
    assert len(exported) == len(set(exported)), "a page was exported twice"
    assert set(before) <= set(exported), "turns acknowledged before the export are missing"
    # One cut: the turns in the file are the first ones stored, with no gap.
    assert sorted(exported, key=_seq) == flood.acknowledged("busy")[: len(exported)]
