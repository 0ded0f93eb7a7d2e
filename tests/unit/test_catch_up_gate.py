"""The catch-up gate: at most N holders, first come first served, waits that can be called off."""

from __future__ import annotations

import random
import threading
import time

import pytest

from memoryos_actors.actors.base import CatchUpGate


def _wait_until(cond, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.001)


def test_a_free_slot_is_taken_at_once_and_given_back() -> None:
    gate = CatchUpGate(1)
    assert gate.enter(threading.Event(), lambda: False)
    gate.leave()
    assert gate.enter(threading.Event(), lambda: False)  # the slot came back
    gate.leave()
    with pytest.raises(ValueError):
        CatchUpGate(0)


def test_waiters_get_the_slot_in_the_order_they_came() -> None:
    gate = CatchUpGate(1)
    assert gate.enter(threading.Event(), lambda: False)
    order: list[int] = []
    threads = []
    for i in range(4):
        t = threading.Thread(target=lambda i=i: (gate.enter(threading.Event(), lambda: False),
                                                 order.append(i), gate.leave()))
        t.start()
        _wait_until(lambda i=i: gate.waiting == i + 1)  # queued in this order
        threads.append(t)
    gate.leave()
    for t in threads:
        t.join(5)
    assert order == [0, 1, 2, 3]
    assert gate.waiting == 0


def test_a_wait_called_off_leaves_the_queue_and_the_slot_goes_to_the_next() -> None:
    gate = CatchUpGate(1)
    assert gate.enter(threading.Event(), lambda: False)
    stop = threading.Event()
    ticket = threading.Event()
    gave_up: list[bool] = []
    quitter = threading.Thread(target=lambda: gave_up.append(gate.enter(ticket, stop.is_set)))
    quitter.start()
    _wait_until(lambda: gate.waiting == 1)
    got: list[bool] = []
    patient = threading.Thread(target=lambda: (got.append(gate.enter(threading.Event(),
                                                                     lambda: False)),
                                               gate.leave()))
    patient.start()
    _wait_until(lambda: gate.waiting == 2)
    stop.set()
    ticket.set()  # what MTM's on_stop_requested does
    quitter.join(5)
    assert gave_up == [False] and gate.waiting == 1
    gate.leave()
    patient.join(5)
    assert got == [True] and gate.waiting == 0
    assert gate.enter(threading.Event(), lambda: False)  # no slot was lost


@pytest.mark.parametrize("seed", range(5))
def test_under_random_arrivals_and_cancellations_holders_never_exceed_the_slots(
        seed: int) -> None:
    rng = random.Random(seed)
    slots = rng.randint(1, 3)
    gate = CatchUpGate(slots)
    held = 0
    most = 0
    lock = threading.Lock()
    outcomes: list[bool] = []

    def worker(cancel_after: float | None, work: float) -> None:
        nonlocal held, most
        ticket = threading.Event()
        stop = threading.Event()
        if cancel_after is not None:
            threading.Timer(cancel_after, lambda: (stop.set(), ticket.set())).start()
        ok = gate.enter(ticket, stop.is_set)
        outcomes.append(ok)
        if not ok:
            return
        with lock:
            held += 1
            most = max(most, held)
        time.sleep(work)
        with lock:
            held -= 1
        gate.leave()

    threads = [threading.Thread(target=worker, args=(
        rng.choice([None, rng.uniform(0.0, 0.02)]), rng.uniform(0.0, 0.005)))
        for _ in range(30)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert most <= slots
    assert gate.waiting == 0
    # Every slot is free again: all of them can be taken without waiting.
    for _ in range(slots):
        assert gate.enter(threading.Event(), lambda: True)
    time.sleep(0.05)  # let the cancel timers of finished workers fire
