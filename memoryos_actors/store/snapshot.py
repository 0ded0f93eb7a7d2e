"""Versioned, checksummed msgpack snapshots of a user's tier state.

A snapshot directory holds numbered generations ``snapshot-<generation>.msgpack``. Writing a
snapshot creates the next generation atomically (temporary file, fsync, rename, directory
fsync) and then deletes all but the two newest generations, so the previous one is always
there to fall back on. File layout (big-endian)::

    magic "MOSSNAP\\0" | format version (u16) | schema version (u32) | WAL LSN (u64)
    | payload length (u64) | CRC32 (u32) of everything before it and the payload | msgpack payload

``schema_version`` is the caller's version of the *state* layout; ``wal_lsn`` is the LSN of
the last WAL record the state includes (recovery replays records after it). A snapshot with
a newer format or schema version than this build reads raises :class:`NewerFormatError` (a
:class:`CorruptDataError`) and is never read silently nor skipped in favour of an older one:
that would quietly roll the user back.
"""

from __future__ import annotations

import os
import re
import struct
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgpack

from memoryos_actors.errors import CorruptDataError, InvalidInput, StorageError
from memoryos_actors.store._files import atomic_write, fsync_dir
from memoryos_actors.store._frames import NewerFormatError, unpack_map
from memoryos_actors.store._framing import log
from memoryos_actors.store.formats import WalRecord

__all__ = [
    "FORMAT_VERSION",
    "SCHEMA_VERSION",
    "NewerFormatError",
    "Recovered",
    "Snapshot",
    "list_snapshots",
    "read_latest",
    "read_latest_snapshot",
    "read_snapshot",
    "write_snapshot",
]

FORMAT_VERSION = 1
"""Version of the snapshot container format this build writes and reads."""

SCHEMA_VERSION = 1
"""Default version of the state layout; callers pass their own when it changes."""

_MAGIC = b"MOSSNAP\x00"
_HEAD = struct.Struct(">8sHIQQ")
_CRC = struct.Struct(">I")
_HEADER_SIZE = _HEAD.size + _CRC.size
_NAME = re.compile(r"^snapshot-(\d{12})\.msgpack$")
_KEEP_GENERATIONS = 2


@dataclass(frozen=True, slots=True)
class Snapshot:
    """A snapshot read back: the state, the WAL LSN it covers, and where it came from."""

    state: dict[str, Any]
    wal_lsn: int
    schema_version: int
    path: Path
    generation: int


def _generation_path(directory: Path, generation: int) -> Path:
    return directory / f"snapshot-{generation:012d}.msgpack"


def list_snapshots(directory: str | os.PathLike[str]) -> list[tuple[int, Path]]:
    """``(generation, path)`` of every snapshot file in ``directory``, newest first."""
    d = Path(directory)
    try:
        names = os.listdir(d)
    except (FileNotFoundError, NotADirectoryError):
        return []
    found = []
    for name in names:  # a Path only for the matches: readers list every user's snapshots
        m = _NAME.match(name)
        if m:
            found.append((int(m.group(1)), d / name))
    found.sort(reverse=True)
    return found


def write_snapshot(
    directory: str | os.PathLike[str],
    state: dict[str, Any],
    wal_lsn: int,
    schema_version: int = SCHEMA_VERSION,
) -> Path:
    """Write ``state`` as the next snapshot generation in ``directory``; return its path.

    ``wal_lsn`` is the LSN of the last WAL record included in ``state``. When this returns the
    snapshot is durable; the two newest generations are kept, older ones deleted. Raises
    :class:`InvalidInput` for a state msgpack cannot encode, :class:`StorageError` on I/O errors.
    """
    d = Path(directory)
    if not isinstance(state, dict):
        raise InvalidInput(f"snapshot state must be a dict, not {type(state).__name__}")
    if not (isinstance(wal_lsn, int) and wal_lsn >= 0):
        raise InvalidInput(f"wal_lsn must be an int >= 0, not {wal_lsn!r}")
    if not (isinstance(schema_version, int) and 1 <= schema_version < 2**32):
        raise InvalidInput(f"schema_version must be a positive int, not {schema_version!r}")
    try:
        payload = msgpack.packb(state, use_bin_type=True)
    except (TypeError, ValueError, OverflowError) as exc:
        raise InvalidInput(f"snapshot state cannot be encoded as msgpack: {exc}") from None
    head = _HEAD.pack(_MAGIC, FORMAT_VERSION, schema_version, wal_lsn, len(payload))
    crc = zlib.crc32(payload, zlib.crc32(head))
    try:
        if not d.is_dir():
            d.mkdir(parents=True, exist_ok=True)
            fsync_dir(d.parent)  # the directory's own name, or a crash may lose every generation
        for stale in d.glob("snapshot-*.tmp"):  # left by a crash mid-write
            stale.unlink(missing_ok=True)
        existing = list_snapshots(d)
        generation = existing[0][0] + 1 if existing else 1
        path = _generation_path(d, generation)
        atomic_write(path, b"".join((head, _CRC.pack(crc), payload)), "snapshot")
        for _gen, old in existing[_KEEP_GENERATIONS - 1 :]:
            old.unlink(missing_ok=True)
        if len(existing) >= _KEEP_GENERATIONS:
            fsync_dir(d)
    except OSError as exc:
        raise StorageError(f"{d}: writing snapshot failed: {exc}") from exc
    log.debug("snapshot_written", path=str(path), wal_lsn=wal_lsn, bytes=len(payload))
    return path


