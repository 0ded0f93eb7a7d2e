"""Persistence: per-user WAL, msgpack snapshots, archive, data-directory lock and exports.

This package is the one place that does disk I/O for user memory. Every file it writes has a
magic, a format version and CRC32 checksums; every file it reads is treated as untrusted
(damage raises :class:`~memoryos_actors.errors.CorruptDataError` naming the file, and
a length field is never trusted to allocate memory).
"""

from __future__ import annotations

from memoryos_actors.store._frames import MAX_RECORD_BYTES, NewerFormatError
from memoryos_actors.store._framing import FSYNC_POLICIES
from memoryos_actors.store.archive import Archive, ArchiveHit
from memoryos_actors.store.export import read_export, write_export
from memoryos_actors.store.lock import DataDirLock
from memoryos_actors.store.paths import user_dir_name, user_id_from_dir_name, validate_user_id
from memoryos_actors.store.snapshot import (
    SCHEMA_VERSION,
    Recovered,
    Snapshot,
    read_latest,
    read_latest_snapshot,
    write_snapshot,
)
from memoryos_actors.store.user_meta import UserMeta
from memoryos_actors.store.userstore import (
    UserStore,
    list_users,
    remove_user,
    user_exists,
)
from memoryos_actors.store.wal import WAL

__all__ = [
    "FSYNC_POLICIES",
    "MAX_RECORD_BYTES",
    "SCHEMA_VERSION",
    "WAL",
    "Archive",
    "ArchiveHit",
    "DataDirLock",
    "NewerFormatError",
    "Recovered",
    "Snapshot",
    "UserMeta",
    "UserStore",
    "list_users",
    "read_export",
    "read_latest",
    "read_latest_snapshot",
    "remove_user",
    "user_dir_name",
    "user_exists",
    "user_id_from_dir_name",
    "validate_user_id",
    "write_export",
    "write_snapshot",
]
