"""The gateway's event loop thread: one asyncio loop on a thread of its own.

Completions run there, so a call waiting for the provider holds no thread. The loop is
started by the service on first use and stopped by its ``close``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Awaitable, Callable
from typing import Any

__all__ = ["LoopThread"]


class LoopThread:
    """An asyncio event loop running on a thread of its own, until :meth:`close`."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        # The tasks of the coroutines given to :meth:`run` (the loop's thread only): close
        # grants them its grace. Tasks a library starts on the loop for itself (litellm's
        # logging worker never ends) are cancelled at once rather than waited for.
        self._mine: set[asyncio.Task[Any]] = set()
        self._ready = threading.Event()
        self.thread = threading.Thread(target=self._run, name="memoryos-gateway-loop", daemon=True)
        self.thread.start()
        self._ready.wait()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.call_soon(self._ready.set)
        self.loop.run_forever()

    def run(self, coro: Any) -> concurrent.futures.Future[Any]:
        """Schedule ``coro`` on the loop; the returned future is thread-safe."""
        return asyncio.run_coroutine_threadsafe(self._owned(coro), self.loop)

    async def _owned(self, coro: Any) -> Any:
        task = asyncio.current_task()
        assert task is not None  # a coroutine run by the loop always has its task
        self._mine.add(task)
        try:
            return await coro
        finally:
            self._mine.discard(task)

    def close(self, grace: float, cleanup: Callable[[], Awaitable[Any]] | None = None) -> None:
        """Let the tasks of :meth:`run` finish for up to ``grace`` seconds, cancel every
        other task, await ``cleanup()`` (best effort), stop the loop and join its thread."""

        async def shutdown() -> None:
            me = asyncio.current_task()
            mine = [t for t in self._mine if t is not me and not t.done()]
            if mine and grace > 0:
                await asyncio.wait(mine, timeout=grace)
            pending = [t for t in asyncio.all_tasks() if t is not me and not t.done()]
            for t in pending:
                t.cancel()
            if pending:
                await asyncio.wait(pending, timeout=1.0)
            if cleanup is not None:
                try:
                    await cleanup()
                except Exception:  # noqa: BLE001, S110 - closing connections is best effort
                    pass
            await self.loop.shutdown_default_executor()

        if self.thread is threading.current_thread():
            raise RuntimeError("the gateway loop cannot close itself")
        try:
            self.run(shutdown()).result(grace + 10.0)
        except (concurrent.futures.TimeoutError, RuntimeError):
            pass
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5.0)
        if not self.thread.is_alive():
            self.loop.close()