def read_snapshot(
    path: str | os.PathLike[str], *, schema_version: int = SCHEMA_VERSION
) -> Snapshot:
    """Read and verify one snapshot file.

    Raises :class:`CorruptDataError` naming the file if it is short, has a bad magic, length
    or checksum, or does not hold a map; :class:`NewerFormatError` if its format or schema
    version is newer than this build reads or than ``schema_version`` (the newest state
    schema the caller understands, i.e. the one it writes).
    """
    p = Path(path)
    m = _NAME.match(p.name)
    generation = int(m.group(1)) if m else 0
    try:
        with open(p, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            header = f.read(_HEADER_SIZE)
            if len(header) < _HEADER_SIZE:
                raise CorruptDataError(
                    f"{p}: snapshot is {len(header)} bytes, shorter than its header"
                )
            magic, fmt, schema, wal_lsn, length = _HEAD.unpack_from(header)
            (crc,) = _CRC.unpack_from(header, _HEAD.size)
            if magic != _MAGIC:
                raise CorruptDataError(f"{p}: not a snapshot file (magic {magic!r})")
            # Check the length against the real size before reading: never trust it to allocate.
            if length != size - _HEADER_SIZE:
                raise CorruptDataError(
                    f"{p}: snapshot says {length} payload bytes but the file holds "
                    f"{size - _HEADER_SIZE} (truncated or damaged)"
                )
            payload = f.read(length)
    except OSError as exc:
        raise CorruptDataError(f"{p}: cannot read snapshot: {exc}") from exc
    if zlib.crc32(payload, zlib.crc32(header[: _HEAD.size])) != crc:
        raise CorruptDataError(f"{p}: snapshot checksum mismatch")
    if fmt > FORMAT_VERSION:
        raise NewerFormatError(
            f"{p}: snapshot format version {fmt} was written by a newer memoryos-actors "
            f"(this one reads up to {FORMAT_VERSION}); upgrade before opening this data"
        )
    if schema > schema_version:
        raise NewerFormatError(
            f"{p}: snapshot state schema version {schema} is newer than the {schema_version} "
            f"this build understands; upgrade memoryos-actors before opening this data"
        )
    if fmt < 1 or schema < 1:
        raise CorruptDataError(f"{p}: invalid snapshot versions (format {fmt}, schema {schema})")
    state = unpack_map(payload, f"{p}: snapshot payload")
    return Snapshot(state, int(wal_lsn), int(schema), p, generation)


def read_latest_snapshot(
    directory: str | os.PathLike[str], *, schema_version: int = SCHEMA_VERSION
) -> Snapshot | None:
    """The newest readable snapshot in ``directory``, or ``None`` if there is none at all.

    A damaged newest generation is logged and skipped in favour of the previous one. Raises
    :class:`CorruptDataError` naming every file when snapshot files exist but none is readable,
    and :class:`NewerFormatError` at once for a snapshot from a newer version.
    """
    failures: list[str] = []
    for _gen, path in list_snapshots(directory):
        try:
            snap = read_snapshot(path, schema_version=schema_version)
        except NewerFormatError:
            raise
        except CorruptDataError as exc:
            log.error("snapshot_unreadable", path=str(path), error=str(exc))
            failures.append(str(exc))
            continue
        if failures:
            log.warning("snapshot_fell_back", path=str(path), skipped=len(failures))
        return snap
    if failures:
        raise CorruptDataError(
            f"{directory}: no readable snapshot; refusing to start empty over existing data: "
            + "; ".join(failures)
        )
    return None


def read_latest(
    directory: str | os.PathLike[str], *, schema_version: int = SCHEMA_VERSION
) -> tuple[dict[str, Any], int] | None:
    """``(state, wal_lsn)`` of the newest readable snapshot, or ``None`` if there is none.

    See :func:`read_latest_snapshot` for the fallback and error rules.
    """
    snap = read_latest_snapshot(directory, schema_version=schema_version)
    return None if snap is None else (snap.state, snap.wal_lsn)


@dataclass(frozen=True, slots=True)
class Recovered:
    """A user's state as found on disk.

    ``state`` is the newest readable snapshot's state (``None`` if there is no snapshot),
    ``snapshot_lsn`` the last WAL LSN it includes (0 without a snapshot), ``schema_version``
    its state schema version, and ``records`` the ``(lsn, record)`` WAL records to replay on
    top of it, in order, as the file holds them; ``replay`` the same records typed
    (:data:`~memoryos_actors.store.formats.WalRecord`), which the tiers replay.
    """

    state: dict[str, Any] | None
    snapshot_lsn: int
    schema_version: int | None
    records: tuple[tuple[int, dict[str, Any]], ...] = field(default=())
    replay: tuple[tuple[int, WalRecord], ...] = field(default=())

    @property
    def last_lsn(self) -> int:
        """LSN of the newest change the recovered state plus records include."""
        return self.records[-1][0] if self.records else self.snapshot_lsn
