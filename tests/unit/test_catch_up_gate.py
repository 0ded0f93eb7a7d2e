"""The catch-up gate: at most N holders, first come first served, waits that can be called off."""

from __future__ import annotations

import random
import threading
import time

import pytest
from waiting import wait_until

from memoryos_actors.actors.base import CatchUpGate


def test_a_free_slot_is_taken_at_once_and_given_back_once() -> None:
    gate = CatchUpGate(1)
    first = threading.Event()
    assert gate.enter(first, lambda: False)
    gate.release(first)
    gate.release(first)  # idempotent: the slot is not given back twice
    second, third = threading.Event(), threading.Event()
    assert gate.enter(second, lambda: False)  # the slot came back
    assert not gate.enter(third, lambda: True)  # ... once: a second holder would wait
    gate.release(third)
    gate.release(second)
    with pytest.raises(ValueError):
        CatchUpGate(0)


def test_waiters_get_the_slot_in_the_order_they_came() -> None:
    gate = CatchUpGate(1)
    holder = threading.Event()
    assert gate.enter(holder, lambda: False)
    order: list[int] = []
    threads = []

    def take(i: int) -> None:
        ticket = threading.Event()
        gate.enter(ticket, lambda: False)
        order.append(i)
        gate.release(ticket)

    for i in range(4):
        t = threading.Thread(target=take, args=(i,))
        t.start()
        wait_until(lambda i=i: gate.waiting == i + 1, f"{i + 1} waiters")  # queued in this order
        threads.append(t)
    gate.release(holder)
    for t in threads:
        t.join(5)
    assert order == [0, 1, 2, 3]
    assert gate.waiting == 0


def test_a_wait_called_off_leaves_the_queue_and_the_slot_goes_to_the_next() -> None:
    gate = CatchUpGate(1)
    holder = threading.Event()
    assert gate.enter(holder, lambda: False)
    stop = threading.Event()
    ticket = threading.Event()
    gave_up: list[bool] = []
    quitter = threading.Thread(target=lambda: gave_up.append(gate.enter(ticket, stop.is_set)))
    quitter.start()
    wait_until(lambda: gate.waiting == 1, "one waiter")
    got: list[bool] = []

    def patient_take() -> None:
        mine = threading.Event()
        got.append(gate.enter(mine, lambda: False))
        gate.release(mine)

    patient = threading.Thread(target=patient_take)
    patient.start()
    wait_until(lambda: gate.waiting == 2, "two waiters")
    stop.set()
    ticket.set()  # what MTM's on_stop_requested does
    quitter.join(5)
    gate.release(ticket)  # what the caller's finally does: nothing to give back
    assert gave_up == [False] and gate.waiting == 1
    gate.release(holder)
    patient.join(5)
    assert got == [True] and gate.waiting == 0
    last = threading.Event()
    assert gate.enter(last, lambda: False)  # no slot was lost
    gate.release(last)


def test_a_ticket_handed_the_slot_but_released_before_waking_passes_it_on() -> None:
    # An actor killed right after being handed the slot: its finally releases the ticket.
    gate = CatchUpGate(1)
    holder, doomed, next_ = threading.Event(), threading.Event(), threading.Event()
    assert gate.enter(holder, lambda: False)
    assert not gate.enter(doomed, lambda: True)  # gives up at once, leaves the queue
    with gate._lock:  # noqa: SLF001 - queue it without a thread, as a sleeping waiter
        gate._queue[doomed] = None  # noqa: SLF001
        gate._queue[next_] = None  # noqa: SLF001
    gate.release(holder)  # handed to doomed
    assert doomed.is_set() and not next_.is_set()
    gate.release(doomed)  # killed before it woke: the slot moves on
    assert next_.is_set()
    assert gate.enter(next_, lambda: False)
    gate.release(next_)
    free = threading.Event()
    assert gate.enter(free, lambda: False)
    gate.release(free)


@pytest.mark.parametrize("seed", range(5))
def test_under_random_arrivals_and_cancellations_holders_never_exceed_the_slots(seed: int) -> None:
    rng = random.Random(seed)
    slots = rng.randint(1, 3)
    gate = CatchUpGate(slots)
    held = 0
    most = 0
    lock = threading.Lock()
    outcomes: list[bool] = []
    timers: list[threading.Timer] = []

    def worker(cancel_after: float | None, work: float) -> None:
        nonlocal held, most
        ticket = threading.Event()
        stop = threading.Event()
        if cancel_after is not None:
            timer = threading.Timer(cancel_after, lambda: (stop.set(), ticket.set()))
            timers.append(timer)
            timer.start()
        ok = gate.enter(ticket, stop.is_set)
        outcomes.append(ok)
        if not ok:
            return
        with lock:
            held += 1
            most = max(most, held)
        time.sleep(work)  # the holder's work: time passing is what this simulates
        with lock:
            held -= 1
        gate.release(ticket)

    threads = [
        threading.Thread(
            target=worker,
            args=(rng.choice([None, rng.uniform(0.0, 0.02)]), rng.uniform(0.0, 0.005)),
        )
        for _ in range(30)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert most <= slots
    assert gate.waiting == 0
    # Every slot is free again: all of them can be taken without waiting.
    for _ in range(slots):
        assert gate.enter(threading.Event(), lambda: True)
    assert not gate.enter(threading.Event(), lambda: True)
    for timer in timers:  # the cancel timers of workers that finished first
        timer.join(10)
