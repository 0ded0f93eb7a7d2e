"""A flood of calls gets ``Overloaded`` answers instead of unbounded queues."""

from __future__ import annotations

import threading
from pathlib import Path

from faultutil import check_ledger, small_config, turn_query
from waiting import wait_until

from memoryos_actors import ManualClock, MemoryOS, Overloaded


def test_flooding_one_user_from_many_threads_yields_overloaded_and_bounded_inflight(
    tmp_path: Path,
) -> None:
    cfg = small_config(max_inflight_per_user=2, max_inflight_total=4, overload_timeout_seconds=0.02)
    users = ("flood-a", "flood-b")
    acked: dict[str, dict[str, str]] = {u: {} for u in users}
    lock = threading.Lock()
    overloaded = 0
    other: list[BaseException] = []
    peaks = {"inflight": 0, "gateway_backlog": 0}
    with MemoryOS.open(tmp_path / "data", cfg, clock=ManualClock(1_700_000_000.0)) as mem:
        stop = threading.Event()

        def flood(worker: int) -> None:
            nonlocal overloaded
            user = users[worker % len(users)]
            for n in range(40):
                q = turn_query(user, worker * 1000 + n)
                try:
                    pid = mem.add_turn(user, q, "ok")
                except Overloaded:
                    with lock:
                        overloaded += 1
                    continue
                except BaseException as exc:  # noqa: BLE001 - the finding
                    other.append(exc)
                    continue
                with lock:
                    acked[user][pid] = q

        def watch() -> None:
            while not stop.is_set():
                st = mem.stats()
                for key, peak in list(peaks.items()):
                    peaks[key] = max(peak, st[key])

        watcher = threading.Thread(target=watch)
        watcher.start()
        threads = [threading.Thread(target=flood, args=(i,)) for i in range(16)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        stop.set()
        watcher.join()
        assert other == []
        assert overloaded > 0
        # The bounds held throughout: never more calls in flight than configured.
        assert peaks["inflight"] <= cfg.max_inflight_total
        assert peaks["gateway_backlog"] <= max(cfg.max_inflight_total, cfg.gateway_workers)
        # Afterwards, once the flood's queued work is done (a user's placement queue holds
        # placement_backlog_seconds of it, longer than this test's 20 ms overload timeout),
        # the system serves normally and kept every acknowledged turn once.
        mem.flush()
        q = turn_query("flood-a", 99_999)
        acked["flood-a"][mem.add_turn("flood-a", q, "ok")] = q
        mem.flush()
        assert [p for u in users for p in check_ledger(mem, u, acked[u])] == []


def test_a_snapshot_that_cannot_get_mtms_state_in_time_is_dropped_not_a_crash(
    tmp_path: Path, monkeypatch
) -> None:
    # A long placement queue behind a slow embedder makes MTM answer late; the periodic
    # snapshot does not hold up the turns, and one whose states come too late is dropped.
    import time

    from memoryos_actors.actors import stm as stm_module
    from memoryos_actors.actors.mtm import MTMActor
    from memoryos_actors.actors.protocol import GetState

    monkeypatch.setattr(stm_module, "_STATE_TIMEOUT_S", 0.2)
    original = MTMActor.on_receive

    def slow(self, message):  # type: ignore[no-untyped-def]
        if isinstance(message, GetState):
            time.sleep(0.5)  # fault injection: MTM answers later than STM waits
        return original(self, message)

    monkeypatch.setattr(MTMActor, "on_receive", slow)
    cfg = small_config(snapshot_every_turns=5)
    acked: dict[str, str] = {}
    with MemoryOS.open(tmp_path / "data", cfg, clock=ManualClock(1_700_000_000.0)) as mem:
        for i in range(1, 13):
            q = turn_query("u", i)
            acked[mem.add_turn("u", q, "ok")] = q
        wait_until(
            lambda: mem.metrics.snapshot().get("snapshots_deferred", 0) >= 1,
            "the slow snapshot to be given up",
        )
        assert "restarts=0" in mem.tree() and "restarts=1" not in mem.tree()
        mem.flush()
        assert check_ledger(mem, "u", acked) == []
    monkeypatch.setattr(MTMActor, "on_receive", original)
    with MemoryOS.open(tmp_path / "data", cfg, clock=ManualClock(1_700_000_000.0)) as mem:
        assert check_ledger(mem, "u", acked) == []  # the WAL had it all
