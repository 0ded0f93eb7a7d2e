"""Coalescing of embedding requests: one batcher thread merges concurrent callers' texts
into one embedder call, so a provider embedder sees few round trips."""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable

import numpy as np

from memoryos_actors.errors import SystemClosed

__all__ = ["MAX_EMBED_BATCH", "EmbedBatcher"]

MAX_EMBED_BATCH = 256
"""Texts per embedder call; providers cap batch sizes."""


class _Request:
    __slots__ = ("done", "error", "result", "texts")

    def __init__(self, texts: list[str]) -> None:
        self.texts = texts
        self.done = threading.Event()
        self.result: np.ndarray | None = None
        self.error: BaseException | None = None


class EmbedBatcher:
    """One thread that merges concurrent embed requests arriving within ``window`` seconds.

    The first request of a batch waits at most ``window`` seconds (or until ``max_batch``
    texts are queued) for company; then all queued requests share one call of ``fn``
    (texts in, an ``(n, dim)`` array out), each text once. Callers block on their own
    event; no thread is created per caller.
    """

    def __init__(
        self, fn: Callable[[list[str]], np.ndarray], window: float, max_batch: int
    ) -> None:
        self._fn = fn
        self._window = window
        self._max_batch = max_batch
        self._cond = threading.Condition()
        self._queue: deque[_Request] = deque()
        self._queued_texts = 0
        self._closed = False
        self._thread = threading.Thread(
            target=self._run, name="memoryos-embed-batcher", daemon=True
        )
        self._thread.start()

    def submit(self, texts: list[str]) -> np.ndarray:
        """Embed ``texts`` as part of the next batch; blocks until the batch is done."""
        req = _Request(texts)
        with self._cond:
            if self._closed:
                raise SystemClosed("the gateway is closed")
            self._queue.append(req)
            self._queued_texts += len(texts)
            self._cond.notify()
        req.done.wait()
        if req.error is not None:
            raise req.error
        assert req.result is not None
        return req.result

    def _take(self) -> list[_Request] | None:
        with self._cond:
            while not self._queue and not self._closed:
                self._cond.wait()
            if not self._queue:
                return None  # closed and drained
            deadline = time.monotonic() + self._window
            while self._queued_texts < self._max_batch and not self._closed:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                self._cond.wait(remaining)
            batch: list[_Request] = []
            n = 0
            while self._queue and (not batch or n + len(self._queue[0].texts) <= self._max_batch):
                req = self._queue.popleft()
                batch.append(req)
                n += len(req.texts)
            self._queued_texts -= n
            return batch

    def _run(self) -> None:
        while True:
            batch = self._take()
            if batch is None:
                return
            unique: dict[str, int] = {}
            for req in batch:
                for t in req.texts:
                    unique.setdefault(t, len(unique))
            try:
                mat = self._fn(list(unique))
                for req in batch:
                    req.result = mat[[unique[t] for t in req.texts]]
            except BaseException as exc:  # noqa: BLE001 - handed to every waiting caller
                for req in batch:
                    req.error = exc
            finally:
                for req in batch:
                    req.done.set()

    def close(self, timeout: float = 5.0) -> None:
        """Finish queued requests, then stop the thread (waits up to ``timeout`` seconds)."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        if self._thread is not threading.current_thread():
            self._thread.join(timeout)
