"""Locks a kill cannot leave held: the ``with`` of a SafeCondition takes and gives back
its lock from the caller's own frame, and actors' inboxes and reply futures use them."""

from __future__ import annotations

import queue
import sys
import threading
from types import FrameType
from typing import Any

import pykka

from supervisor import SafeCondition, SafeEvent, SafeFuture, SupervisedActor


def _frames_taking_the_lock(cond: threading.Condition) -> list[str]:
    """The names of the Python frames from which ``with cond:`` called its lock's C
    ``__enter__``/``__exit__`` (an asynchronous exception can land in such a frame after
    the lock is taken and before the caller's block protects it)."""
    seen: list[str] = []

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if event == "c_call" and getattr(arg, "__name__", "") in ("__enter__", "__exit__"):
            seen.append(frame.f_code.co_name)

    sys.setprofile(profile)
    try:
        with cond:
            pass
    finally:
        sys.setprofile(None)
    return seen


def test_a_safe_condition_takes_and_releases_its_lock_from_the_callers_frame() -> None:
    plain = _frames_taking_the_lock(threading.Condition(threading.Lock()))
    assert plain == ["__enter__", "__exit__"]  # Condition's own Python frames: the hole
    safe = _frames_taking_the_lock(SafeCondition(threading.Lock()))
    assert set(safe) <= {"_frames_taking_the_lock"}  # only the caller's frame, if seen


def test_a_safe_condition_still_waits_and_notifies() -> None:
    cond = SafeCondition(threading.Lock())
    box: list[int] = []

    def producer() -> None:
        with cond:
            box.append(1)
            cond.notify()

    with cond:
        t = threading.Thread(target=producer)
        t.start()
        assert cond.wait_for(lambda: box, timeout=10)
    t.join()
    assert not cond._is_owned()


class _Echo(SupervisedActor):
    def on_receive(self, message: object) -> object:
        return message


def test_supervised_actors_use_a_lock_free_inbox_and_safe_reply_futures() -> None:
    ref = _Echo.start()
    try:
        assert isinstance(ref.actor_inbox, queue.SimpleQueue)
        future = ref.ask("hello", block=False)
        assert isinstance(future, SafeFuture)
        assert isinstance(future._condition, SafeCondition)
        assert future.get(timeout=10) == "hello"
    finally:
        ref.stop()
    assert not isinstance(pykka.ThreadingActor._create_actor_inbox(), queue.SimpleQueue)


def test_a_safe_event_sets_and_waits_on_a_safe_condition() -> None:
    event = SafeEvent()
    assert isinstance(event._cond, SafeCondition)  # type: ignore[attr-defined]
    t = threading.Timer(0.05, event.set)
    t.start()
    assert event.wait(10)
    t.join()
    event.clear()
    assert not event.wait(0.01)
