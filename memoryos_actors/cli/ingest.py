"""``memoryos ingest``: store every turn of a JSONL turns file or a LoCoMo file, each once
(a turn key per record, derived when the record has none), then let the background work
settle."""

from __future__ import annotations

import argparse
import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..stopping import StopSignals
from ._common import config_from_args, data_dir, lib_user, plain, server_url, shown_user
from ._common import console as make_console
from ._stop import open_until_stopped

__all__ = ["ingest"]


@dataclass(frozen=True, slots=True)
class _Turn:
    user_id: str
    query: str
    response: str
    timestamp: float | None
    where: str  # "path:line" or "path: sample page" for error messages
    turn_key: str


def _derived_key(
    source: str, user_id: str, position: int, query: str, response: str, timestamp: float | None
) -> str:
    """The turn key of a record without one: its source's name, its position among the
    source's turns of that user, and its content. Re-reading the same file (whole, or
    after a stop) gives the same keys, so each turn is stored once; the same words said
    again later in the file are another turn (another position)."""
    import hashlib

    h = hashlib.blake2b(digest_size=16)
    for part in (source, user_id, str(position), query, response, repr(timestamp)):
        h.update(part.encode("utf-8", "surrogatepass"))
        h.update(b"\x1f")
    return "ingest:" + h.hexdigest()


def _detect_format(path: Path, requested: str) -> str:
    if not path.is_file():
        from ..datasets import DatasetError

        raise DatasetError(f"{path}: no such file")
    if requested != "auto":
        return requested
    if path.suffix.lower() in (".jsonl", ".ndjson"):
        return "jsonl"
    try:
        with path.open("rb") as fh:
            head = fh.read(4096).lstrip(b"\xef\xbb\xbf \t\r\n")
    except OSError as exc:
        from ..datasets import DatasetError

        raise DatasetError(f"{path}: cannot read: {exc}") from exc
    # A LoCoMo file is one JSON list; a turns file has one object per line.
    return "locomo" if head.startswith(b"[") else "jsonl"


def _load_turns(
    path: Path, fmt: str, limit: int | None, map_user: Callable[[str], str]
) -> list[_Turn]:
    """Read and validate every turn of ``path`` before anything is stored; ``map_user``
    gives the library id of a record's user (the tenant's mapping)."""
    positions: dict[str, int] = {}

    def position(user: str) -> int:
        positions[user] = positions.get(user, 0) + 1
        return positions[user]

    if fmt == "jsonl":
        from ..datasets.turns import read_turns

        turns = []
        for t in read_turns(path):  # every line is checked, also beyond --limit
            where = f"{path}:{t.line}"
            key = t.turn_key or _derived_key(
                path.name, t.user_id, position(t.user_id), t.query, t.response, t.timestamp
            )
            turns.append(
                _Turn(
                    _mapped(map_user, t.user_id, where),
                    t.query,
                    t.response,
                    t.timestamp,
                    where,
                    key,
                )
            )
        return turns if limit is None else turns[:limit]
    from ..datasets.locomo import load_locomo

    return [
        _Turn(
            _mapped(map_user, conv.sample_id, f"{path}: {conv.sample_id}"),
            page.query,
            page.response,
            page.timestamp,
            f"{path}: {conv.sample_id} page {page.index}",
            _derived_key(
                path.name, conv.sample_id, page.index, page.query, page.response, page.timestamp
            ),
        )
        for conv in load_locomo(path, limit)
        for page in conv.pages
        if page.query or page.response
    ]


def _writable_user(args: argparse.Namespace, user: str) -> str:
    """The library id of a record's user, refused (before anything is stored) when no
    memory may be written under it (see :func:`~memoryos_actors.validation.check_new_id`)."""
    from ..validation import check_new_id, check_user_id

    return check_new_id(check_user_id(lib_user(args, user)))


def _mapped(map_user: Callable[[str], str], user: str, where: str) -> str:
    """``map_user(user)``, its refusal naming the record."""
    from ..errors import InvalidInput

    try:
        return map_user(user)
    except InvalidInput as exc:
        raise InvalidInput(f"{where}: {exc}") from None


