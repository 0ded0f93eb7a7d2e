"""``memoryos chat``: talk with the memory from a terminal or a pipe, one reply per line
of input; lines starting with ``/`` are commands to this program, never stored."""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING

from ..stopping import StopRequested, StopSignals
from ._common import config_from_args, data_dir, lib_user, plain
from ._common import console as make_console
from ._stop import open_until_stopped

if TYPE_CHECKING:
    from ..chat_streams import ChatStream
    from ..reports import ChatReply

__all__ = ["chat"]


def chat(args: argparse.Namespace) -> int:
    """``memoryos chat``: one reply per line of input, until EOF, ``/quit`` or a stop signal.

    Each reply is printed after ``assistant: `` as the provider writes it
    (``chat_stream``). SIGTERM or SIGINT while waiting for input stops at once; while a
    reply is being made, the reply is finished, printed and stored first (a second signal,
    or ``--shutdown-timeout`` seconds, gives up waiting for it: the reply is abandoned, not
    stored). Then the memory system is closed. Exit code 0, or 130 after SIGINT.
    """
    # Each degraded reply gets its line below; the library's log event would repeat it.
    from ..logs import reported_elsewhere

    with reported_elsewhere("chat.degraded"):
        return _chat(args)


def _chat(args: argparse.Namespace) -> int:
    from .doctor import provider_check

    console = make_console()
    interactive = sys.stdin.isatty()
    user = lib_user(args, args.user)
    assistant = lib_user(args, args.assistant)  # assistants are per tenant, like users
    provider_check(args, config_from_args(args))
    with (
        StopSignals(
            "finishing the reply in flight, then closing the memory system",
            shutdown_timeout=args.shutdown_timeout,
        ) as stop,
        open_until_stopped(args, data_dir(args), stop) as mem,
    ):
        if interactive:
            # A sharded directory's facade has a gateway per shard, not one to ask.
            gateway = getattr(mem, "gateway_service", None)
            backend = gateway.stats().get("backend") if gateway is not None else "sharded"
            console.print(
                f"chatting as {args.user!r} with memory ({backend} backend); "
                "Ctrl-D or /quit to leave"
            )
        for line in _input_lines(interactive, stop):
            text = line.strip()
            if not text:
                continue
            command = _SLASH_COMMAND.match(text)
            if command is not None:
                # Commands talk to this program, not to the assistant: never stored.
                name = command.group(1)
                if name in ("quit", "exit"):
                    break
                if name == "help":
                    console.print(_CHAT_HELP)
                else:
                    console.print(
                        plain(f"unknown command /{name}; /help lists them"), style="yellow"
                    )
                continue
            if text.startswith("//"):
                text = text[1:]  # "//x" sends "/x" as text
            stream = mem.chat_stream(user, text, assistant_id=assistant)
            finished, reply = stop.call(_say, stream)
            if not finished:
                stream.close()  # abandoned: not stored (a sharded one may still be)
                console.print(
                    "\nstopped without the reply in flight; it may or may not be stored",
                    style="yellow",
                )
                break
            assert reply is not None  # finished: the stream ended, the turn is stored
            if reply.degraded:
                print(
                    f"memoryos: degraded reply from the offline fallback: {reply.reason}",
                    file=sys.stderr,
                    flush=True,
                )
    return stop.exit_code(sigint=130)


def _say(stream: ChatStream) -> ChatReply | None:
    """Print ``assistant: `` and the reply's pieces as they come, then a new line; the
    reply once the stream ended (its turn stored)."""
    out = sys.stdout
    first = next(stream, "")  # an error before the reply began: nothing printed
    out.write(f"assistant: {first}")
    out.flush()
    try:
        for piece in stream:
            out.write(piece)
            out.flush()
    finally:
        out.write("\n")
        out.flush()
    return stream.reply


_SLASH_COMMAND = re.compile(r"^/([A-Za-z][\w-]*)(?:\s|$)")
_CHAT_HELP = (
    "/help  this list\n/quit  leave (also /exit or Ctrl-D)\n"
    "A line starting with // is sent as text starting with /. "
    "Commands are never stored."
)


def _input_lines(interactive: bool, stop: StopSignals) -> Iterator[str]:
    """Lines of stdin until EOF or a stop signal (which ends a read in progress)."""
    while not stop.requested:
        try:
            with stop.interruptible():
                line = input("> ") if interactive else sys.stdin.readline()
        except (EOFError, StopRequested):
            return
        if not line and not interactive:
            return  # EOF
        yield line
