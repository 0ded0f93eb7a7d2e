"""``memoryos chat``: talk with the memory from a terminal or a pipe, one reply per line
of input; lines starting with ``/`` are commands to this program, never stored."""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Iterator

from ..stopping import StopRequested, StopSignals
from ._common import config_from_args, data_dir, lib_user, plain
from ._common import console as make_console
from ._stop import open_until_stopped

__all__ = ["chat"]


def chat(args: argparse.Namespace) -> int:
    """``memoryos chat``: one reply per line of input, until EOF, ``/quit`` or a stop signal.

    SIGTERM or SIGINT while waiting for input stops at once; while a reply is being made,
    the reply is finished, printed and stored first (a second signal, or
    ``--shutdown-timeout`` seconds, gives up waiting for it). Then the memory system is
    closed. Exit code 0, or 130 after SIGINT.
    """
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
            finished, reply = stop.call(mem.chat_reply, user, text, assistant_id=assistant)
            if not finished:
                console.print(
                    "stopped without the reply in flight; it may or may not be stored",
                    style="yellow",
                )
                break
            assert reply is not None  # finished: the call returned its value
            if reply.degraded:
                print(
                    f"memoryos: degraded reply from the offline fallback: {reply.reason}",
                    file=sys.stderr,
                    flush=True,
                )
            console.print(plain(f"assistant: {reply.text}"))
    return stop.exit_code(sigint=130)


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
