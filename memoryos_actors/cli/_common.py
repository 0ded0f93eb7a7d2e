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
    from ..system import MemoryOS

__all__ = [
    "DEFAULT_DATA_DIR",
    "UsageError",
    "config_from_args",
    "console",
    "data_dir",
    "existing_data_dir",
    "n_of",
    "one_line",
    "open_memory",
    "plain",
    "quiet_logging",
    "require_user",
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


def quiet_logging(cfg: MemoryConfig) -> None:
    """Keep library and third-party logs at the configured level on stderr.

    pykka reports a crashed actor through the standard ``logging`` module with a traceback;
    the supervisor already restarts it and says so through structlog, so on the terminal
    the traceback is noise unless the user asked for debug output.
    """
    from ..logs import configure_logging

    configure_logging(cfg.log_level, cfg.log_format, force=True)
    if cfg.log_level != "debug":
        logging.getLogger("pykka").setLevel(logging.CRITICAL)
    for noisy in ("LiteLLM", "litellm", "httpx", "openai"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def open_memory(args: argparse.Namespace, path: Path, *, read_only: bool = False,
                **overrides: Any) -> MemoryOS:
    """Open the memory system over ``path`` with the command line's config (``read_only``:
    see :meth:`MemoryOS.open`; the read commands never change the data directory)."""
    from ..system import MemoryOS

    cfg = config_from_args(args, **overrides)
    quiet_logging(cfg)
    return MemoryOS.open(path, cfg, read_only=read_only)


def require_user(mem: MemoryOS, user: str) -> None:
    """Raise :class:`~memoryos_actors.errors.UnknownUser` unless ``user`` has data."""
    from ..errors import UnknownUser

    if user not in mem.users() and user not in mem.active_users():
        raise UnknownUser(f"no data for user {user!r} in {mem.data_dir}")


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
