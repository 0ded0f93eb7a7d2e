"""The facade's counters (turns, retrievals, chats) are exact under concurrent calls.

They live in the thread-safe ``Metrics`` the facade exposes as ``mem.metrics`` (as the
actors' counters do), so ``stats()`` and ``mem.metrics`` agree and no increment is lost
when many threads call at once.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterator

import pytest

from memoryos_actors import MemoryOS

THREADS = 8
ROUNDS = 25


@pytest.fixture
def tiny_switch_interval() -> Iterator[None]:
    # Switch threads as often as the interpreter allows: an unlocked read-add-write of a
    # counter is then interleaved, and loses increments, far more often.
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(before)


def test_counters_are_exact_when_many_threads_call_at_once(
    open_mem: Callable[..., MemoryOS], tiny_switch_interval: None
) -> None:
    mem = open_mem()
    errors: list[BaseException] = []
    start = threading.Barrier(THREADS)

    def work(n: int) -> None:
        try:
            start.wait(30)
            user = f"user-{n}"
            for i in range(ROUNDS):
                mem.add_turn(user, f"question {i}", f"answer {i}")
                mem.retrieve(user, f"question {i}")
                mem.chat(user, f"what about {i}?")
        except BaseException as exc:  # noqa: BLE001 - re-raised in the test's thread
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert not any(t.is_alive() for t in threads)
    assert errors == []
    calls = THREADS * ROUNDS
    # chat stores its turn (a turn) and retrieves first (a retrieval).
    want = {"turns": 2 * calls, "retrievals": 2 * calls, "chats": calls, "degraded_chats": 0}
    stats = mem.stats()
    assert {k: stats[k] for k in want} == want
    snapshot = mem.metrics.snapshot()
    assert {k: snapshot.get(k) for k in want} == want
