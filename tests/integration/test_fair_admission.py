"""Many users at once: a fair load is slowed, never refused; a quiet user is not starved.

Placement is made slow and serialised (a lock held for a few milliseconds per page, as one
busy core would) so that the whole process is behind while the writers run.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from waiting import wait_until

from memoryos_actors import MemoryConfig, MemoryOS, Overloaded
from memoryos_actors.actors.mtm import MTMActor

_CORE = threading.Lock()


@pytest.fixture
def slow_placement(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[str, int]]]:
    """Every page placement holds one process-wide lock for 3 ms; yields the placements
    in the order they happened, as ``(user, seq)``."""
    original = MTMActor._insert
    log: list[tuple[str, int]] = []

    def slow(self: MTMActor, page: Any, now: float, *rest: Any) -> None:
        with _CORE:
            time.sleep(0.003)  # fault injection: a slow, shared placement
            log.append((self.env.user_id, page.seq))
        original(self, page, now, *rest)

    monkeypatch.setattr(MTMActor, "_insert", slow)
    yield log


def _cfg(**changes: Any) -> MemoryConfig:
    return MemoryConfig(**{"log_level": "critical", "fsync": "never", **changes})


def test_a_fair_flood_over_many_users_is_slowed_never_refused(
    tmp_path: Path, slow_placement: list[tuple[str, int]]
) -> None:
    # 32 users, each written back to back by one of 8 threads: nobody floods, but the
    # placements (3 ms each, one at a time) fall far behind the writes. A writer whose
    # user's queue is full waits longer than overload_timeout_seconds for its own queue
    # to drain, while pages keep being placed all along.
    cfg = _cfg(overload_timeout_seconds=1.0)
    users = [f"user-{u}" for u in range(32)]
    errors: list[BaseException] = []
    acked: dict[str, list[str]] = {u: [] for u in users}

    def write(user: str) -> None:
        for i in range(40):
            try:
                acked[user].append(mem.add_turn(user, f"question {i} of {user}", "ok"))
            except BaseException as exc:  # noqa: BLE001 - the finding
                errors.append(exc)

    with MemoryOS.open(tmp_path / "data", cfg) as mem:
        threads = [
            threading.Thread(target=lambda k=k: [write(u) for u in users[k::8]]) for k in range(8)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert [type(e).__name__ for e in errors] == []
        stats = mem.stats()
        assert stats["placement_waits"] > 0  # the writers did have to wait
        assert "restarts=1" not in mem.tree()  # no actor crashed on the way
        mem.flush()
        for user in users:
            assert len(acked[user]) == 40
            assert sorted(mem.stored_page_ids(user)) == sorted(acked[user])


def test_a_user_whose_own_queue_does_not_move_is_refused_and_the_others_are_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # One user's placement is stuck (its budget of queued pages fills and nothing of it
    # is placed); its writer is refused with Overloaded. Another user writes on.
    original = MTMActor._insert
    release = threading.Event()

    def stuck(self: MTMActor, page: Any, now: float, *rest: Any) -> None:
        if self.env.user_id == "stuck":
            release.wait(30)  # fault injection: this user's MTM does not move
        original(self, page, now, *rest)

    monkeypatch.setattr(MTMActor, "_insert", stuck)
    cfg = _cfg(overload_timeout_seconds=0.2)
    with MemoryOS.open(tmp_path / "data", cfg) as mem:
        refused = 0
        try:
            for i in range(400):
                try:
                    mem.add_turn("stuck", f"flood {i}", "ok")
                except Overloaded as exc:
                    assert "none placed" in str(exc)
                    refused += 1
                    break
            assert refused == 1
            for i in range(30):
                mem.add_turn("other", f"turn {i}", "ok")  # never refused, never held up
        finally:
            release.set()
        mem.flush()
        assert len(mem.stored_page_ids("other")) == 30


def test_a_quiet_users_pages_are_placed_while_the_flood_still_runs(
    tmp_path: Path, slow_placement: list[tuple[str, int]]
) -> None:
    # 16 users flood until told to stop; a quiet user writes 12 turns (5 of its pages leave
    # STM). Its pages overtake the flood's queue: they are placed while the flood runs,
    # each before most of the flood's pages that were queued when it was.
    cfg = _cfg(overload_timeout_seconds=30.0)
    stop = threading.Event()
    errors: list[BaseException] = []

    def flood(k: int) -> None:
        i = 0
        while not stop.is_set():
            i += 1
            try:
                mem.add_turn(f"flood-{k}", f"flood turn {i}", "ok")
            except BaseException as exc:  # noqa: BLE001 - the finding
                errors.append(exc)
                return

    with MemoryOS.open(tmp_path / "data", cfg) as mem:
        mem.add_turn("quiet", "hello", "hi")
        threads = [threading.Thread(target=flood, args=(k,)) for k in range(16)]
        for t in threads:
            t.start()
        try:
            wait_until(lambda: mem.stats()["placement_backlog"] >= 64, "a flood backlog")
            overtaken = []
            for i in range(11):
                mem.add_turn("quiet", f"quiet turn {i}", "ok")
                queued_before = mem.stats()["placement_backlog"]
                placed_before = len(slow_placement)
                if i >= 6:  # turn i is page i + 2: it pushed page i - 5 out of STM
                    seq = i - 5
                    wait_until(
                        lambda seq=seq: ("quiet", seq) in slow_placement,
                        f"quiet page {seq} to be placed",
                    )
                    at = slow_placement.index(("quiet", seq))
                    overtaken.append((at - placed_before, queued_before))
            assert not stop.is_set() and all(t.is_alive() for t in threads)
        finally:
            stop.set()
            for t in threads:
                t.join()
        assert errors == []
        # Each quiet page was placed before the whole flood's queue in front of it, and
        # most before half of it. (One page in five sometimes waits longer when the
        # machine is loaded, e.g. by other test processes: its page meta data waits for
        # the gateway loop's CPU; the #42 note tracks that tail.)
        assert all(behind < queued for behind, queued in overtaken), overtaken
        assert sum(behind < queued / 2 for behind, queued in overtaken) >= 4, overtaken
        mem.flush()


def test_pages_waiting_for_their_meta_at_a_slow_gateway_are_slowed_not_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, offline_on_the_loop: None
) -> None:
    # The gateway answers page-meta calls one at a time, slowly (a busy or slow provider):
    # each user's queued pages wait there, upstream of its MTM, for longer than
    # overload_timeout_seconds at a stretch, while placement itself is quick. That is a
    # busy system, not a stuck user: every writer waits, none is refused (before, a user
    # whose queued pages sat at the gateway counted as stuck: 35 of 400 writes refused).
    from memoryos_actors.gateway.offline import OfflineBackend

    original = OfflineBackend.answer
    gate = threading.Lock()

    def slow(self: OfflineBackend, kind: str, payload: Any) -> Any:
        if kind.startswith("page_meta"):
            with gate:
                time.sleep(0.1)  # fault injection: a slow provider, one call at a time
        return original(self, kind, payload)

    monkeypatch.setattr(OfflineBackend, "answer", slow)
    cfg = _cfg(overload_timeout_seconds=0.3, stm_capacity=2)
    users = [f"user-{u}" for u in range(4)]
    errors: list[BaseException] = []

    def write(user: str) -> None:
        for i in range(100):
            try:
                mem.add_turn(user, f"question {i} of {user}", "ok")
            except BaseException as exc:  # noqa: BLE001 - the finding
                errors.append(exc)

    with MemoryOS.open(tmp_path / "data", cfg) as mem:
        threads = [threading.Thread(target=write, args=(u,)) for u in users]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert [str(e) for e in errors] == []
        mem.flush()
        for user in users:
            assert len(mem.stored_page_ids(user)) == 100
