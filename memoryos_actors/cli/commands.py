"""The ``memoryos`` commands that work on a data directory: ``chat``, ``ingest``,
``inspect``, ``stats``, ``export``, ``import`` and ``forget``.

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
    require_user,
)
from ._common import console as make_console
from .prometheus import render_prometheus
from .render import show_user, state_dict

__all__ = ["chat", "export", "forget", "import_", "ingest", "inspect", "stats"]


# -- chat ----------------------------------------------------------------------------------


def chat(args: argparse.Namespace) -> int:
    from .doctor import provider_check

    console = make_console()
    interactive = sys.stdin.isatty()
    provider_check(args, config_from_args(args))
    with open_memory(args, data_dir(args)) as mem:
        if interactive:
            backend = mem.gateway_service.stats().get("backend")
            console.print(f"chatting as {args.user!r} with memory ({backend} backend); "
                          "Ctrl-D or /quit to leave")
        for line in _input_lines(interactive):
            text = line.strip()
            if not text:
                continue
            if text in ("/quit", "/exit"):
                break
            reply = mem.chat_reply(args.user, text, assistant_id=args.assistant)
            if reply.degraded:
                print(f"memoryos: degraded reply from the offline fallback: {reply.reason}",
                      file=sys.stderr, flush=True)
            console.print(plain(f"assistant: {reply.text}"))
    return 0


def _input_lines(interactive: bool) -> Iterator[str]:
    if not interactive:
        yield from sys.stdin
        return
    while True:
        try:
            yield input("> ")
        except EOFError:
            return


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
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
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
    with open_memory(args, data_dir(args)) as mem:
        t0 = time.perf_counter()
        with Progress(TextColumn("ingesting"), BarColumn(), MofNCompleteColumn(),
                      TextColumn("turns"), TimeElapsedColumn(), console=console,
                      transient=True, disable=not console.is_terminal) as progress:
            task = progress.add_task("ingest", total=len(turns))
            for turn in turns:
                try:
                    mem.add_turn(turn.user_id, turn.query, turn.response,
                                 timestamp=turn.timestamp)
                except InvalidInput as exc:
                    raise InvalidInput(f"{turn.where}: {exc}") from None
                per_user[turn.user_id] = per_user.get(turn.user_id, 0) + 1
                progress.advance(task)
        stored_s = time.perf_counter() - t0
        console.print("placing pages into segments and summarising…")
        mem.flush()
        total_s = time.perf_counter() - t0
    table = Table("user", "turns ingested", title=f"{path.name} ({fmt})", title_justify="left")
    for user, count in sorted(per_user.items()):
        table.add_row(plain(user), str(count))
    console.print(table)
    console.print(
        f"ingested {len(turns)} turns for {len(per_user)} users: stored in {stored_s:.2f} s "
        f"({len(turns) / max(stored_s, 1e-9):.0f} turns/s), settled in {total_s:.2f} s"
    )
    return 0


# -- inspect -------------------------------------------------------------------------------


def inspect(args: argparse.Namespace) -> int:
    console = make_console()
    with open_memory(args, existing_data_dir(args)) as mem:
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
    with open_memory(args, existing_data_dir(args)) as mem:
        if args.user:
            require_user(mem, args.user)
            st = mem.stats(args.user)
        else:
            stored = {"users": 0, "turns": 0, "stm_pages": 0, "mtm_segments": 0,
                      "mtm_pages": 0, "kb_facts": 0, "traits_set": 0, "archived_records": 0}
            for user in mem.users():
                per = mem.stats(user)
                stored["users"] += 1
                for key in stored:
                    if key != "users":
                        stored[key] += int(per.get(key, 0))
            st = mem.stats()
            st["stored"] = stored
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
    with open_memory(args, existing_data_dir(args)) as mem:
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


def rebalance(args: argparse.Namespace) -> int:
    from ..cluster import rebalance_shards

    report = rebalance_shards(existing_data_dir(args), args.shards)
    print(f"{report.shards_before} -> {report.shards_after} shards: moved "
          f"{len(report.moved)} users, removed {len(report.removed_dirs)} empty shards")
    for user, (src, dst) in sorted(report.moved.items()):
        print(f"  {user}: {'unsharded' if src < 0 else f'shard {src}'} -> shard {dst}")
    return 0
