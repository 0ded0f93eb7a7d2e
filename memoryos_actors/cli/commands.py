"""The ``memoryos`` commands that work on a data directory: ``chat``, ``ingest``,
``inspect``, ``stats``, ``export``, ``import``, ``forget`` and ``repair``.

The read commands (``inspect``, ``memories``, ``stats``, ``export``) open the data
directory read-only (``stats`` reads its files without opening it): they take no lock and
never change a file in it, so they work while a server runs. ``--tenant`` maps user ids as
the server does; a sharded data directory opens with in-process shards (``--ray``: Ray).

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
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ._common import (
    UsageError,
    config_from_args,
    data_dir,
    existing_data_dir,
    lib_user,
    open_memory,
    open_reader,
    plain,
    quiet_logging,
    require_user,
    shown_user,
)
from ._common import console as make_console
from ._stop import StopRequested, StopSignals, open_until_stopped
from .prometheus import render_prometheus
from .render import show_user, state_dict

__all__ = [
    "chat",
    "export",
    "forget",
    "import_",
    "ingest",
    "inspect",
    "memories",
    "rebalance",
    "repair",
    "stats",
]


# -- chat ----------------------------------------------------------------------------------


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


# -- ingest --------------------------------------------------------------------------------


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
    turns = _load_turns(path, fmt, args.limit, lambda u: lib_user(args, u))
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
        with open_until_stopped(args, data_dir(args), stop) as mem:
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


# -- inspect -------------------------------------------------------------------------------


def inspect(args: argparse.Namespace) -> int:
    """``memoryos inspect``: a user's tiers, read-only (works while a server runs)."""
    console = make_console()
    user = lib_user(args, args.user)
    with open_reader(args, existing_data_dir(args), user) as mem:
        require_user(mem, user, args)
        # Named as the command line names it (the tenant's id, as the server shows it).
        state = replace(mem.user_state(user), user_id=args.user)
        if args.json:
            print(json.dumps(state_dict(state), indent=2, default=str))
            return 0
        show_user(
            console,
            state,
            max_segments=None if args.all else 10,
            show_pages=args.pages,
            max_stm=None,
        )
        archived = len(mem.archive(user))
        if archived:
            console.print(f"archive: {archived} records evicted from MTM (kept on disk)")
    return 0


def memories(args: argparse.Namespace) -> int:
    """``memoryos memories``: every memory of a user with its id, read-only (works while a
    server runs); ``--kind`` keeps some kinds."""
    user = lib_user(args, args.user)
    kinds = tuple(args.kind) if args.kind else None
    with open_reader(args, existing_data_dir(args), user) as mem:
        require_user(mem, user, args)
        items = mem.memories(user, kinds)
    rows = [_memory_dict(args, m) for m in items]
    if args.json:
        print(json.dumps(rows, indent=2, default=str))
        return 0
    from ._common import one_line, when

    for row in rows:
        stamp = when(row["timestamp"] or None)  # a trait has no time (0.0)
        print(
            f"{row['memory_id']:<28} {row['tier']:<8} {stamp:<16}  {one_line(str(row['text']), 60)}"
        )
    print(
        f"{len(items)} {'memory' if len(items) == 1 else 'memories'} of {args.user!r}",
        file=sys.stderr,
    )
    return 0


def _memory_dict(args: argparse.Namespace, m: Any) -> dict[str, Any]:
    """A memory as a dict, its ids as the tenant names them (as the server lists them)."""
    from dataclasses import asdict

    from ._common import tenant

    row = asdict(m)
    t = tenant(args)
    if t is not None:
        from ..server.tenancy import external_memory_id

        row["memory_id"] = external_memory_id(t, m.memory_id)
        if m.assistant_id is not None:
            row["assistant_id"] = shown_user(args, m.assistant_id)
    return row


# -- stats ---------------------------------------------------------------------------------


