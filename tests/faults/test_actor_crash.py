"""Tier actors killed under load: no acknowledged turn is lost, none is kept twice, and a
user's crash loop is contained to that user."""

from __future__ import annotations

import random
import threading
from pathlib import Path

from faultutil import check_ledger, small_config, turn_query, wait_restarted
from waiting import wait_until

import supervisor
from memoryos_actors import ManualClock, MemoryOS, MemoryOSError
from memoryos_actors.actors.base import actor_names
from memoryos_actors.actors.protocol import Inspect

CLOCK_START = 1_700_000_000.0


def test_tier_actors_killed_under_concurrent_load_lose_no_acknowledged_turn(
    tmp_path: Path,
) -> None:
    users = [f"load-{i}" for i in range(4)]
    turns_each = 60
    acked: dict[str, dict[str, str]] = {u: {} for u in users}
    failures: list[BaseException] = []
    rng = random.Random(7)
    with MemoryOS.open(tmp_path / "data", small_config(), clock=ManualClock(CLOCK_START)) as mem:
        for u in users:  # activate first, so every kill hits a live group
            acked[u][mem.add_turn(u, turn_query(u, 0), "ok")] = turn_query(u, 0)
        done = threading.Event()

        def writer(user: str) -> None:
            for n in range(1, turns_each + 1):
                q = turn_query(user, n)
                try:
                    acked[user][mem.add_turn(user, q, f"reply {n}")] = q
                except Exception as exc:  # noqa: BLE001 - in flight during a kill: not acknowledged
                    failures.append(exc)

        def killer() -> None:
            kills = 0
            while not done.is_set() and kills < 24:
                name = actor_names(rng.choice(users))[rng.randrange(3)]
                ref = mem.registry.lookup(name)
                if ref is not None and supervisor.kill(ref, "fault injection"):
                    kills += 1
                done.wait(rng.uniform(0.0, 0.03))

        threads = [threading.Thread(target=writer, args=(u,)) for u in users]
        k = threading.Thread(target=killer)
        for t in threads:
            t.start()
        k.start()
        for t in threads:
            t.join()
        done.set()
        k.join()
        mem.flush(timeout=20.0)  # a liveness guard: settling takes well under a second
        problems = [p for u in users for p in check_ledger(mem, u, acked[u])]
        assert problems == []
        # Every call that failed did so with a typed error, not a raw actor exception.
        assert [f for f in failures if not isinstance(f, MemoryOSError)] == []
        assert sum(len(a) for a in acked.values()) > len(users) * turns_each // 2


def test_mtm_stopped_before_placing_its_wal_pages_never_lends_a_holed_state_to_a_snapshot(
    tmp_path: Path,
) -> None:
    # A restarted MTM places the pages its predecessor left unplaced (from the WAL) before
    # anything else, one catch-up at a time in the process. If its group is stopped while
    # it waits for that, the pages STM handed it meanwhile and STM's periodic request for
    # its state are still in its mailbox. Placing those pages past the hole, and giving
    # that state to the snapshot, made the snapshot claim turns MTM never held: they were
    # gone after the next activation (found by the concurrent-kill test above).
    user = "holes"
    names = actor_names(user)
    acked: dict[str, str] = {}
    with MemoryOS.open(
        tmp_path / "data", small_config(snapshot_every_turns=30), clock=ManualClock(CLOCK_START)
    ) as mem:

        def add(n: int) -> None:
            acked[mem.add_turn(user, turn_query(user, n), "ok")] = turn_query(user, n)

        def outbox_empty() -> bool:
            stm = mem.registry.lookup(names[0])
            return stm is not None and not stm.ask(Inspect(), timeout=10.0).outbox

        for n in range(1, 21):
            add(n)
        mem.flush(timeout=20.0)
        gate = mem._core.catch_up_gate
        held = threading.Event()
        assert gate.enter(held, lambda: False)  # the only slot: catch-ups wait for it
        try:
            old = mem.registry.lookup(names[1])
            assert old is not None and supervisor.kill(old, "fault injection")
            wait_restarted(mem, names[1], old)
            wait_until(lambda: gate.waiting == 1, "the new MTM to wait for the catch-up gate")
            for n in range(21, 30):  # pages 14-22 leave STM and queue at the waiting MTM
                add(n)
            wait_until(outbox_empty, "STM to hand its pages to MTM")
            add(30)  # STM's periodic snapshot asks MTM for its state, behind those pages
            assert mem.passivate(user)  # stops MTM while it still waits for the gate
        finally:
            gate.release(held)
        assert check_ledger(mem, user, acked) == []


