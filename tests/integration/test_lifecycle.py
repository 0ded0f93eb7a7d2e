"""The user lifecycle under load: races against forget/import/export/passivate/janitor,
stale replies of forgotten incarnations, the gateway purge, idempotent turn keys, and the
failure paths of passivation."""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

import pytest
from sysutil import SMALL
from waiting import wait_until

import supervisor
from memoryos_actors import ManualClock, MemoryConfig, MemoryOS, Overloaded, UserPhase
from memoryos_actors.actors.base import actor_names
from memoryos_actors.actors.protocol import CompletionDone, CompletionJob
from memoryos_actors.store.userstore import UserStore

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from lifecycle_bench import run_trial, stored_keys  # noqa: E402


# One seed of the race: the threads' interleaving varies run to run anyway, and a second
# seed repeated the same race at twice the cost (four did at four times, #27).
# bench/lifecycle_bench.py runs as many trials as asked.
@pytest.mark.parametrize("seed", [11])
def test_writers_racing_forget_import_export_passivate_and_janitor_keep_the_ledger(
    tmp_path: Path, seed: int
) -> None:
    result = run_trial(tmp_path, seed, writers=3, turns=30, ops=10)
    assert result.problems == []
    assert result.acked > 0
    assert sum(result.ops.values()) > 0


def test_a_reply_for_a_forgotten_incarnation_never_reaches_the_new_one(open_mem) -> None:
    mem = open_mem()
    mem.add_turn("u", "old secret about my bank", "noted")
    mem.flush()
    old_epoch = mem.user_epoch("u")
    mem.forget_user("u")
    mem.add_turn("u", "a fresh start", "welcome")  # page p1 again, new incarnation
    mem.flush()
    assert mem.user_epoch("u") != old_epoch
    before = mem.user_state("u").stm[0]
    stm = mem.registry.require(actor_names("u")[0])
    stale = {
        "continues": False,
        "meta_chain": "old secret about my bank",
        "keywords": ["bank", "secret"],
    }
    stm.tell(CompletionDone("page_meta", "p1", stale, degraded=False, epoch=old_epoch))
    mtm = mem.registry.require(actor_names("u")[1])
    mtm.tell(
        CompletionDone(
            "segment_summary",
            "s1",
            {"summary": "old secret", "keywords": []},
            degraded=False,
            epoch=old_epoch,
        )
    )
    mem.flush()
    after = mem.user_state("u").stm[0]
    assert after == before
    assert "secret" not in after.meta_chain
    assert mem.stats()["stale_replies_dropped"] >= 2


def test_a_meta_answer_that_quotes_a_page_deleted_meanwhile_loses_its_chain_summary(
    open_mem,
) -> None:
    # A page's chain summary is asked for with the page before it as context. When that
    # page is deleted while the answer is out, the answer (in time, or late as a redo)
    # must not bring the deleted text back in its successor's summary.
    mem = open_mem()
    mem.add_turn("u", "My locker code is walnut", "noted")
    mem.add_turn("u", "I like tea", "noted")
    mem.flush()
    mem.delete_memory("u", "page:p1")
    stm = mem.registry.require(actor_names("u")[0])
    quoting = {
        "continues": True,
        "meta_chain": "locker code is walnut; likes tea",
        "keywords": ["tea"],
    }
    stm.tell(CompletionDone("page_meta", "p2", quoting, degraded=False, epoch=mem.user_epoch("u")))
    mem.flush()
    (page,) = mem.user_state("u").stm
    assert page.page_id == "p2" and "walnut" not in page.meta_chain
    assert "walnut" not in mem.retrieve("u", "what is my locker code").render()


def test_forget_purges_the_users_gateway_cache_redo_queue_and_degraded_records(open_mem) -> None:
    mem = open_mem()
    for i in range(12):
        mem.add_turn("gone", f"my diary entry number {i}", "ok")
        mem.add_turn("kept", f"another user's entry {i}", "ok")
    mem.flush()
    # Completions asked of the gateway's service are cached per user (the tiers' own
    # offline jobs are answered in their threads and not cached).
    for user in ("gone", "kept"):
        meta = {"page": {"query": f"{user} says hi", "response": "ok"}, "previous_page": None}
        mem.gateway_service.complete("page_meta", {**meta, "previous_meta_chain": ""}, user_id=user)
    # A degraded job "gone" asked for, waiting for a redo.
    job = CompletionJob(
        "page_meta",
        {"page": {"query": "q", "response": "r"}, "previous_page": None, "previous_meta_chain": ""},
        "gone",
        actor_names("gone")[0],
        "p99",
        mem.user_epoch("gone"),
    )
    mem._core.gateway.remember_degraded(job)  # noqa: SLF001 - the redo bookkeeping under test
    mem.gateway_service._enqueue_redo("page_meta", job.payload, "gone")  # noqa: SLF001
    report = mem.forget_user("gone")
    assert report.purged["gateway_cache"] > 0
    assert report.purged["redo_queue"] == 1
    assert report.purged["degraded_records"] == 1
    assert mem.gateway_service.pending_count() == 0
    assert mem.gateway_service.purge_user("gone") == {"gateway_cache": 0, "redo_queue": 0}
    # The other user's entries stay.
    assert mem.gateway_service.purge_user("kept")["gateway_cache"] > 0


