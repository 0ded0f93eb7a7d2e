"""Keys for turns added without one: distinct in a process, across threads and forks."""

from __future__ import annotations

import multiprocessing
import threading

from memoryos_actors.conversation import _generated_key


def test_keys_are_distinct_and_marked_as_generated() -> None:
    keys = [_generated_key() for _ in range(10_000)]
    assert len(set(keys)) == len(keys)
    assert all(k.startswith("~") for k in keys)  # never equal to a caller's "u:..." key


def test_threads_drawing_at_once_get_distinct_keys() -> None:
    got: list[list[str]] = [[] for _ in range(8)]

    def draw(out: list[str]) -> None:
        for _ in range(5_000):
            out.append(_generated_key())

    threads = [threading.Thread(target=draw, args=(out,)) for out in got]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    every = [k for out in got for k in out]
    assert len(set(every)) == len(every) == 40_000


def _child_keys(q: multiprocessing.Queue[list[str]]) -> None:
    q.put([_generated_key() for _ in range(100)])


def test_a_forked_child_does_not_repeat_its_parents_keys() -> None:
    ctx = multiprocessing.get_context("fork")
    q: multiprocessing.Queue[list[str]] = ctx.Queue()
    p = ctx.Process(target=_child_keys, args=(q,))
    p.start()
    child = q.get(timeout=60)
    p.join(timeout=60)
    parent = [_generated_key() for _ in range(100)]
    assert not set(child) & set(parent)
    assert child[0].rsplit("-", 1)[0] != parent[0].rsplit("-", 1)[0]
