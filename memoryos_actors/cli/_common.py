"""What every ``memoryos`` command shares: the data directory, the config, opening the
system, the console, and small text helpers."""

from __future__ import annotations

import argparse
import datetime as _dt
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console

    from ..config import MemoryConfig

__all__ = [
    "DEFAULT_DATA_DIR",
    "UsageError",
    "config_from_args",
    "console",
    "data_dir",
    "existing_data_dir",
    "n_of",
    "one_line",
    "lib_user",
    "open_memory",
    "open_reader",
    "plain",
    "quiet_logging",
    "require_user",
    "server_note",
    "server_url",
    "shown_user",
    "tenant",
    "when",
]

DEFAULT_DATA_DIR = "memoryos-data"
"""Data directory when neither ``--data-dir`` nor ``$MEMORYOS_DATA_DIR`` is given."""

_MAX_WIDTH = 100
"""Widest output the CLI lays out for, in columns (tables stay readable on 80-100)."""


class UsageError(Exception):
    """A problem with the command line itself (exit code 2, no traceback)."""


def console(stderr: bool = False) -> Console:
    """A rich console no wider than 100 columns, without automatic highlighting."""
    from rich.console import Console

    probe = Console(stderr=stderr)
    return Console(stderr=stderr, highlight=False, width=min(probe.width, _MAX_WIDTH))


def data_dir(args: argparse.Namespace) -> Path:
    """``--data-dir``, else ``$MEMORYOS_DATA_DIR``, else ``./memoryos-data``."""
    from ..config import DATA_DIR_ENV

    return Path(args.data_dir or os.environ.get(DATA_DIR_ENV) or DEFAULT_DATA_DIR)


def existing_data_dir(args: argparse.Namespace) -> Path:
    """The data directory for commands that only read or change existing data."""
    from ..config import DATA_DIR_ENV

    path = data_dir(args)
    if not path.is_dir():
        raise UsageError(f"no data directory at {path} (set --data-dir or {DATA_DIR_ENV})")
    return path


def config_from_args(args: argparse.Namespace, **overrides: Any) -> MemoryConfig:
    """The config: ``--config`` TOML file and ``MEMORYOS_*`` variables, then ``--model``
    and ``--base-url``, then ``overrides``."""
    from ..config import MemoryConfig

    cfg = MemoryConfig.load(getattr(args, "config", None))
    if getattr(args, "model", None):
        overrides.setdefault("llm_backend", "litellm")
        overrides.setdefault("llm_model", args.model)
    if getattr(args, "base_url", None):
        overrides["llm_base_url"] = args.base_url
    return cfg.evolve(**overrides) if overrides else cfg