def test_a_retried_add_turn_with_the_same_turn_key_is_stored_once(open_mem) -> None:
    mem = open_mem()
    first = mem.add_turn("k", "question k=one", "answer", turn_key="one")
    again = mem.add_turn("k", "question k=one", "answer", turn_key="one")
    assert again == first
    mem.passivate("k")  # the key survives a snapshot and a new incarnation
    assert mem.add_turn("k", "question k=one", "answer", turn_key="one") == first
    other = mem.add_turn("k", "question k=two", "answer", turn_key="two")
    assert other != first
    mem.flush()
    assert sorted(stored_keys(mem, "k")) == ["one", "two"]


def test_turn_keys_survive_a_reopen_after_a_snapshot(tmp_path: Path) -> None:
    cfg = MemoryConfig(**{**SMALL, "snapshot_every_turns": 3})
    with MemoryOS.open(tmp_path, cfg, clock=ManualClock(1.7e9)) as mem:
        page = mem.add_turn("r", "question k=a", "answer", turn_key="a")
        for i in range(8):  # several snapshots, so the WAL record of "a" is gone
            mem.add_turn("r", f"filler {i}", "ok")
    with MemoryOS.open(tmp_path, cfg, clock=ManualClock(1.7e9)) as mem:
        assert mem.add_turn("r", "question k=a", "answer", turn_key="a") == page
        mem.flush()
        assert stored_keys(mem, "r").count("a") == 1


def test_passivate_waits_for_calls_in_flight_and_gives_up_with_overloaded(open_mem) -> None:
    mem = open_mem(MemoryConfig(**{**SMALL, "overload_timeout_seconds": 0.3}))
    mem.add_turn("busy", "hello", "hi")
    release = threading.Event()
    entered = threading.Event()

    def hold(_entry: object) -> None:
        entered.set()
        release.wait(10)

    holder = threading.Thread(target=mem._lifecycle.call, args=("busy", hold))  # noqa: SLF001
    holder.start()
    try:
        assert entered.wait(10)
        with pytest.raises(Overloaded, match="in flight"):
            mem.passivate("busy")
        assert mem.user_phase("busy") is UserPhase.ACTIVE  # given back, not stuck
        with pytest.raises(Overloaded):
            mem.forget_user("busy")
        assert mem.user_phase("busy") is UserPhase.ACTIVE
    finally:
        release.set()
        holder.join()
    assert mem.passivate("busy") is True
    assert mem.user_phase("busy") is UserPhase.PASSIVE


def test_calls_arriving_during_a_passivation_wait_and_then_reactivate(open_mem) -> None:
    mem = open_mem()
    mem.add_turn("w", "first", "ok")
    results: list[str] = []
    started = threading.Event()

    def writer() -> None:
        started.set()
        for i in range(20):
            results.append(mem.add_turn("w", f"turn {i}", "ok"))

    t = threading.Thread(target=writer)
    t.start()
    started.wait(10)
    for _ in range(5):
        try:
            mem.passivate("w")
        except Overloaded:
            pass
    t.join()
    assert len(results) == 20
    mem.flush()
    assert len(mem.stored_page_ids("w")) == 21


def test_a_failed_store_close_during_passivation_leaves_the_user_usable(
    open_mem, monkeypatch
) -> None:
    mem = open_mem()
    mem.add_turn("f", "before", "ok")
    entry = mem._core.directory.get("f")  # noqa: SLF001 - inject the fault into this incarnation's store
    assert entry is not None and entry.store is not None
    store = entry.store
    real_close = store.close

    def failing_close() -> None:
        real_close()
        raise OSError("disk went away")

    monkeypatch.setattr(store, "close", failing_close)
    assert mem.passivate("f") is True
    assert mem.user_phase("f") is UserPhase.PASSIVE
    assert mem.add_turn("f", "after", "ok") == "p2"
    mem.flush()
    assert mem.stored_page_ids("f") == ["p1", "p2"]


