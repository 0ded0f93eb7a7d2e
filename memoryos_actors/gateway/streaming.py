"""A completion streamed from the gateway's event loop to a caller's thread.

:class:`CompletionStream` is what :meth:`GatewayService.stream
<memoryos_actors.gateway.service.GatewayService.stream>` returns: an iterator of text
pieces that the loop hands over as the provider writes them, ending with the whole
:class:`~memoryos_actors.gateway.base.Completion` (or an error). An answer that comes whole
(the offline backend, the cache) is cut into pieces by
:func:`~memoryos_actors.chat_streams.text_pieces`.
"""

from __future__ import annotations

import concurrent.futures
import queue
from collections.abc import Iterator
from typing import Any

from memoryos_actors.chat_streams import text_pieces
from memoryos_actors.errors import SystemClosed
from memoryos_actors.gateway.base import Completion

__all__ = ["CompletionStream", "text_pieces"]


class CompletionStream(Iterator[str]):
    """The pieces of one streamed completion, in order, for one consumer thread.

    Iterating blocks until the next piece arrives; the iteration ends when the answer is
    whole, and :attr:`completion` holds it then (its ``data`` holds the text, checked).
    A failure raises from the iteration (pieces given out before it stay given out).
    :meth:`close` abandons the stream: the provider request is cancelled, and the
    iteration ends with no :attr:`completion`.
    """

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[tuple[str, Any]] = queue.SimpleQueue()
        self._future: concurrent.futures.Future[Any] | None = None
        self._ended = False
        #: The whole answer, once the iteration has ended without an error.
        self.completion: Completion | None = None

    # -- the loop's side ----------------------------------------------------------------------

    def attach(self, future: concurrent.futures.Future[Any]) -> None:
        """The future of the coroutine that feeds this stream (cancelled by :meth:`close`)."""
        self._future = future
        future.add_done_callback(self._fed_out)

    def piece(self, text: str) -> None:
        """Hand over the next piece."""
        self._queue.put(("piece", text))

    def end(self, completion: Completion) -> None:
        """The answer is whole."""
        self._queue.put(("end", completion))

    def fail(self, exc: BaseException) -> None:
        """The stream failed with ``exc`` (raised to the consumer)."""
        self._queue.put(("error", exc))

    def _fed_out(self, future: concurrent.futures.Future[Any]) -> None:
        # The feeder ends by end() or fail(); one that was cancelled (the gateway closed)
        # or crashed says so here, so the consumer never waits forever. After an end,
        # this item is never read.
        if future.cancelled():
            self.fail(SystemClosed("the gateway closed before the stream ended"))
        elif future.exception() is not None:
            self.fail(future.exception())  # type: ignore[arg-type]

    # -- the consumer's side ------------------------------------------------------------------

    def __iter__(self) -> CompletionStream:
        return self

    def __next__(self) -> str:
        if self._ended:
            raise StopIteration
        tag, value = self._queue.get()
        if tag == "piece":
            return str(value)
        self._ended = True
        if tag == "abandoned":  # closed from another thread while this one waited
            raise StopIteration
        if tag == "end":
            self.completion = value
            raise StopIteration
        raise value

    def close(self) -> None:
        """Abandon the stream (no-op once it ended): the provider request is cancelled.

        Thread-safe and never blocks: a consumer waiting for a piece in another thread
        sees the iteration end (with no :attr:`completion`)."""
        if not self._ended:
            self._ended = True
            self._queue.put(("abandoned", None))
            if self._future is not None:
                self._future.cancel()
