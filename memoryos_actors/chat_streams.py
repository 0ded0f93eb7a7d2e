"""What ``chat_stream`` returns: the reply's text as it is written, then the reply.

:class:`ChatStream` (the synchronous facades) is an iterator of text pieces;
:class:`AsyncChatStream` (:class:`~memoryos_actors.AsyncMemoryOS`) the same as an async
iterator. Both end once the turn is stored; :attr:`ChatStream.reply` then says how the
reply was made (a :class:`~memoryos_actors.reports.ChatReply`). The contract is
:meth:`MemoryAPI.chat_stream <memoryos_actors.api.MemoryAPI.chat_stream>`'s.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Awaitable, Callable, Generator, Iterator
from typing import Any

from .reports import ChatReply

__all__ = ["AsyncChatStream", "ChatStream", "text_pieces"]

_PIECE_RE = re.compile(r"\s*\S+(?:\s+\S+){0,3}")


def text_pieces(text: str) -> list[str]:
    """``text`` in pieces of up to four words (each with the spaces before it), which
    join back into ``text`` exactly: how a reply that came whole is given out."""
    pieces = _PIECE_RE.findall(text)
    rest = text[sum(map(len, pieces)) :]
    if rest:
        pieces.append(rest)
    return pieces


#: What an :class:`AsyncChatStream` runs a blocking call with (off the event loop).
Runner = Callable[[Callable[[], Any]], Awaitable[Any]]


class ChatStream(Iterator[str]):
    """The pieces of one chat reply, in order, as the provider writes them.

    Iterate it (``for piece in stream``) in one thread at a time. The iteration ends when
    the reply is whole and its turn is stored; :attr:`reply` holds the
    :class:`~memoryos_actors.reports.ChatReply` then. An error raises from the iteration
    and stores nothing. :meth:`close` (or leaving a ``with`` block, or dropping the
    stream) before the end abandons it: the provider's request is closed and nothing is
    stored.
    """

    def __init__(
        self,
        pieces: Generator[str, None, ChatReply | None],
        abandon: Callable[[], None] | None = None,
    ) -> None:
        """``pieces``: a generator that yields the pieces and returns the reply once it
        has stored the turn (None when it was abandoned). ``abandon()``: stops the making
        of the pieces from any thread, without blocking (a thread waiting for the next
        piece then sees the generator end)."""
        self._pieces = pieces
        self._abandon = abandon
        self._ended = False
        #: The reply, once the iteration has ended (None before, or after an error).
        self.reply: ChatReply | None = None

    def __iter__(self) -> ChatStream:
        return self

    def __next__(self) -> str:
        if self._ended:
            raise StopIteration
        try:
            return next(self._pieces)
        except StopIteration as done:
            self._ended = True
            self.reply = done.value
            raise StopIteration from None
        except BaseException:
            self._ended = True
            raise

    def next_or_none(self) -> str | None:
        """The next piece, or None at the end (for a caller that cannot take
        ``StopIteration``, such as a future)."""
        try:
            return next(self)
        except StopIteration:
            return None

    def close(self) -> None:
        """Abandon the stream (no-op once it ended): the provider's request is closed, and
        nothing is stored. Never blocks; may be called from another thread than the one
        iterating (whose wait for the next piece then ends the iteration)."""
        self._ended = True
        if self._abandon is not None:
            self._abandon()
        try:
            self._pieces.close()
        except ValueError:
            pass  # being iterated in another thread right now: abandon() ends that

    def __enter__(self) -> ChatStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncChatStream(AsyncIterator[str]):
    """:class:`ChatStream` as an async iterator: ``async for piece in stream``.

    Each piece is waited for off the event loop (``run`` runs the blocking wait on a
    thread pool). :meth:`aclose` (or leaving an ``async with`` block) abandons the stream
    as :meth:`ChatStream.close` does, also while a piece is being waited for.
    """

    def __init__(self, stream: ChatStream, run: Runner) -> None:
        self._stream = stream
        self._run = run

    @property
    def reply(self) -> ChatReply | None:
        """The reply, once the iteration has ended (None before, or after an error)."""
        return self._stream.reply

    def __aiter__(self) -> AsyncChatStream:
        return self

    async def __anext__(self) -> str:
        piece = await self._run(self._stream.next_or_none)
        if piece is None:
            raise StopAsyncIteration
        return str(piece)

    async def aclose(self) -> None:
        """Abandon the stream (no-op once it ended); nothing is stored. Never blocks the
        event loop (so it also runs in a task being cancelled)."""
        self._stream.close()

    async def __aenter__(self) -> AsyncChatStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