def test_crash_loop_of_one_user_restarts_its_group_and_leaves_other_users_alone(
    tmp_path: Path,
) -> None:
    with MemoryOS.open(tmp_path / "data", small_config(), clock=ManualClock(CLOCK_START)) as mem:
        ledgers: dict[str, dict[str, str]] = {"loop": {}, "calm-1": {}, "calm-2": {}}
        for user, ledger in ledgers.items():
            for n in range(1, 21):
                ledger[mem.add_turn(user, turn_query(user, n), "ok")] = turn_query(user, n)
        calm_refs = {
            u: [mem.registry.lookup(n) for n in actor_names(u)] for u in ("calm-1", "calm-2")
        }
        users_sup = mem.registry.require("users")

        def group_restarts(user: str) -> int:
            info = {c.id: c for c in supervisor.which_children(users_sup)}
            return info[f"user:{user}"].restarts

        before = group_restarts("loop")
        root_before = {c.id: c.restarts for c in supervisor.which_children(mem._core.tree.root)}

        bystander_errors: list[BaseException] = []
        stop = threading.Event()

        def bystander() -> None:
            n = 100
            while not stop.is_set():
                n += 1
                q = turn_query("calm-1", n)
                try:
                    ledgers["calm-1"][mem.add_turn("calm-1", q, "ok")] = q
                    mem.retrieve("calm-1", "glacier hike")
                except BaseException as exc:  # noqa: BLE001 - any failure is the finding
                    bystander_errors.append(exc)

        t = threading.Thread(target=bystander)
        t.start()
        try:
            # The group allows 3 restarts in 5 s; the 4th crash escalates to "users".
            stm_name = actor_names("loop")[0]
            for _ in range(5):
                ref = mem.registry.lookup(stm_name)
                if ref is None or not ref.is_alive():
                    ref = wait_restarted(mem, stm_name, ref)
                supervisor.kill(ref, "crash loop")
                wait_restarted(mem, stm_name, ref)
        finally:
            stop.set()
            t.join()
        assert group_restarts("loop") > before, "the crash loop never escalated to the group"
        assert bystander_errors == []
        # Other users' actors were not restarted, the tree above "users" was not touched.
        for user, refs in calm_refs.items():
            assert [mem.registry.lookup(n) for n in actor_names(user)] == refs, user
        root_after = {c.id: c.restarts for c in supervisor.which_children(mem._core.tree.root)}
        assert root_after == root_before
        # The looping user works again and lost nothing.
        q = turn_query("loop", 99)
        ledgers["loop"][mem.add_turn("loop", q, "ok")] = q
        mem.flush()
        problems = [p for u, led in ledgers.items() for p in check_ledger(mem, u, led)]
        assert problems == []


def test_failed_calls_during_a_kill_are_typed_memoryos_errors(tmp_path: Path) -> None:
    """A call whose actor is killed under it reports a MemoryOSError, never a raw Killed."""
    with MemoryOS.open(tmp_path / "data", small_config(), clock=ManualClock(CLOCK_START)) as mem:
        mem.add_turn("k", turn_query("k", 1), "ok")
        errors: list[BaseException] = []
        stop = threading.Event()

        def reader() -> None:
            while not stop.is_set():
                try:
                    mem.user_state("k")
                except BaseException as exc:  # noqa: BLE001 - any failure is recorded
                    errors.append(exc)

        t = threading.Thread(target=reader)
        t.start()
        try:
            for _ in range(3):
                name = actor_names("k")[1]
                ref = mem.registry.lookup(name)
                if ref is None:
                    continue
                supervisor.kill(ref, "fault injection")
                wait_restarted(mem, name, ref)
        finally:
            stop.set()
            t.join()
        assert [e for e in errors if not isinstance(e, MemoryOSError)] == []