def ingest(args: argparse.Namespace) -> int:
    """``memoryos ingest``: store every turn of a file, then let the background work settle.

    SIGTERM or SIGINT finishes the turn being stored, starts no other, closes the memory
    system and says how many turns were stored and which is the first one that was not.
    Exit code 0, or 130 after SIGINT.
    """
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TaskID,
        TextColumn,
        TimeElapsedColumn,
    )
    from rich.table import Table

    from ..errors import InvalidInput

    console = make_console()
    path = Path(args.file)
    fmt = _detect_format(path, args.format)
    if getattr(args, "server", None):
        return _ingest_through_server(args, path, fmt)
    turns = _load_turns(path, fmt, args.limit, lambda u: _writable_user(args, u))
    if not turns:
        from ..datasets import DatasetError

        raise DatasetError(f"{path}: no turns to ingest")
    cfg = config_from_args(args)
    for turn in turns:
        # The size limit is the one add_turn would hit mid-way; checking it here keeps a
        # refused file from being half ingested.
        for what, text in (("query", turn.query), ("response", turn.response)):
            size = len(text.encode("utf-8", "surrogatepass"))
            if size > cfg.max_text_bytes:
                raise InvalidInput(
                    f"{turn.where}: {what} is {size} bytes; the limit is "
                    f"{cfg.max_text_bytes} (max_text_bytes)"
                )
    per_user: dict[str, int] = {}
    stored = 0  # turns stored so far, in file order
    # Without a terminal (a service, a pipe) no bar is drawn: a line on stderr every 5%
    # tells a log, or whoever waits on the ingest, how far it is.
    every = 0 if console.is_terminal else max(1, len(turns) // 20)
    err = make_console(stderr=True)

    def store_turns(progress: Progress, task: TaskID, stop: StopSignals) -> None:
        nonlocal stored
        for turn in turns:
            if stop.requested:
                return  # the turn in flight is finished; no new one is started
            try:
                # The key makes a re-run (or a run after a stop) store each turn once.
                mem.add_turn(
                    turn.user_id,
                    turn.query,
                    turn.response,
                    timestamp=turn.timestamp,
                    turn_key=turn.turn_key,
                )
            except InvalidInput as exc:
                raise InvalidInput(f"{turn.where}: {exc}") from None
            shown = shown_user(args, turn.user_id)
            per_user[shown] = per_user.get(shown, 0) + 1
            stored += 1
            progress.advance(task)
            if every and stored % every == 0:
                err.print(f"memoryos: ingest: {stored} of {len(turns)} turns stored")

    with StopSignals(
        "finishing the turn in flight, then closing the memory system",
        shutdown_timeout=args.shutdown_timeout,
    ) as stop:
        with (
            _held_by_server_says_how(args, path),
            open_until_stopped(args, data_dir(args), stop) as mem,
        ):
            users = sorted({t.user_id for t in turns})
            before = _turn_counts(mem, users)
            t0 = time.perf_counter()
            with Progress(
                TextColumn("ingesting"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("turns"),
                TimeElapsedColumn(),
                console=console,
                transient=True,
                disable=not console.is_terminal,
            ) as progress:
                task = progress.add_task("ingest", total=len(turns))
                stop.call(store_turns, progress, task, stop)
            stored_s = time.perf_counter() - t0
            if not stop.requested:
                console.print("placing pages into segments and summarising…")
                # A stop during this wait goes straight to closing, which waits for the
                # same work within --shutdown-timeout.
                stop.call(mem.flush, give_up_at=1)
            total_s = time.perf_counter() - t0
            done, after = stop.call(_turn_counts, mem, users)
            new = sum(after[u] - before[u] for u in users) if done and after else None
        if stop.requested:
            nxt = (
                f"; the first turn not stored is {turns[stored].where}"
                if stored < len(turns)
                else ""
            )
            err.print(
                plain(
                    f"memoryos: ingest stopped by {stop.name}: {stored} of "
                    f"{len(turns)} turns stored{nxt}; run the same command again "
                    "to store the rest (no turn is stored twice)"
                ),
                soft_wrap=True,
            )
    table = Table("user", "turns ingested", title=f"{path.name} ({fmt})", title_justify="left")
    for user, count in sorted(per_user.items()):
        table.add_row(plain(user), str(count))
    console.print(table)
    if stop.requested:
        return stop.exit_code(sigint=130)
    console.print(
        f"ingested {len(turns)} turns for {len(per_user)} users: stored in {stored_s:.2f} s "
        f"({len(turns) / max(stored_s, 1e-9):.0f} turns/s), settled in {total_s:.2f} s"
    )
    if new is not None and new < len(turns):
        console.print(
            f"{new} turns were new; {len(turns) - new} were stored before (same "
            "turn_key) and were not stored again"
        )
    return 0


@contextlib.contextmanager
def _held_by_server_says_how(args: argparse.Namespace, path: Path) -> Iterator[None]:
    """A data directory a server holds is refused saying how to ingest through it."""
    from ..errors import DataDirLocked

    try:
        yield
    except DataDirLocked as exc:
        url = server_url(data_dir(args))
        if url is None:
            raise
        raise DataDirLocked(
            f"{exc}; to ingest into it while it runs, send the file through the server: "
            f"memoryos ingest {path} --server {url} --key KEY (a key of the tenant whose "
            "users the file names: memoryos keys add --tenant NAME)"
        ) from None


def _ingest_through_server(args: argparse.Namespace, path: Path, fmt: str) -> int:
    """``ingest --server``: every turn of ``path`` through the server's batch route (see
    :mod:`.ingest_remote`); a stop signal finishes the batch in flight and starts no other."""
    from rich.table import Table

    from ..server.tenancy import check_external_id
    from ._common import tenant
    from .ingest_remote import RemoteIngest, batches, check_remote_args

    check_remote_args(tenant(args))
    client = RemoteIngest(args.server, _api_key(args.key))
    turns = _load_turns(path, fmt, args.limit, check_external_id)
    if not turns:
        from ..datasets import DatasetError

        raise DatasetError(f"{path}: no turns to ingest")
    console = make_console()
    err = make_console(stderr=True)
    per_user: dict[str, int] = {}
    stored = 0
    t0 = time.perf_counter()
    with StopSignals(
        "finishing the batch in flight", shutdown_timeout=args.shutdown_timeout
    ) as stop:
        for batch in batches(turns):
            if stop.requested:
                break
            client.send(batch)
            per_user[batch[0].user_id] = per_user.get(batch[0].user_id, 0) + len(batch)
            stored += len(batch)
            err.print(f"memoryos: ingest: {stored} of {len(turns)} turns sent to {client.url}")
    table = Table("user", "turns sent", title=f"{path.name} ({fmt})", title_justify="left")
    for user, count in sorted(per_user.items()):
        table.add_row(plain(user), str(count))
    console.print(table)
    if stop.requested:
        err.print(
            plain(
                f"memoryos: ingest stopped by {stop.name}: {stored} of {len(turns)} turns "
                "stored; run the same command again to store the rest (no turn is stored twice)"
            ),
            soft_wrap=True,
        )
        return stop.exit_code(sigint=130)
    elapsed = time.perf_counter() - t0
    console.print(
        f"sent {len(turns)} turns for {len(per_user)} users to {client.url} in {elapsed:.2f} s; "
        "turns the server had already (same turn_key) were not stored again"
    )
    return 0


def _api_key(given: str | None) -> str:
    """``--key``, or the first line of standard input for ``--key -``."""
    import sys

    if given == "-":
        return sys.stdin.readline().strip()
    return given or ""


def _turn_counts(mem: Any, users: list[str]) -> dict[str, int]:
    """How many turns each user has (0 for a user with no data yet)."""
    from ..errors import UnknownUser

    counts = {}
    for user in users:
        try:
            counts[user] = mem.user_state(user).turns
        except UnknownUser:
            counts[user] = 0
    return counts
