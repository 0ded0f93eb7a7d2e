"""The command line's side of stopping on SIGTERM and SIGINT (see
:mod:`memoryos_actors.stopping`): the ``--shutdown-timeout`` option, and a memory system
that is closed on the way out whatever signals arrive."""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from ..stopping import DEFAULT_SHUTDOWN_TIMEOUT_S, StopSignals

if TYPE_CHECKING:
    from ..system import MemoryOS

__all__ = ["add_shutdown_timeout", "open_until_stopped", "positive_seconds"]


def positive_seconds(text: str) -> float:
    """An option's value in seconds: a finite number above 0 (argparse ``type``)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, not {text}")
    return value


def add_shutdown_timeout(parser: argparse.ArgumentParser, what: str) -> None:
    """Add ``--shutdown-timeout SECONDS`` to ``parser``; ``what`` names the work in flight
    that a stop waits for."""
    parser.add_argument(
        "--shutdown-timeout",
        type=positive_seconds,
        default=DEFAULT_SHUTDOWN_TIMEOUT_S,
        metavar="SECONDS",
        help=f"on SIGTERM/SIGINT, wait at most this long for {what} to finish, and as long "
        "again for closing the memory system (snapshots, WAL sync, background LLM "
        f"work) (default {DEFAULT_SHUTDOWN_TIMEOUT_S:g})",
    )


@contextlib.contextmanager
def open_until_stopped(
    args: argparse.Namespace, path: Any, stop: StopSignals
) -> Iterator[MemoryOS]:
    """The memory system over ``path`` (see :func:`~._common.open_memory`), closed on the
    way out within ``args.shutdown_timeout`` seconds, whatever signals arrive meanwhile."""
    from ._common import open_memory

    mem = open_memory(args, path)
    try:
        yield mem
    finally:
        stop.closing()
        mem.close(timeout=args.shutdown_timeout)
