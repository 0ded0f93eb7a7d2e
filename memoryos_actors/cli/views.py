"""The read-only commands ``inspect``, ``memories`` and ``stats``: they take no lock and
never change a file in the data directory, so they work while a server runs (``stats``
reads the files without opening the memory system)."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from typing import Any

from ._common import (
    config_from_args,
    existing_data_dir,
    lib_user,
    open_reader,
    quiet_logging,
    require_user,
    shown_user,
)
from ._common import console as make_console
from .prometheus import render_prometheus
from .render import show_user, state_dict

__all__ = ["inspect", "memories", "stats"]


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
    from ..operations import stored_stats, user_stored_stats
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
                from ..operations import list_users
                from ..server.tenancy import tenant_prefix

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
