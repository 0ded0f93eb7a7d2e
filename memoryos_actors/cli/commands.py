"""The ``memoryos`` commands that work on a data directory: ``chat``, ``ingest``,
``inspect``, ``stats``, ``export``, ``import``, ``forget`` and ``repair``.

The read commands (``inspect``, ``stats``, ``export``) open the data directory read-only:
they take no lock and never change a file in it.

Each takes the parsed command line and returns the exit code; expected failures raise a
:class:`~memoryos_actors.errors.MemoryOSError` or :class:`UsageError`, which the entry point
turns into a one-line message and exit code 2.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ._common import (
    config_from_args,
    data_dir,
    existing_data_dir,
    open_memory,
    plain,
    quiet_logging,
    require_user,
)
from ._common import console as make_console
from ._stop import StopRequested, StopSignals, open_until_stopped
from .prometheus import render_prometheus
from .render import show_user, state_dict

__all__ = ["chat", "export", "forget", "import_", "ingest", "inspect", "repair", "stats"]


# -- chat ----------------------------------------------------------------------------------


def chat(args: argparse.Namespace) -> int:
    """``memoryos chat``: one reply per line of input, until EOF, ``/quit`` or a stop signal.

    SIGTERM or SIGINT while waiting for input stops at once; while a reply is being made,
    the reply is finished, printed and stored first (a second signal, or
    ``--shutdown-timeout`` seconds, gives up waiting for it). Then the memory system is
    closed. Exit code 0, or 130 after SIGINT.
    """
    console = make_console()
    interactive = sys.stdin.isatty()
    with StopSignals("finishing the reply in flight, then closing the memory system",
                     shutdown_timeout=args.shutdown_timeout) as stop, \
            open_until_stopped(args, data_dir(args), stop) as mem:
        if interactive:
            backend = mem.gateway_service.stats().get("backend")
            console.print(f"chatting as {args.user!r} with memory ({backend} backend); "
                          "Ctrl-D or /quit to leave")
        for line in _input_lines(interactive, stop):
            text = line.strip()
            if not text:
                continue
            if text in ("/quit", "/exit"):
                break
            finished, reply = stop.call(mem.chat, args.user, text, assistant_id=args.assistant)
            if not finished:
                console.print("stopped without the reply in flight; it may or may not be "
                              "stored", style="yellow")
                break
            console.print(plain(f"assistant: {reply}"))
    return stop.exit_code(sigint=130)


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


# -- ingest --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Turn:
    user_id: str
    query: str
    response: str
    timestamp: float | None
    where: str  # "path:line" or "path: sample page" for error messages


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


def _load_turns(path: Path, fmt: str, limit: int | None) -> list[_Turn]:
    """Read and validate every turn of ``path`` before anything is stored."""
    if fmt == "jsonl":
        from ..datasets.turns import read_turns

        turns = [_Turn(t.user_id, t.query, t.response, t.timestamp, f"{path}:{t.line}")
                 for t in read_turns(path)]
        return turns if limit is None else turns[:limit]
    from ..datasets.locomo import load_locomo

    return [
        _Turn(conv.sample_id, page.query, page.response, page.timestamp,
              f"{path}: {conv.sample_id} page {page.index}")
        for conv in load_locomo(path, limit)
        for page in conv.pages
        if page.query or page.response
    ]


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
    turns = _load_turns(path, fmt, args.limit)
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
                raise InvalidInput(f"{turn.where}: {what} is {size} bytes; the limit is "
                                   f"{cfg.max_text_bytes} (max_text_bytes)")
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
                mem.add_turn(turn.user_id, turn.query, turn.response, timestamp=turn.timestamp)
            except InvalidInput as exc:
                raise InvalidInput(f"{turn.where}: {exc}") from None
            per_user[turn.user_id] = per_user.get(turn.user_id, 0) + 1
            stored += 1
            progress.advance(task)
            if every and stored % every == 0:
                err.print(f"memoryos: ingest: {stored} of {len(turns)} turns stored")

    with StopSignals("finishing the turn in flight, then closing the memory system",
                     shutdown_timeout=args.shutdown_timeout) as stop:
        with open_until_stopped(args, data_dir(args), stop) as mem:
            t0 = time.perf_counter()
            with Progress(TextColumn("ingesting"), BarColumn(), MofNCompleteColumn(),
                          TextColumn("turns"), TimeElapsedColumn(), console=console,
                          transient=True, disable=not console.is_terminal) as progress:
                task = progress.add_task("ingest", total=len(turns))
                stop.call(store_turns, progress, task, stop)
            stored_s = time.perf_counter() - t0
            if not stop.requested:
                console.print("placing pages into segments and summarising…")
                # A stop during this wait goes straight to closing, which waits for the
                # same work within --shutdown-timeout.
                stop.call(mem.flush, give_up_at=1)
            total_s = time.perf_counter() - t0
        if stop.requested:
            nxt = f"; the first turn not stored is {turns[stored].where}" \
                if stored < len(turns) else ""
            err.print(plain(f"memoryos: ingest stopped by {stop.name}: {stored} of "
                            f"{len(turns)} turns stored{nxt}"), soft_wrap=True)
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
    return 0


# -- inspect -------------------------------------------------------------------------------


def inspect(args: argparse.Namespace) -> int:
    console = make_console()
    with open_memory(args, existing_data_dir(args), read_only=True) as mem:
        require_user(mem, args.user)
        state = mem.user_state(args.user)
        if args.json:
            print(json.dumps(state_dict(state), indent=2, default=str))
            return 0
        show_user(console, state, max_segments=None if args.all else 10,
                   show_pages=args.pages, max_stm=None)
        archived = len(mem.archive(args.user))
        if archived:
            console.print(f"archive: {archived} records evicted from MTM (kept on disk)")
    return 0


# -- stats ---------------------------------------------------------------------------------


def stats(args: argparse.Namespace) -> int:
    from ..errors import CorruptDataError
    from ..store.userstore import list_users

    with open_memory(args, existing_data_dir(args), read_only=True) as mem:
        if args.user:
            require_user(mem, args.user)
            st = mem.stats(args.user)
        else:
            stored = {"users": 0, "turns": 0, "stm_pages": 0, "mtm_segments": 0,
                      "mtm_pages": 0, "kb_facts": 0, "traits_set": 0, "archived_records": 0}
            # One user's damage stays that user's: it is listed, the others are counted.
            damaged: dict[str, str] = {}
            names = list_users(mem.data_dir, damaged=damaged)
            users = set(mem.users())  # without the shared assistant personas
            for user in (u for u in names if u in users):
                try:
                    per = mem.stats(user)
                except CorruptDataError as exc:
                    damaged[user] = str(exc)
                    continue
                stored["users"] += 1
                for key in stored:
                    if key != "users":
                        stored[key] += int(per.get(key, 0))
            st = mem.stats()
            st["stored"] = stored
            st["damaged"] = {**st.get("damaged", {}), **dict(sorted(damaged.items()))}
            st["damaged_users"] = len(st["damaged"])
            st["tree_restarts"] = _tree_restarts(mem.tree())
    if args.prometheus:
        sys.stdout.write(render_prometheus(st))
    else:
        print(json.dumps(st, indent=2, default=str))
    return 0


def _tree_restarts(tree: str) -> int:
    """Sum of ``restarts=N`` over every child in ``MemoryOS.tree()`` text."""
    return sum(int(n) for n in re.findall(r"restarts=(\d+)", tree))

# -- export / import / forget ----------------------------------------------------------------


def export(args: argparse.Namespace) -> int:
    with open_memory(args, existing_data_dir(args), read_only=True) as mem:
        require_user(mem, args.user)
        out = mem.export_user(args.user, args.file)
        turns = mem.user_state(args.user).turns
    print(f"exported {args.user!r} ({turns} turns) to {out}")
    return 0


def import_(args: argparse.Namespace) -> int:
    from ..datasets import DatasetError

    if not Path(args.file).is_file():
        raise DatasetError(f"{args.file}: no such file")
    with open_memory(args, data_dir(args)) as mem:
        uid = mem.import_user(args.file, user_id=args.as_user)
        turns = mem.user_state(uid).turns
    print(f"imported {args.file} as user {uid!r} ({turns} turns)")
    return 0


def forget(args: argparse.Namespace) -> int:
    with open_memory(args, existing_data_dir(args)) as mem:
        require_user(mem, args.user)
        report = mem.forget_user(args.user)
    print(f"forgot {args.user!r}: removed {len(report.removed_files)} files")
    for path in report.removed_files:
        print(f"  {path}")
    return 0


def repair(args: argparse.Namespace) -> int:
    from ..repair import repair_user
    from ..store.lock import DataDirLock

    path = existing_data_dir(args)
    quiet_logging(config_from_args(args))  # a bad config fails here as in every command
    # The lock: no server or other command may have the directory open meanwhile.
    with DataDirLock(path):
        report = repair_user(path, args.user)
    if not report.changed:
        print(f"{args.user!r}: nothing to repair")
        return 0
    print(f"repaired {args.user!r}: kept {report.kept_records} intact records, lost "
          f"{report.lost_records}; the WAL holds {report.wal_turns_kept} turns")
    for note in report.notes:
        print(f"  {note}")
    for f in report.files:
        print(f"  {f.path}: {f.action}, original kept as {f.backup}")
    return 0


def rebalance(args: argparse.Namespace) -> int:
    from ..cluster import rebalance_shards

    report = rebalance_shards(existing_data_dir(args), args.shards)
    print(f"{report.shards_before} -> {report.shards_after} shards: moved "
          f"{len(report.moved)} users, removed {len(report.removed_dirs)} empty shards")
    for user, (src, dst) in sorted(report.moved.items()):
        print(f"  {user}: {'unsharded' if src < 0 else f'shard {src}'} -> shard {dst}")
    return 0
