"""The gateway's loop thread at close: its own calls get the grace, other tasks do not."""

from __future__ import annotations

import asyncio
import threading
import time

from memoryos_actors.gateway.loop import LoopThread


def test_close_waits_for_its_own_calls_and_cancels_a_library_task_that_never_ends() -> None:
    lt = LoopThread()
    foreign_cancelled = threading.Event()
    release = threading.Event()

    async def never_ends() -> None:  # like litellm's logging worker
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            foreign_cancelled.set()
            raise

    # Held here as the library holds its worker: asyncio keeps only a weak reference to a
    # task, and a pending task no one holds may be garbage-collected, never cancelled
    # (which once failed this test: "Task was destroyed but it is pending!").
    library_tasks: list[asyncio.Task[None]] = []

    async def start_foreign() -> None:  # started by "a library", not through run()
        library_tasks.append(lt.loop.create_task(never_ends()))

    async def a_call() -> str:
        while not release.is_set():
            await asyncio.sleep(0.01)
        return "answered"

    lt.run(start_foreign()).result(5.0)
    call = lt.run(a_call())
    # The call ends a moment after close began: it must be waited for, not cancelled.
    timer = threading.Timer(0.2, release.set)
    timer.start()
    started = time.monotonic()
    lt.close(grace=30.0)
    elapsed = time.monotonic() - started
    timer.join()
    assert call.result(0) == "answered"
    assert foreign_cancelled.is_set() and library_tasks[0].cancelled()
    assert not lt.thread.is_alive()
    # Not the 30 s grace: only the call was waited for (the never-ending task was not).
    assert elapsed < 10.0


def test_close_with_no_grace_cancels_a_call_still_running() -> None:
    lt = LoopThread()

    async def hangs() -> None:
        await asyncio.Event().wait()

    call = lt.run(hangs())
    lt.close(grace=0.0)
    assert call.cancelled()
    assert not lt.thread.is_alive()