def stats(args: argparse.Namespace) -> int:
    """``memoryos stats``: counters of what the data directory holds, read from its files
    without activating any user (see :mod:`~memoryos_actors.disk_stats`), with
    ``--user`` one user's. Works while a server runs, and on a sharded data directory."""
    from ..disk_stats import stored_stats, user_stored_stats
    from ._common import shard_dirs, tenant

    path = existing_data_dir(args)
    cfg = config_from_args(args)
    if args.user:
        quiet_logging(cfg)
        user = lib_user(args, args.user)
        with open_reader(args, path, user) as mem:
            require_user(mem, user, args)
            st = {"user_id": args.user, **user_stored_stats(mem.data_dir, user)}
    else:
        # Only the store may log here (damaged files): set the output up if it does.
        quiet_logging(cfg, on_first_event=True)
        t = tenant(args)
        st = {"users": 0, "stored": {}, "damaged": {}, "damaged_users": 0}
        for root in shard_dirs(path):
            users = None
            if t is not None:
                from ..server.tenancy import tenant_prefix
                from ..store.userstore import list_users

                users = [u for u in list_users(root) if u.startswith(tenant_prefix(t))]
            part = stored_stats(root, users)
            for key, value in part["stored"].items():
                st["stored"][key] = st["stored"].get(key, 0) + value
            st["damaged"].update({shown_user(args, u): e for u, e in part["damaged"].items()})
        st["users"] = st["stored"].get("users", 0)
        st["damaged"] = dict(sorted(st["damaged"].items()))
        st["damaged_users"] = len(st["damaged"])
        if t is not None:
            st["tenant"] = t
    if args.prometheus:
        sys.stdout.write(render_prometheus(st))
    else:
        print(json.dumps(st, indent=2, default=str))
    return 0


# -- export / import / forget ----------------------------------------------------------------


def export(args: argparse.Namespace) -> int:
    """``memoryos export USER FILE``: the user's export file, read-only (works while a
    server runs). An existing FILE is kept unless ``--force``; ``-`` writes JSON to stdout."""
    import shutil
    import tempfile

    user = lib_user(args, args.user)
    to_stdout = args.file == "-"
    target = Path(args.file)
    if not to_stdout and target.exists() and not args.force:
        raise UsageError(f"{target} exists; pass --force to overwrite it")
    with open_reader(args, existing_data_dir(args), user) as mem:
        require_user(mem, user, args)
        turns = mem.user_state(user).turns
        if to_stdout:
            with tempfile.TemporaryDirectory(prefix="memoryos-export-") as tmp:
                out = mem.export_user(user, Path(tmp) / "export.json")
                out = _tenant_export(args, user, out)
                with out.open("rb") as fh:
                    sys.stdout.flush()
                    shutil.copyfileobj(fh, sys.stdout.buffer)
                sys.stdout.buffer.flush()
            print(f"exported {args.user!r} ({turns} turns) to stdout", file=sys.stderr)
            return 0
        out = _tenant_export(args, user, mem.export_user(user, target))
    print(f"exported {args.user!r} ({turns} turns) to {out}")
    return 0


def _tenant_export(args: argparse.Namespace, user: str, path: Path) -> Path:
    """With a tenant, the export at ``path`` names its user by the tenant's id, as the
    server's export does (``memoryos --tenant T import`` reads either)."""
    if args.user == user:
        return path
    from ..server.tenancy import relabel_user_id
    from ..store.export import read_export, write_export

    return write_export(path, relabel_user_id(read_export(path), user, args.user))


def import_(args: argparse.Namespace) -> int:
    """``memoryos import FILE [--as USER]``: store an export file's user (under the tenant
    when one is given)."""
    from ..datasets import DatasetError
    from ._common import tenant

    if not Path(args.file).is_file():
        raise DatasetError(f"{args.file}: no such file")
    as_user = lib_user(args, args.as_user) if args.as_user else None
    t = tenant(args)
    if as_user is None and t is not None:
        from ..errors import InvalidInput
        from ..server.keys import check_tenant
        from ..server.tenancy import internal_id
        from ..store.export import read_export

        original = str(read_export(args.file).get("user_id", ""))
        # A tenant's user keeps its name in the tenant it is imported into.
        owner, _, name = original.partition(":")
        try:
            check_tenant(owner)
        except InvalidInput:
            name = original  # no tenant's id: the whole id is the name
        as_user = internal_id(t, name or original)
    with open_memory(args, data_dir(args)) as mem:
        uid = mem.import_user(args.file, user_id=as_user)
        turns = mem.user_state(uid).turns
    print(f"imported {args.file} as user {shown_user(args, uid)!r} ({turns} turns)")
    return 0