def quiet_logging(cfg: MemoryConfig, *, on_first_event: bool = False) -> None:
    """Keep library and third-party logs at the configured level on stderr.

    pykka reports a crashed actor through the standard ``logging`` module with a traceback;
    the supervisor already restarts it and says so through structlog, so on the terminal
    the traceback is noise unless the user asked for debug output. With
    ``on_first_event``, for a command that starts no actor and whose only log events can
    come from the store, structlog is set up (and imported) only if one is logged.
    """
    from ..logs import configure_logging, configure_logging_on_first_event

    if on_first_event:
        configure_logging_on_first_event(cfg.log_level, cfg.log_format)
    else:
        configure_logging(cfg.log_level, cfg.log_format, force=True)
    if cfg.log_level != "debug":
        logging.getLogger("pykka").setLevel(logging.CRITICAL)
    for noisy in ("LiteLLM", "litellm", "httpx", "openai"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


TENANT_ENV = "MEMORYOS_TENANT"
"""Environment variable naming the tenant when ``--tenant`` is not given."""


def tenant(args: argparse.Namespace) -> str | None:
    """``--tenant``, else ``$MEMORYOS_TENANT``, else None (the library's own id space)."""
    given = getattr(args, "tenant", None) or os.environ.get(TENANT_ENV) or None
    if given is not None:
        from ..server.keys import check_tenant

        check_tenant(given)
    return given


def lib_user(args: argparse.Namespace, user: str) -> str:
    """The library id of the user named ``user`` on the command line: with a tenant, the id
    the server and MCP use for that tenant's user (``<tenant>:<user>``)."""
    t = tenant(args)
    if t is None:
        return user
    from ..server.tenancy import internal_id

    return internal_id(t, user)


def shown_user(args: argparse.Namespace, uid: str) -> str:
    """A library user id as the command line names it (without the tenant's prefix)."""
    t = tenant(args)
    if t is None:
        return uid
    from ..server.tenancy import external_id

    shown = external_id(t, uid)
    return uid if shown is None else shown


def server_url(path: Path) -> str | None:
    """Where the ``memoryos serve`` holding data directory ``path`` listens, or None when
    no server holds it."""
    import json

    from ..operations import lock_holder, server_info

    locked, pid = lock_holder(path)
    if not locked or pid is None:
        return None
    try:
        info = json.loads(server_info(path).read_text(encoding="utf-8"))
        url, server_pid = str(info["url"]), int(info["pid"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return url if url and server_pid == pid else None


def server_note(path: Path) -> str:
    """Who holds data directory ``path``'s lock, and how to reach it when it is a
    ``memoryos serve``: one sentence for a refused write command."""
    import json

    from ..operations import lock_holder, server_info

    locked, pid = lock_holder(path)
    if not locked:
        return ""
    try:
        info = json.loads(server_info(path).read_text(encoding="utf-8"))
        url, server_pid = str(info["url"]), int(info["pid"])
    except (OSError, ValueError, KeyError, TypeError):
        url, server_pid = "", None
    if url and pid is not None and server_pid == pid:
        mcp = f", MCP at {url}/mcp" if info.get("mcp") else ""
        return (
            f"a memoryos server (pid {pid}) holds {path}: send changes through its "
            f"HTTP API at {url} (routes at {url}/docs{mcp}), or stop it first; "
            "inspect, stats, export and memories work while it runs"
        )
    who = f"process {pid}" if pid is not None else "another process"
    return (
        f"{who} holds {path} (its lock file); stop it first, or use another data "
        "directory; inspect, stats, export and memories work while it runs"
    )


def sharded(path: Path) -> Any:
    """The shard layout of ``path`` (:class:`~memoryos_actors.cluster._placement.ShardLayout`)
    or None for an in-process data directory. An interrupted rebalance is refused with
    what to run."""
    from ..cluster._placement import LAYOUT_FILE, read_layout

    if not (path / LAYOUT_FILE).exists():
        return None
    layout = read_layout(path)
    if layout is not None and layout.rebalancing_from is not None:
        raise UsageError(
            f"{path}: a rebalance to {layout.shards} shards was interrupted; "
            f"run `memoryos rebalance --shards {layout.shards}` to finish it"
        )
    return layout


def open_memory(
    args: argparse.Namespace, path: Path, *, read_only: bool = False, **overrides: Any
) -> Any:
    """Open the memory system over ``path`` with the command line's config (``read_only``:
    see :meth:`MemoryOS.open`; the read commands never change the data directory).

    A sharded data directory opens with its shards in this process, or on Ray with
    ``--ray``. A directory held by another process (a server, say) is refused with one
    sentence saying who holds it and how to reach it.
    """
    from ..cluster import open_data_dir
    from ..errors import DataDirLocked
    from ..system import MemoryOS

    cfg = config_from_args(args, **overrides)
    quiet_logging(cfg)
    try:
        if read_only:
            return MemoryOS.open(path, cfg, read_only=True)
        sharded(path)  # an interrupted rebalance says what to run
        return open_data_dir(path, cfg, ray=bool(getattr(args, "ray", False)))
    except DataDirLocked as exc:
        note = server_note(path)
        raise DataDirLocked(note) if note else exc from None


def open_reader(args: argparse.Namespace, path: Path, user: str | None = None) -> Any:
    """A read-only memory system over ``path`` that takes no lock: the directory itself,
    or, in a sharded one, the shard holding ``user`` (see :func:`shard_dirs` for all)."""
    layout = sharded(path)
    if layout is None or user is None:
        return open_memory(args, path, read_only=True)
    from ..cluster import shard_dir, shard_of

    return open_memory(args, shard_dir(path, shard_of(user, layout.shards)), read_only=True)


def shard_dirs(path: Path) -> list[Path]:
    """The data directories that hold users: ``path``, or each shard's of a sharded one."""
    layout = sharded(path)
    if layout is None:
        return [path]
    from ..cluster import shard_dir

    return [d for d in (shard_dir(path, n) for n in range(layout.shards)) if d.is_dir()]


def require_user(mem: Any, user: str, args: argparse.Namespace | None = None) -> None:
    """Raise :class:`~memoryos_actors.errors.UnknownUser` unless library user ``user`` has
    data; the message names the tenants (or the plain id space) where that name exists."""
    from ..errors import UnknownUser

    if user in mem.users() or user in mem.active_users():
        return
    t = tenant(args) if args is not None else None
    name = shown_user(args, user) if args is not None else user
    where = f" (tenant {t!r})" if t is not None else ""
    others = set(mem.users())
    if args is not None and data_dir(args).is_dir():
        # In a sharded directory the same name under another tenant is on another shard.
        from ..operations import list_users

        for root in shard_dirs(data_dir(args)):
            others.update(list_users(root))
    plain_id = False
    tenants: list[str] = []
    for other in sorted(others):
        if other == name:
            plain_id = True
        elif ":" in other and other.split(":", 1)[1] == name:
            prefix = other.split(":", 1)[0]
            if prefix != t:
                tenants.append(prefix)
    found = []
    if tenants:
        shown = ", ".join(repr(x) for x in tenants[:3])
        more = f" and {len(tenants) - 3} more" if len(tenants) > 3 else ""
        hint = f"--tenant {tenants[0]}" if len(tenants) == 1 else "--tenant NAME"
        found.append(f"under tenant{'s' if len(tenants) > 1 else ''} {shown}{more} ({hint})")
    if plain_id and t is not None and name.startswith(f"{t}:"):
        # The library's id of this very tenant's user, given with the tenant as well.
        own = name[len(t) + 1 :]
        found.append(
            f"without a tenant: it is tenant {t!r}'s user {own!r} "
            f"(with --tenant {t}, name it {own!r})"
        )
    elif plain_id:
        found.append("without a tenant (drop --tenant and $MEMORYOS_TENANT)")
    hint = f"; a user {name!r} exists " + " and ".join(found) if found else ""
    where_dir = data_dir(args) if args is not None else mem.data_dir
    raise UnknownUser(f"no data for user {name!r}{where} in {where_dir}{hint}")


def when(ts: float | None) -> str:
    """``ts`` (seconds since the epoch) as ``YYYY-MM-DD HH:MM`` UTC; empty for None."""
    if ts is None:
        return ""
    return _dt.datetime.fromtimestamp(ts, _dt.UTC).strftime("%Y-%m-%d %H:%M")


def one_line(text: str, limit: int) -> str:
    """``text`` with its whitespace collapsed, cut to ``limit`` characters with an ellipsis."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: max(0, limit - 1)] + "…"


def n_of(count: int, noun: str) -> str:
    """``"1 page"``, ``"3 pages"``."""
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def plain(text: str) -> Any:
    """User text as a rich ``Text``, so brackets in it are never read as markup."""
    from rich.text import Text

    return Text(text)