def test_export_is_one_cut_even_while_the_janitor_passivates(open_mem, tmp_path: Path) -> None:
    mem = open_mem(MemoryConfig(**{**SMALL, "idle_timeout_seconds": 0.01}))
    for i in range(60):
        mem.add_turn("e", f"turn {i} about topic {i % 7}", "ok")
    mem.flush()
    archived = len(mem.archive("e"))
    assert archived > 0
    for n in range(5):  # the janitor passivates "e" between and during exports
        out = mem.export_user("e", tmp_path / f"e{n}.json")
        from memoryos_actors.store.export import read_export

        payload = read_export(out)
        assert len(payload["archive"]) == archived
        assert payload["state"]["seq"] == 60
        # The export activated "e"; the next one starts once the janitor has passivated it.
        wait_until(lambda: mem.user_phase("e") is UserPhase.PASSIVE, "the janitor to passivate e")


def test_import_and_forget_of_the_same_user_serialise(open_mem, tmp_path: Path) -> None:
    mem = open_mem()
    for i in range(10):
        mem.add_turn("src", f"turn {i}", "ok")
    out = mem.export_user("src", tmp_path / "src.json")
    errors: list[BaseException] = []

    def churn() -> None:
        for _ in range(5):
            try:
                mem.forget_user("dst")
                mem.import_user(out, "dst")
            except Exception as exc:  # noqa: BLE001 - collected and checked below
                errors.append(exc)

    threads = [threading.Thread(target=churn) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # Concurrent imports of the same id: the loser is told the user has data.
    assert all("already has data" in str(e) for e in errors), errors
    assert sorted(mem.stored_page_ids("dst")) == sorted(mem.stored_page_ids("src"))


def test_every_stm_meta_timer_is_cancelled_when_its_meta_arrives(open_mem) -> None:
    mem = open_mem()
    mem.add_turn("t", "warm up", "ok")
    mem.flush()
    before = supervisor.active_timer_count()
    for i in range(100):
        mem.add_turn("t", f"turn {i}", "ok")
    mem.flush()
    # One timer per page was left armed for 125 s before; now none outlives its answer.
    assert supervisor.active_timer_count() <= before + 2


def test_lpm_stamps_facts_with_the_injected_clock(open_mem) -> None:
    clock = ManualClock(1_000_000.0)
    mem = open_mem(clock=clock)
    mem.add_turn("c", "hi", "hello")
    lpm = mem.registry.require(actor_names("c")[2])
    lpm.tell(
        CompletionDone(
            "persona_update",
            "s1|default",
            {"traits": [], "facts": ["User keeps bees."], "agent_traits": []},
            degraded=False,
            epoch=mem.user_epoch("c"),
        )
    )
    mem.flush()
    kb = mem.user_state("c").kb
    assert [k.text for k in kb] == ["User keeps bees."]
    assert kb[0].timestamp == 1_000_000.0
    clock.advance(500.0)
    mem.passivate("c")  # the WAL replay gives the fact the same time
    assert mem.user_state("c").kb[0].timestamp == 1_000_000.0


def test_a_user_store_is_never_opened_twice_at_once(open_mem, monkeypatch) -> None:
    opened: dict[str, int] = {}
    peak: dict[str, int] = {}
    lock = threading.Lock()
    real_init, real_close = UserStore.__init__, UserStore.close

    def counting_init(self: UserStore, *a: object, **kw: object) -> None:
        real_init(self, *a, **kw)
        with lock:
            opened[self.user_id] = opened.get(self.user_id, 0) + 1
            peak[self.user_id] = max(peak.get(self.user_id, 0), opened[self.user_id])

    def counting_close(self: UserStore) -> None:
        was_open = not self._closed  # noqa: SLF001
        real_close(self)
        if was_open:
            with lock:
                opened[self.user_id] -= 1

    monkeypatch.setattr(UserStore, "__init__", counting_init)
    monkeypatch.setattr(UserStore, "close", counting_close)
    mem = open_mem(MemoryConfig(**{**SMALL, "max_active_users": 1, "idle_timeout_seconds": 0.01}))

    def work(u: str) -> None:
        for i in range(15):
            try:
                mem.add_turn(u, f"turn {i}", "ok")
                if i % 5 == 4:
                    mem.passivate(u)
            except Overloaded:
                pass

    threads = [threading.Thread(target=work, args=(u,)) for u in ("x", "y", "x", "y")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert peak and max(peak.values()) == 1


def test_mtm_holds_gateway_jobs_while_the_gateway_is_full_and_sends_them_later(open_mem) -> None:
    from memoryos_actors.actors.protocol import Pending, RefreshSummary

    mem = open_mem()
    for i in range(30):
        mem.add_turn("m", f"turn {i} about gardening and roses {i % 3}", "ok")
    mem.flush()
    segments = [s.segment_id for s in mem.user_state("m").segments]
    assert segments
    gateway = mem._core.gateway  # noqa: SLF001 - fill every worker's backlog by hand
    slots = []
    # Every slot held by this test: a job still in flight (a debounced summary that fired
    # after the flush) frees its slot when it ends, and MTM could take that one.
    deadline = time.monotonic() + 10.0
    while True:
        while (slot := gateway.try_reserve()) is not None:
            slots.append(slot)
        if gateway.pending == len(slots) or time.monotonic() > deadline:
            break
        time.sleep(0.01)
    mtm = mem.registry.require(actor_names("m")[1])
    try:
        for seg in segments:
            mtm.tell(RefreshSummary(seg))
        # No room at the gateway: the actor still answers at once (it used to block up to
        # overload_timeout_seconds per job, then drop it) and holds the jobs.
        assert mtm.ask(Pending(), timeout=30) == len(segments)
        # Counted while every slot is still held: once they are released, MTM's retry
        # timer may send the held jobs at any moment, before this line could run.
        submitted = gateway.submitted
    finally:
        for slot in slots:
            gateway.release(slot)
    mem.flush()  # the held jobs go out once there is room; flush waits for them
    assert mtm.ask(Pending(), timeout=30) == 0
    assert gateway.submitted - submitted >= len(segments)


def test_a_redone_page_meta_replaces_the_degraded_one_while_stm_holds_the_page(open_mem) -> None:
    mem = open_mem()
    mem.add_turn("d", "I repaired the bicycle chain", "great")
    mem.flush()
    stm = mem.registry.require(actor_names("d")[0])
    fresh = {
        "continues": False,
        "meta_chain": "User fixed a bike chain.",
        "keywords": ["bicycle", "chain", "repair"],
    }
    stm.tell(CompletionDone("page_meta", "p1", fresh, degraded=False, epoch=mem.user_epoch("d")))
    mem.flush()
    page = mem.user_state("d").stm[0]
    assert page.meta_chain == "User fixed a bike chain."
    assert page.keywords == frozenset({"bicycle", "chain", "repair"})
    assert mem.stats()["late_meta_applied"] == 1
    mem.passivate("d")  # the replaced meta is durable
    assert mem.user_state("d").stm[0].meta_chain == "User fixed a bike chain."


def test_activations_at_the_cap_wait_for_background_passivations_not_their_own(
    open_mem, monkeypatch
) -> None:
    # Past max_active_users an activation needs an idle user passivated first: that runs
    # on the background pool, never in the calling thread, and every caller is served.
    from sysutil import all_page_ids

    from memoryos_actors.activation import Lifecycle

    where: list[str] = []
    real = Lifecycle._passivate

    def spy(self, entry):  # type: ignore[no-untyped-def]
        where.append(threading.current_thread().name)
        real(self, entry)

    monkeypatch.setattr(Lifecycle, "_passivate", spy)
    mem = open_mem(MemoryConfig(**{**SMALL, "max_active_users": 2}))
    errors: list[BaseException] = []

    def work(user: str) -> None:
        try:
            for i in range(3):
                mem.add_turn(user, f"turn {i} of {user}", "ok")
        except BaseException as exc:  # noqa: BLE001 # pragma: no cover - reported below
            errors.append(exc)

    threads = [
        threading.Thread(target=work, args=(f"cap-{n}",), name=f"caller-{n}") for n in range(6)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(mem.active_users()) <= 2
    assert len(where) >= 4  # six users through two slots
    assert not set(where) & {t.name for t in threads}
    for n in range(6):
        assert sorted(all_page_ids(mem, f"cap-{n}")) == ["p1", "p2", "p3"]


def test_activation_does_not_wait_for_mtm_to_place_pages_left_from_before(
    open_mem, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sysutil import turn_text

    from memoryos_actors.actors.mtm import MTMActor

    user = "returning"
    mem = open_mem()
    for i in range(1, 41):
        mem.add_turn(user, *turn_text(user, i))
    mem.flush()
    assert mem.passivate(user)
    gate, entered, done = threading.Event(), threading.Event(), threading.Event()
    real = MTMActor._catch_up

    def slow_catch_up(self: MTMActor, upto_seq: int, records: object = None) -> None:
        entered.set()
        gate.wait(30)  # as placing a whole session of pages left unplaced would take
        real(self, upto_seq, records)

    monkeypatch.setattr(MTMActor, "_catch_up", slow_catch_up)

    def come_back() -> None:
        mem.add_turn(user, "back again after a while", "welcome back")
        done.set()

    writer = threading.Thread(target=come_back)
    writer.start()
    try:
        assert done.wait(10), "the activation waited for MTM's recovery"
        assert entered.wait(10)
    finally:
        gate.set()
        writer.join()
    monkeypatch.setattr(MTMActor, "_catch_up", real)
    mem.flush()
    ids = mem.stored_page_ids(user)
    assert len(ids) == len(set(ids)) == 41
    # A query right after an activation sees every page (MTM finishes recovering first).
    assert mem.passivate(user)
    ctx = mem.retrieve(user, turn_text(user, 3)[0])
    assert "p3" in {item.item_id for item in ctx.mtm}


def test_a_passivation_right_after_activation_does_not_wait_for_mtm_to_catch_up(
    open_mem, monkeypatch: pytest.MonkeyPatch
) -> None:

    from memoryos_actors.actors.mtm import MTMActor

    user = "in-and-out"
    mem = open_mem()
    _leave_pages_unplaced(mem, monkeypatch, user, 40)

    gate, entered = threading.Event(), threading.Event()
    placed: list[int] = []
    real_place = MTMActor._place

    def gated_place(self: MTMActor, page: object, now: float, emb: object = None) -> None:
        placed.append(page.seq)  # type: ignore[attr-defined]
        if len(placed) == 1:
            entered.set()
            gate.wait(30)
        real_place(self, page, now, emb)

    stop_asked = threading.Event()
    real_stop_requested = MTMActor.on_stop_requested

    def seen_stop_requested(self: MTMActor) -> None:
        real_stop_requested(self)
        stop_asked.set()

    monkeypatch.setattr(MTMActor, "_place", gated_place)
    monkeypatch.setattr(MTMActor, "on_stop_requested", seen_stop_requested)
    mem.add_turn(user, "back for a moment", "hello")  # activates; MTM starts catching up
    assert entered.wait(10)
    passivated = threading.Event()
    stopper = threading.Thread(target=lambda: (mem.passivate(user), passivated.set()))
    stopper.start()
    assert stop_asked.wait(30)  # the stop is requested while MTM places its first page
    gate.set()
    stopper.join(30)
    assert passivated.is_set()
    assert len(placed) < 10  # the catch-up stopped early instead of placing all 33 pages
    assert mem.metrics.snapshot().get("passivation_snapshots_skipped", 0) >= 1
    monkeypatch.undo()
    mem.flush()
    ids = mem.stored_page_ids(user)
    assert len(ids) == len(set(ids)) == 41


def test_a_catch_up_waits_for_the_gate_and_a_passivation_calls_the_wait_off(
    open_mem, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sysutil import turn_text

    user = "queued"
    mem = open_mem()
    _leave_pages_unplaced(mem, monkeypatch, user, 30)

    gate = mem._core.catch_up_gate  # noqa: SLF001 - the test holds the process's only slot
    held = threading.Event()
    assert gate.enter(held, lambda: False)
    try:
        mem.add_turn(user, "back for a moment", "hello")  # activates; MTM waits its turn
        wait_until(lambda: gate.waiting == 1, "MTM to wait at the catch-up gate")
        started = time.monotonic()
        assert mem.passivate(user)  # the stop wakes the wait: no slot needed to stop
        assert time.monotonic() - started < 5.0
        assert gate.waiting == 0
        assert mem.metrics.snapshot().get("passivation_snapshots_skipped", 0) >= 1
    finally:
        gate.release(held)
    # With the slot free the next incarnation places everything, each turn once.
    mem.flush()
    ids = mem.stored_page_ids(user)
    assert len(ids) == len(set(ids)) == 31
    hits = mem.retrieve(user, turn_text(user, 3)[0])
    assert any(it.item_id == "p3" for it in hits.mtm)


def _leave_pages_unplaced(
    mem: MemoryOS, monkeypatch: pytest.MonkeyPatch, user: str, turns: int
) -> None:
    """Store ``turns`` turns whose pages never leave STM's outbox (as when their meta data
    lags under load), then passivate: they are not in MTM, the next incarnation places
    them from the WAL."""
    from sysutil import turn_text

    from memoryos_actors.actors.stm import STMActor

    monkeypatch.setattr(STMActor, "_drain_outbox", lambda self: None)
    for i in range(1, turns + 1):
        mem.add_turn(user, *turn_text(user, i))
    assert mem.passivate(user)
    monkeypatch.undo()