def forget(args: argparse.Namespace) -> int:
    """``memoryos forget USER``: delete every file of the user; on a terminal it asks
    first, unless ``--yes``."""
    user = lib_user(args, args.user)
    with open_memory(args, existing_data_dir(args)) as mem:
        require_user(mem, user, args)
        if not args.yes and sys.stdin.isatty():
            turns = mem.user_state(user).turns
            answer = input(
                f"delete every memory of {args.user!r} ({turns} turns) in "
                f"{mem.data_dir}? This cannot be undone. [y/N] "
            )
            if answer.strip().lower() not in ("y", "yes"):
                print(f"kept {args.user!r}")
                return 1
        report = mem.forget_user(user)
    print(f"forgot {args.user!r}: removed {len(report.removed_files)} files")
    for path in report.removed_files:
        print(f"  {path}")
    return 0


def repair(args: argparse.Namespace) -> int:
    from ..repair import repair_user
    from ._common import sharded

    path = existing_data_dir(args)
    user = lib_user(args, args.user)
    quiet_logging(config_from_args(args))  # a bad config fails here as in every command
    layout = sharded(path)
    if layout is not None:
        from ..cluster import shard_dir, shard_of

        # The top directory's lock keeps a sharded facade out, the shard's any other.
        with _locked(path):
            shard = shard_dir(path, shard_of(user, layout.shards))
            with _locked(shard):
                report = repair_user(shard, user)
    else:
        # The lock: no server or other command may have the directory open meanwhile.
        with _locked(path):
            report = repair_user(path, user)
    if not report.changed:
        print(f"{args.user!r}: nothing to repair")
        return 0
    print(
        f"repaired {args.user!r}: kept {report.kept_records} intact records, lost "
        f"{report.lost_records}; the WAL holds {report.wal_turns_kept} turns"
    )
    for note in report.notes:
        print(f"  {note}")
    for f in report.files:
        print(f"  {f.path}: {f.action}, original kept as {f.backup}")
    return 0


def _locked(path: Path) -> Any:
    """The data directory lock of ``path``; refused with who holds it (a server: how to
    reach it)."""
    from ..errors import DataDirLocked
    from ..store.lock import DataDirLock
    from ._common import server_note

    try:
        return DataDirLock(path)
    except DataDirLocked as exc:
        note = server_note(path)
        raise DataDirLocked(note) if note else exc from None


def rebalance(args: argparse.Namespace) -> int:
    """``memoryos rebalance --shards N``: move users between shard directories; ``--shards
    1`` makes the data directory an in-process (unsharded) one again."""
    from ..cluster import rebalance_shards, unshard

    path = existing_data_dir(args)
    _locked(path).close()  # a running server is named, with how to reach it
    report = unshard(path) if args.shards == 1 else rebalance_shards(path, args.shards)
    if report.shards_before == report.shards_after == 0:
        print(f"{path} is not sharded: nothing to do")
        return 0

    before, after = report.shards_before, report.shards_after
    change = (
        f"{before} -> {after} shards"
        if before and after
        else f"unsharded -> {after} shards"
        if after
        else f"{before} shards -> unsharded"
    )
    print(
        f"{change}: moved {len(report.moved)} users, removed {len(report.removed_dirs)} "
        "empty shards"
    )

    def where(n: int) -> str:
        return "unsharded" if n < 0 else f"shard {n}"

    for user, (src, dst) in sorted(report.moved.items()):
        print(plain(f"  {user}: {where(src)} -> {where(dst)}"))
    return 0
