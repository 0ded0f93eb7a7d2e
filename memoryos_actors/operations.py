"""What the front ends (``memoryos`` commands, the HTTP and MCP server) need from a data
directory besides :class:`~memoryos_actors.api.MemoryAPI`: the one public door to the
disk tools.

The command line and the server import nothing from ``store``, ``actors``, ``tiers``,
``gateway`` or the disk tools (``repair``, ``checkup``, ``disk_stats``, ``import_check``)
directly (``tests/docs/test_layers.py`` checks it): they call these, so the modules below
may rename and reshape what they hold without touching a front end. Each name keeps the
contract of the function it hands on to. The heavier tools are imported on first call, so
importing this module stays as quick as importing the store's light parts.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .store.edits import MEMORY_KINDS, MemoryRef, parse_memory_id
from .store.keyfile import (
    KEY_FILE_FORMAT,
    KEY_FILE_VERSION,
    KeyRecord,
    check_tenant,
    parse_key_file,
)
from .store.lock import SERVER_FILE, DataDirLock, lock_holder
from .store.userstore import list_users, user_exists

if TYPE_CHECKING:
    from .checkup import DoctorReport
    from .config import MemoryConfig
    from .reembed import ReembedReport
    from .reports import RepairReport

__all__ = [
    "KEY_FILE_FORMAT",
    "KEY_FILE_VERSION",
    "MEMORY_KINDS",
    "SERVER_FILE",
    "DataDirLock",
    "KeyRecord",
    "MemoryRef",
    "agent_trait_id",
    "check_tenant",
    "doctor",
    "list_users",
    "lock_holder",
    "parse_key_file",
    "parse_memory_id",
    "read_export",
    "reembed",
    "repair_user",
    "server_info",
    "startup_check",
    "stored_stats",
    "user_exists",
    "user_stored_stats",
    "write_export",
]


def agent_trait_id(memory_id: str, assistant: str) -> str:
    """The id of agent-trait memory ``memory_id`` with its assistant renamed to
    ``assistant`` (:class:`~memoryos_actors.errors.InvalidInput` for a malformed id)."""
    ref = parse_memory_id(memory_id)
    return MemoryRef(ref.kind, ref.key, assistant).memory_id


def server_info(data_dir: str | os.PathLike[str]) -> Path:
    """The file a running ``memoryos serve`` writes into ``data_dir`` (its URL and pid)."""
    return Path(data_dir) / SERVER_FILE


def repair_user(data_dir: str | os.PathLike[str], user_id: str) -> RepairReport:
    """Repair user ``user_id``'s damaged files in ``data_dir`` (the caller holds the data
    directory's lock); see :func:`memoryos_actors.repair.repair_user`."""
    from .repair import repair_user as run

    return run(data_dir, user_id)


def reembed(
    data_dir: str | os.PathLike[str],
    old_config: MemoryConfig,
    new_config: MemoryConfig,
    *,
    progress: Callable[[str, int, int], None] | None = None,
) -> ReembedReport:
    """Compute every vector stored in ``data_dir`` again with ``new_config``'s embedder,
    resumably, the old data kept in use until the new is complete; see
    :func:`memoryos_actors.reembed.reembed_data_dir`."""
    from .reembed import reembed_data_dir as run

    return run(data_dir, old_config, new_config, progress=progress)


def startup_check(config: MemoryConfig, *, timeout: float | None = None) -> list[str]:
    """The provider check a server or command runs before it starts; see
    :func:`memoryos_actors.checkup.startup_check`."""
    from .checkup import startup_check as run

    return run(config, timeout=timeout)


def doctor(
    data_dir: str | os.PathLike[str],
    config: MemoryConfig | None = None,
    *,
    keys_file: str | os.PathLike[str] | None = None,
    timeout: float | None = None,
) -> DoctorReport:
    """Check the configuration, provider, embedder, data directory and key file; see
    :func:`memoryos_actors.checkup.doctor`."""
    from .checkup import doctor as run

    return run(data_dir, config, keys_file=keys_file, timeout=timeout)


def user_stored_stats(data_dir: str | os.PathLike[str], user_id: str) -> dict[str, int]:
    """Counters of what one user's files hold, read without activating the user; see
    :func:`memoryos_actors.disk_stats.user_stored_stats`."""
    from .disk_stats import user_stored_stats as run

    return run(data_dir, user_id)


def stored_stats(
    data_dir: str | os.PathLike[str], users: list[str] | None = None
) -> dict[str, Any]:
    """Counters of what the data directory (or ``users`` in it) holds; see
    :func:`memoryos_actors.disk_stats.stored_stats`."""
    from .disk_stats import stored_stats as run

    return run(data_dir, users)


def read_export(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The payload of the export file at ``path``; see
    :func:`memoryos_actors.store.export.read_export`."""
    from .store.export import read_export as run

    return run(path)


def write_export(path: str | os.PathLike[str], payload: dict[str, Any]) -> Path:
    """Write ``payload`` as an export file at ``path`` (its suffix picks the encoding);
    see :func:`memoryos_actors.store.export.write_export`."""
    from .store.export import write_export as run

    return run(path, payload)
