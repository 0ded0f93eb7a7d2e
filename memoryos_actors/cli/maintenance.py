"""Repairs of a data directory under its lock: ``memoryos repair`` (a user's damaged files),
``memoryos rebalance`` (users moved between shard directories) and ``memoryos reembed``
(every stored vector computed again by another embedder); and ``memoryos shards`` (list
or stop the shared Ray shards front doors leave running)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ._common import config_from_args, existing_data_dir, lib_user, plain, quiet_logging

__all__ = ["add_reembed_parser", "add_ray_address", "rebalance", "reembed", "repair", "shards"]


def add_ray_address(parser: argparse.ArgumentParser, help_text: str) -> None:
    """Add ``--ray [ADDRESS]``: ``True`` when given alone, else the address string."""
    parser.add_argument(
        "--ray",
        nargs="?",
        const=True,
        default=argparse.SUPPRESS,
        metavar="ADDRESS",
        help=help_text,
    )


def repair(args: argparse.Namespace) -> int:
    from ..operations import repair_user
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
    from ..operations import DataDirLock
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


def add_reembed_parser(parser: argparse.ArgumentParser) -> None:
    """The options of ``memoryos reembed``: the new embedder (the configuration names the
    one the data directory was built with)."""
    parser.add_argument(
        "--embedder",
        required=True,
        choices=("hashing", "litellm", "sentence-transformers"),
        help="the new embedder",
    )
    parser.add_argument(
        "--embedding-dim", type=int, help="hashing: the new dimension (default: as configured)"
    )
    parser.add_argument(
        "--embedding-model",
        help="litellm or sentence-transformers: the model name or local model folder",
    )


def reembed(args: argparse.Namespace) -> int:
    """``memoryos reembed --embedder NAME``: compute every stored vector again with another
    embedder, resumably, into a new index beside the old one, which stays in use until the
    new one is complete (see :mod:`memoryos_actors.reembed`)."""
    from ..operations import reembed as run
    from ._common import UsageError, console, sharded

    path = existing_data_dir(args)
    old = config_from_args(args)
    quiet_logging(old)
    if sharded(path) is not None:
        raise UsageError(
            f"{path} is sharded: reembed works on an unsharded data directory "
            "(memoryos rebalance --shards 1 first)"
        )
    changes: dict[str, Any] = {"embedder": args.embedder}
    if args.embedding_dim is not None:
        changes["embedding_dim"] = args.embedding_dim
    if args.embedding_model is not None:
        changes["embedding_model"] = args.embedding_model
    new = old.evolve(**changes)  # a bad combination is refused here, before any work
    _locked(path).close()  # a running server is named, with how to reach it
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    out = console(stderr=True)
    with Progress(
        TextColumn("re-embedding users"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[user]}"),
        console=out,
        transient=True,
    ) as bar:
        task = bar.add_task("reembed", total=None, user="")

        def step(user: str, done: int, total: int) -> None:
            bar.update(task, completed=done, total=total, user=user)

        report = run(path, old, new, progress=step)
    name, dim = report.embedder
    resumed = f" ({report.resumed} done by an earlier run)" if report.resumed else ""
    print(
        f"re-embedded {report.users} users in {path} with {name} (dim {dim}){resumed}; "
        "it now opens only with this embedder: configure it too "
        f"({_config_hint(changes)})"
    )
    return 0


def _config_hint(changes: dict[str, Any]) -> str:
    """The settings that name the new embedder, as a TOML file would hold them."""
    return ", ".join(
        f"{key} = {value}" if isinstance(value, int) else f'{key} = "{value}"'
        for key, value in changes.items()
    )


def shards(args: argparse.Namespace) -> int:
    """``memoryos shards list|stop [DATA_DIR] --ray ADDRESS``: the shared Ray shards of a
    data directory (see :func:`~memoryos_actors.cluster.stop_shards`)."""
    from ..cluster import shared_shards, stop_shards
    from ._common import UsageError

    if args.dir:
        args.data_dir = args.dir
    path = existing_data_dir(args)
    address = None if args.ray in (True, False) else str(args.ray)
    if args.action == "list":
        found = shared_shards(path, address)
        if not found:
            print(f"no shard of {path} is running")
        for info in found:
            print(
                f"shard {info.shard}: pid {info.pid}  node {info.node_id or '-'}  "
                f"restarted {'yes' if info.incarnation else 'no'}  {info.data_dir}"
            )
        return 0
    if args.timeout is None or args.timeout <= 0:
        raise UsageError("--timeout must be a positive number of seconds")
    stopped = stop_shards(path, address, timeout=args.timeout)
    print(
        f"stopped {len(stopped)} shards of {path}"
        + (f": {', '.join(str(n) for n in stopped)}" if stopped else " (none was running)")
    )
    return 0
