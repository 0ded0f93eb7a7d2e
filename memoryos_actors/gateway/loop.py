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
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def close(self, grace: float, cleanup: Callable[[], Awaitable[Any]] | None = None) -> None:
        """Let running tasks finish for up to ``grace`` seconds, cancel the rest, await
        ``cleanup()`` (best effort), stop the loop and join its thread."""

        async def shutdown() -> None:
            me = asyncio.current_task()
            tasks = [t for t in asyncio.all_tasks() if t is not me]
            if tasks:
                _done, pending = await asyncio.wait(tasks, timeout=grace)
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
