"""Framed, checksummed record logs: the machinery shared by the WAL and the archive.

File layout (all integers big-endian)::

    file header (20 bytes): magic (6 bytes) | format version (u16) | base seq (u64) | CRC32 (u32)
    frame:                  length (u32) | CRC32 (u32) | seq (u64) | msgpack payload (length bytes)

The header CRC covers the 16 bytes before it. A frame's CRC covers its length, its seq and
its payload. Sequence numbers (the WAL calls them LSNs) are consecutive: the first frame has
``base seq + 1`` and each next frame one more. ``base seq`` only grows when the WAL drops
old records (``truncate_before``), so numbering never restarts during a file's life.

A record is at most :data:`MAX_RECORD_BYTES`; a length field above it is treated as
corruption before anything is allocated, so a hostile file cannot make us reserve gigabytes.

Durability follows Redis's ``appendfsync``:

* ``"always"``: ``append`` returns after ``fsync`` (concurrent appenders share one fsync);
* ``"interval"``: ``append`` returns once the bytes are in the OS page cache; one shared
  background thread fsyncs every dirty log each ``interval`` seconds. A killed *process*
  loses nothing that was acknowledged; a machine crash or power loss may lose the records
  acknowledged in the last ``interval`` seconds (plus the time one fsync takes);
* ``"never"``: fsync is left to the operating system (typically within ~30 seconds on Linux),
  except for an explicit ``flush()``.

This module is private; :mod:`memoryos_actors.store.wal` and
:mod:`memoryos_actors.store.archive` are the public faces.
"""

from __future__ import annotations

import bisect
import io
import os
import shutil
import struct
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol, Self

import msgpack

from memoryos_actors.errors import (
    ConfigError,
    CorruptDataError,
    InvalidInput,
    StorageError,
)
from memoryos_actors.logs import lazy_logger
from memoryos_actors.store._files import atomic_write, fsync_dir, is_blank, tmp_path

__all__ = [
    "FSYNC_POLICIES",
    "MAX_RECORD_BYTES",
    "FsyncPolicy",
    "NewerFormatError",
    "RecordLog",
    "pack_record",
    "unpack_record",
]

# Lazy: readers such as ``memoryos stats`` import structlog only if they log something.
log = lazy_logger("memoryos.store")

FsyncPolicy = Literal["always", "interval", "never"]
FSYNC_POLICIES: tuple[str, ...] = ("always", "interval", "never")

MAX_RECORD_BYTES = 16 * 1024 * 1024
"""Largest msgpack payload of one record, in bytes (16 MiB)."""

_HEADER = struct.Struct(">6sHQ")
_HEADER_CRC = struct.Struct(">I")
HEADER_SIZE = _HEADER.size + _HEADER_CRC.size
_FRAME = struct.Struct(">IIQ")
_LEN_SEQ = struct.Struct(">IQ")
_SEQ = struct.Struct(">Q")
_COPY_CHUNK = 1024 * 1024


class NewerFormatError(CorruptDataError):
    """A file was written by a newer version of this library (format or schema version).

    It is never read silently: upgrade memoryos-actors, or restore a backup.
    """


def pack_record(record: dict[str, Any]) -> bytes:
    """Encode one record as msgpack; :class:`InvalidInput` if it is not a packable dict."""
    if not isinstance(record, dict):
        raise InvalidInput(f"a record must be a dict, not {type(record).__name__}")
    try:
        payload: bytes = msgpack.packb(record, use_bin_type=True)
    except (TypeError, ValueError, OverflowError) as exc:
        raise InvalidInput(f"record cannot be encoded as msgpack: {exc}") from None
    if len(payload) > MAX_RECORD_BYTES:
        raise InvalidInput(
            f"record is {len(payload)} bytes encoded; the limit is {MAX_RECORD_BYTES}"
        )
    return payload


def unpack_map(payload: bytes, what: str) -> dict[str, Any]:
    """Decode a msgpack map (records, snapshots, exports); :class:`CorruptDataError` starting
    with ``what`` (e.g. ``"<path>: snapshot payload"``) if it is not valid msgpack or not a map.
    """
    try:
        value = msgpack.unpackb(payload, raw=False, strict_map_key=False)
    except Exception as exc:  # noqa: BLE001 - msgpack raises several unrelated types
        raise CorruptDataError(f"{what} is not valid msgpack ({exc})") from None
    if not isinstance(value, dict):
        raise CorruptDataError(f"{what} is a {type(value).__name__}, not a map")
    return value


def unpack_record(payload: bytes, path: Path, seq: int) -> dict[str, Any]:
    """Decode one record's payload (see :func:`unpack_map`)."""
    return unpack_map(payload, f"{path}: record {seq}")


def encode_header(magic: bytes, version: int, base_seq: int) -> bytes:
    head = _HEADER.pack(magic, version, base_seq)
    return head + _HEADER_CRC.pack(zlib.crc32(head))


def encode_frame(seq: int, payload: bytes) -> bytes:
    len_seq = _LEN_SEQ.pack(len(payload), seq)
    crc = zlib.crc32(payload, zlib.crc32(len_seq))
    return _FRAME.pack(len(payload), crc, seq) + payload


def read_header(f: FrameSource, path: Path, magic: bytes, version: int, kind: str) -> int:
    """Validate a file header and return its base seq."""
    data = f.read(HEADER_SIZE)
    if len(data) < HEADER_SIZE:
        raise CorruptDataError(
            f"{path}: {kind} file is {len(data)} bytes, shorter than its {HEADER_SIZE}-byte header"
        )
    got_magic, got_version, base = _HEADER.unpack_from(data)
    (crc,) = _HEADER_CRC.unpack_from(data, _HEADER.size)
    if got_magic != magic:
        raise CorruptDataError(f"{path}: not a {kind} file (magic {got_magic!r}, want {magic!r})")
    if zlib.crc32(data[: _HEADER.size]) != crc:
        raise CorruptDataError(f"{path}: {kind} file header checksum mismatch")
    if got_version > version:
        raise NewerFormatError(
            f"{path}: {kind} file format version {got_version} was written by a newer "
            f"memoryos-actors (this one reads up to {version}); upgrade before opening it"
        )
    if got_version < 1:
        raise CorruptDataError(f"{path}: {kind} file has invalid format version {got_version}")
    return int(base)


def read_frame(f: FrameSource, offset: int, end: int, prev_seq: int) -> tuple[int, bytes] | str:
    """Read the frame at ``offset``; return ``(seq, payload)`` or a reason it is not valid.

    Never reads past ``end`` and never allocates more than the file holds.
    """
    if end - offset < _FRAME.size:
        return "truncated frame header"
    head = f.read(_FRAME.size)
    if len(head) < _FRAME.size:
        return "truncated frame header"
    length, crc, seq = _FRAME.unpack(head)
    if length == 0 or length > MAX_RECORD_BYTES:
        return f"implausible record length {length}"
    if offset + _FRAME.size + length > end:
        return "truncated record"
    payload = f.read(length)
    if len(payload) < length:
        return "truncated record"
    if zlib.crc32(payload, zlib.crc32(_LEN_SEQ.pack(length, seq))) != crc:
        return "checksum mismatch"
    if seq != prev_seq + 1:
        return f"sequence number {seq} where {prev_seq + 1} was expected"
    return seq, payload


class FrameSource(Protocol):
    """What the frame readers need of a file: ``read`` and ``seek`` (an open binary file,
    :class:`io.BytesIO` or a :class:`_Reader`)."""

    def read(self, n: int, /) -> bytes:
        """Up to ``n`` bytes from the position (fewer at the end of the file)."""
        ...

    def seek(self, offset: int, whence: int = ..., /) -> int:
        """Move the position (as :meth:`io.IOBase.seek`); the new position, in bytes."""
        ...


class _Reader:
    """A read-only file view over one descriptor with its own position (``os.pread``), so
    readers sharing the descriptor never move each other's position."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.pos = 0

    def read(self, n: int, /) -> bytes:
        data = os.pread(self.fd, n, self.pos)
        self.pos += len(data)
        return data

    def seek(self, offset: int, whence: int = os.SEEK_SET, /) -> int:
        self.pos = self.pos + offset if whence == os.SEEK_CUR else offset
        return self.pos


@dataclass(frozen=True, slots=True)
class Damage:
    """One damaged byte range of a framed log.

    ``start`` is where the damage begins (just past the last intact frame before it),
    ``end`` where the next intact frame starts (the file size when none follows);
    ``after_seq`` is the seq of the last intact frame before it (the base seq if none),
    ``next_seq`` that of the first intact frame after it (None when none follows), and
    ``reason`` what was wrong with the frame at ``start``.
    """

    start: int
    end: int
    after_seq: int
    next_seq: int | None
    reason: str

    @property
    def lost_seqs(self) -> int:
        """How many records the range held (seqs missing between the intact frames around
        it); 0 when nothing intact follows (a damaged tail: how many is not known)."""
        return 0 if self.next_seq is None else self.next_seq - self.after_seq - 1


@dataclass(frozen=True, slots=True)
class _Scan:
    base_seq: int
    last_seq: int
    valid_end: int  # byte offset just past the last valid frame
    size: int
    bad_reason: str | None
    torn: bool  # damage only at the end: no intact frame follows it (a crash's cut write)
    later_valid: bool  # an intact frame follows the damage (corruption in the middle)
    last_offset: int = 0  # where the last valid frame starts (0: no frame)
    marks: tuple[tuple[int, int], ...] = ()  # (seq, offset) of every MARK_EVERY-th frame
    intact_after: int = 0  # intact frames after the first damage
    damage: tuple[Damage, ...] = ()  # every damaged range, in file order


_RESYNC_CHUNK = 1 << 20  # bytes examined per vectorised pass when resynchronising


def _be32(a: Any, k: int, n: int) -> Any:
    """Big-endian u32 at offsets ``k .. k+n-1`` of the byte array ``a`` (numpy)."""
    import numpy as np

    u = np.uint32
    return (
        (a[k : k + n].astype(u) << u(24))
        | (a[k + 1 : k + 1 + n].astype(u) << u(16))
        | (a[k + 2 : k + 2 + n].astype(u) << u(8))
        | a[k + 3 : k + 3 + n].astype(u)
    )


def _frame_ok_at(fd: int, at: int, end: int, after_seq: int) -> int | None:
    """The seq of the checksum-valid frame starting at ``at`` (above ``after_seq``, wholly
    before ``end``), else None."""
    head = os.pread(fd, _FRAME.size, at)
    if len(head) < _FRAME.size:
        return None
    length, crc, seq = _FRAME.unpack(head)
    if not (
        0 < length <= MAX_RECORD_BYTES and at + _FRAME.size + length <= end and seq > after_seq
    ):
        return None
    payload = os.pread(fd, length, at + _FRAME.size)
    if len(payload) != length or zlib.crc32(payload, zlib.crc32(_LEN_SEQ.pack(length, seq))) != crc:
        return None
    return int(seq)


def next_intact_frame(fd: int, start: int, end: int, after_seq: int) -> tuple[int, int] | None:
    """``(offset, seq)`` of the first checksum-valid frame at or after byte ``start`` whose
    seq is above ``after_seq``, or None when there is none before ``end``.

    Every byte offset is a candidate: a vectorised pass (numpy) keeps those whose length
    and seq fields are plausible (a seq can be at most one more per 17 bytes, the smallest
    frame), and only those are checksummed. Runs only on damaged files.
    """
    import numpy as np

    min_frame = _FRAME.size + 1
    lo = after_seq + 1
    hi = after_seq + (end - start) // min_frame + 1
    pos = start
    while pos + min_frame <= end:
        stop = min(end, pos + _RESYNC_CHUNK + _FRAME.size)
        chunk = os.pread(fd, stop - pos, pos)
        n = len(chunk) - _FRAME.size + 1
        if n <= 0:
            break
        a = np.frombuffer(chunk, dtype=np.uint8)
        length = _be32(a, 0, n).astype(np.int64)
        seq = (_be32(a, 8, n).astype(np.uint64) << np.uint64(32)) | _be32(a, 12, n).astype(
            np.uint64
        )
        at = np.arange(pos, pos + n, dtype=np.int64)
        ok = (
            (length > 0)
            & (length <= MAX_RECORD_BYTES)
            & (at + _FRAME.size + length <= end)
            & (seq >= np.uint64(lo))
            & (seq <= np.uint64(hi))
        )
        for i in np.flatnonzero(ok):
            got = _frame_ok_at(fd, pos + int(i), end, after_seq)
            if got is not None:
                return pos + int(i), got
        pos += n
    return None


def walk_damaged(
    fd: int, offset: int, size: int, prev_seq: int, reason: str
) -> tuple[list[Damage], list[tuple[int, int, int]]]:
    """From damage at ``offset`` (after the intact frame numbered ``prev_seq``), every
    damaged range and every intact frame up to ``size``: ``(damages, frames)`` with
    frames as ``(seq, offset, payload length)``."""
    damages: list[Damage] = []
    frames: list[tuple[int, int, int]] = []
    # Buffered over the descriptor (its offset is used by nothing else, see scan).
    with open(fd, "rb", closefd=False) as reader:
        while True:
            found = next_intact_frame(fd, offset, size, prev_seq)
            if found is None:
                damages.append(Damage(offset, size, prev_seq, None, reason))
                return damages, frames
            at, seq = found
            damages.append(Damage(offset, at, prev_seq, seq, reason))
            offset, prev_seq = at, seq - 1
            reader.seek(offset)
            while offset < size:
                got = read_frame(reader, offset, size, prev_seq)
                if isinstance(got, str):
                    reason = got
                    break
                prev_seq = got[0]
                frames.append((prev_seq, offset, len(got[1])))
                offset += _FRAME.size + len(got[1])
            else:
                return damages, frames


_KEEP_AT_OPEN_BYTES = 4 * 1024 * 1024
"""Largest log (bytes) whose records a read-only open keeps in memory for its first read."""

MARK_EVERY = 256
"""A log that keeps marks remembers where every ``MARK_EVERY``-th frame starts, so reading
from a given seq seeks close to it instead of walking every frame before it."""


def scan(
    path: Path,
    magic: bytes,
    version: int,
    kind: str,
    *,
    marks: bool = False,
    fd: int | None = None,
    keep: list[tuple[int, bytes]] | None = None,
) -> _Scan:
    """Validate every frame of ``path`` (read through ``fd`` when given) and report where
    valid data ends (with ``marks``, also where every ``MARK_EVERY``-th frame starts), and,
    past damage, every damaged range and how many intact frames follow. With ``keep`` (a
    list), the ``(seq, payload)`` of every valid frame before the first damage is appended
    to it."""
    own = fd is None
    if fd is None:
        fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        found: list[tuple[int, int]] = []
        last_offset = 0
        # Buffered: two reads per frame stay in user space. A large file is read through
        # the descriptor, moving its offset, which nothing else relies on (every other read
        # of it is a pread).
        f: io.BytesIO | io.BufferedReader
        if size <= _KEEP_AT_OPEN_BYTES:  # a small log: one read, then frames from memory
            f = io.BytesIO(os.pread(fd, size, 0))
        else:
            f = open(fd, "rb", closefd=False)  # noqa: SIM115 - closed below
        try:
            f.seek(0)
            base = read_header(f, path, magic, version, kind)
            offset = HEADER_SIZE
            seq = base
            reason: str | None = None
            while offset < size:
                got = read_frame(f, offset, size, seq)
                if isinstance(got, str):
                    reason = got
                    break
                seq = got[0]
                if keep is not None:
                    keep.append(got)
                if marks and seq % MARK_EVERY == 0:
                    found.append((seq, offset))
                last_offset = offset
                offset += _FRAME.size + len(got[1])
        finally:
            f.close()
        if reason is None:
            return _Scan(base, seq, offset, size, None, False, False, last_offset, tuple(found))
        damages, frames = walk_damaged(fd, offset, size, seq, reason)
    finally:
        if own:
            os.close(fd)
    later = bool(frames)
    return _Scan(
        base,
        seq,
        offset,
        size,
        reason,
        not later,
        later,
        last_offset,
        tuple(found),
        len(frames),
        tuple(damages),
    )


def checkpoint_path(path: Path) -> Path:
    """The checkpoint file beside a log that keeps one (see ``RecordLog.CHECKPOINT``)."""
    return path.with_name(path.name + ".ckpt")


def _file_identity(st: os.stat_result) -> list[int]:
    return [st.st_size, st.st_mtime_ns, st.st_ino]


def _read_checkpoint(
    path: Path, magic: bytes, version: int, kind: str, fd: int | None = None
) -> _Scan | None:
    """The scan result a checkpoint written at the last clean close vouches for, or None
    when there is none or it does not match the file exactly as it is now (any write
    since, by us or anybody, changes its size or modification time). With ``fd``, the
    file is the one open there."""
    ckpt = checkpoint_path(path)
    try:
        raw = ckpt.read_bytes()
        st = path.stat() if fd is None else os.fstat(fd)
    except OSError:
        return None
    try:
        data = msgpack.unpackb(raw, raw=False)
        if not isinstance(data, dict) or data.get("v") != 1:
            return None
        if list(data["file"]) != _file_identity(st):
            return None
        base, last, last_off = int(data["base"]), int(data["last_seq"]), int(data["last_off"])
        marks = tuple((int(sq), int(off)) for sq, off in data["marks"])
    except (ValueError, TypeError, KeyError, msgpack.UnpackException):
        return None
    size = st.st_size
    own = fd is None
    if fd is None:
        fd = os.open(path, os.O_RDONLY)
    try:
        f = _Reader(fd)
        try:
            if read_header(f, path, magic, version, kind) != base:
                return None
        except CorruptDataError:
            return None
        if last > base:
            # The last frame must be whole and end the file: a cheap check that the
            # checkpoint and the file belong together.
            if not HEADER_SIZE <= last_off < size:
                return None
            f.seek(last_off)
            got = read_frame(f, last_off, size, last - 1)
            if isinstance(got, str) or last_off + _FRAME.size + len(got[1]) != size:
                return None
        elif size != HEADER_SIZE:
            return None
    finally:
        if own:
            os.close(fd)
    if any(not (base < sq <= last and HEADER_SIZE <= off < size) for sq, off in marks):
        return None
    return _Scan(base, last, size, size, None, False, False, last_off if last > base else 0, marks)


class _Flusher:
    """The one background thread that fsyncs dirty logs in ``interval`` mode.

    It runs only while at least one such log is open: the last ``unregister`` stops and joins it.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._logs: set[RecordLog] = set()
        self._thread: threading.Thread | None = None
        self._stop: threading.Event | None = None

    def register(self, rlog: RecordLog) -> None:
        with self._lock:
            self._logs.add(rlog)
            if self._thread is None:
                stop = threading.Event()
                thread = threading.Thread(
                    target=self._run, args=(stop,), name="memoryos-wal-flusher", daemon=True
                )
                self._thread, self._stop = thread, stop
                thread.start()

    def unregister(self, rlog: RecordLog) -> None:
        with self._lock:
            self._logs.discard(rlog)
            if self._logs or self._thread is None or self._stop is None:
                return
            thread, stop = self._thread, self._stop
            self._thread = self._stop = None
            stop.set()
        if thread is not threading.current_thread():
            thread.join()

    def running(self) -> bool:
        """Whether the flusher thread is currently running."""
        with self._lock:
            return self._thread is not None

    def _period(self) -> float:
        with self._lock:
            return min((rl.interval for rl in self._logs), default=0.1)

    def _run(self, stop: threading.Event) -> None:
        while not stop.wait(self._period()):
            with self._lock:
                logs = list(self._logs)
            for rlog in logs:
                rlog.sync_if_dirty()


FLUSHER = _Flusher()

_open_paths: set[str] = set()
_open_paths_lock = threading.Lock()


class RecordLog:
    """An append-only file of framed msgpack records with consecutive sequence numbers.

    Opening checks the file. Damage with nothing intact after it is a torn tail (the end
    of a write a crash cut short): it is cut off and logged (a copy of the file is kept
    beside it as ``<name>.corrupt-<unix ms>`` unless the last frame was merely
    incomplete). Damage with intact records after it is not a crash's doing (media
    damage, a stray write): opening raises :class:`CorruptDataError` naming the file, the
    byte offset and how many intact records follow, and changes nothing;
    :func:`memoryos_actors.repair.repair_user` salvages them. A file that exists but
    has no readable header raises :class:`CorruptDataError` naming it: existing data is
    never replaced by an empty log.

    A missing file is created with just a header. With ``sync_create=False`` that creation
    is not fsynced (the file holds nothing a crash could lose); the log's first fsync then
    also makes its name durable, by calling ``on_first_sync`` (default: fsync the
    directory) before the fsync counts as done. Until then a machine crash may leave the
    file missing or blank; the caller decides whether that is safe to start over from.

    With ``read_only=True`` the file is never created, cut, fsynced, locked or written, and
    may be missing (an empty log) or, with ``empty_if_blank`` (a flag, or a function asked
    only when the file is not a readable log), blank; a torn tail is left
    where it is and not read (another process may be appending). Appends are kept in
    memory only, for this object's life (the bookkeeping of a read-only session), and
    :meth:`flush` does nothing. The records read are those of the file as it was opened.
    """

    MAGIC = b"MOSLOG"
    VERSION = 1
    KIND = "record log"
    #: Whether this log keeps marks and a checkpoint (``<name>.ckpt``, written at each clean
    #: close, never fsynced): an open that finds the file exactly as the checkpoint
    #: describes it trusts the checkpoint instead of validating every frame, and reads from
    #: a seq seek to the nearest mark. Only for logs never truncated (the archive): their
    #: opening would otherwise cost the whole history. Damage behind a trusted checkpoint
    #: is found when those records are read (``CorruptDataError``), not at open.
    CHECKPOINT = False

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        fsync: FsyncPolicy | str = "interval",
        interval: float = 0.1,
        sync_create: bool = True,
        on_first_sync: Callable[[], None] | None = None,
        read_only: bool = False,
        empty_if_blank: bool | Callable[[], bool] = False,
    ) -> None:
        if fsync not in FSYNC_POLICIES:
            raise ConfigError(f"fsync must be one of {', '.join(FSYNC_POLICIES)}, not {fsync!r}")
        if not (isinstance(interval, (int, float)) and interval > 0):
            raise ConfigError(f"fsync_interval_seconds must be a positive number, not {interval!r}")
        self.path = Path(path)
        self.fsync: str = fsync
        self.interval = float(interval)
        self.read_only = bool(read_only)
        self._lock = threading.Lock()  # guards the file position and the seq counters
        self._sync_lock = threading.Lock()  # one fsync at a time; always taken before _lock
        self._closed = True
        self._sync_error: OSError | None = None
        self._sync_create = sync_create
        self._on_first_sync = on_first_sync
        #: Created without fsync and not fsynced since (guarded by _sync_lock).
        self._created_unsynced = False
        #: Read-only: the descriptor every read goes through (None: no file), the records
        #: appended in memory, and the first seq not hidden by ``truncate_before``.
        self._fd: int | None = None
        self._overlay: list[tuple[int, bytes]] = []
        self._hide_below = 0
        #: Read-only: the records the opening scan read, kept for the first read (which
        #: is then served without reading the file a second time); None once used.
        self._kept: list[tuple[int, bytes]] | None = None
        if self.read_only:  # never registered as open: no key (realpath costs syscalls)
            self._file: io.FileIO | None = None
            self._open_read_only(empty_if_blank)
            self._closed = False
            return
        self._key = os.path.realpath(self.path)
        with _open_paths_lock:
            if self._key in _open_paths:
                raise StorageError(f"{self.path}: {self.KIND} is already open in this process")
            _open_paths.add(self._key)
        try:
            self._file = self._open()
        except BaseException:
            with _open_paths_lock:
                _open_paths.discard(self._key)
            raise
        self._closed = False
        if self.fsync == "interval":
            FLUSHER.register(self)

    # -- opening and recovery -------------------------------------------------------------

    def _open_read_only(self, empty_if_blank: bool | Callable[[], bool]) -> None:
        self._checkpoint_current = True
        self._marks: list[tuple[int, int]] = []
        self._base = self._last_seq = self._synced_seq = 0
        self._end = HEADER_SIZE
        self._last_offset = 0
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return
        except OSError as exc:
            raise StorageError(f"{self.path}: cannot read {self.KIND}: {exc}") from exc
        try:
            result = None
            kept: list[tuple[int, bytes]] | None = None
            if self.CHECKPOINT:
                result = _read_checkpoint(self.path, self.MAGIC, self.VERSION, self.KIND, fd)
            elif os.fstat(fd).st_size <= _KEEP_AT_OPEN_BYTES:
                # A read-only open is mostly followed by one read of every record (a
                # recovery, ``memoryos stats``): keep what the scan reads for it.
                kept = []
            if result is None:
                try:
                    result = scan(
                        self.path,
                        self.MAGIC,
                        self.VERSION,
                        self.KIND,
                        marks=self.CHECKPOINT,
                        fd=fd,
                        keep=kept,
                    )
                except CorruptDataError:
                    # A blank file has no readable header: only then is it worth asking
                    # whether blank is allowed (the caller's test may read other files).
                    if is_blank(self.path) and (
                        empty_if_blank() if callable(empty_if_blank) else empty_if_blank
                    ):
                        os.close(fd)
                        return
                    raise
            if result.bad_reason is not None:
                if result.later_valid:
                    raise self._refusal(result)
                log.debug(
                    "store_tail_ignored_read_only",
                    path=str(self.path),
                    kind=self.KIND,
                    offset=result.valid_end,
                    reason=result.bad_reason,
                )
        except OSError as exc:
            os.close(fd)
            raise StorageError(f"{self.path}: cannot read {self.KIND}: {exc}") from exc
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        self._base = result.base_seq
        self._last_seq = self._synced_seq = result.last_seq
        self._end = result.valid_end
        self._last_offset = result.last_offset
        self._marks = list(result.marks)
        self._kept = kept

    def _open(self) -> io.FileIO:
        tmp = tmp_path(self.path)
        if tmp.exists():  # an interrupted create or truncate; the real file is intact
            tmp.unlink()
        if not self.path.exists():
            self.path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(
                self.path,
                encode_header(self.MAGIC, self.VERSION, 0),
                self.KIND,
                durable=self._sync_create,
            )
            self._created_unsynced = not self._sync_create
        try:
            result = None
            if self.CHECKPOINT:
                result = _read_checkpoint(self.path, self.MAGIC, self.VERSION, self.KIND)
            #: The checkpoint on disk still describes the file (nothing appended since).
            self._checkpoint_current = result is not None
            if result is None:
                result = scan(self.path, self.MAGIC, self.VERSION, self.KIND, marks=self.CHECKPOINT)
        except OSError as exc:
            raise StorageError(f"{self.path}: cannot read {self.KIND}: {exc}") from exc
        if result.bad_reason is not None:
            if result.later_valid:
                # Not a crash's torn tail: cutting here would drop acknowledged records.
                raise self._refusal(result)
            self._cut_tail(result)
        self._base = result.base_seq
        self._last_seq = result.last_seq
        self._synced_seq = result.last_seq
        self._end = result.valid_end
        self._last_offset = result.last_offset
        self._marks = list(result.marks)
        # Unbuffered: each append is one write(2), so the record is in the page cache (and
        # survives a killed process) by the time append returns.
        f = open(self.path, "r+b", buffering=0)  # noqa: SIM115 - lives until close()
        f.seek(self._end)
        return f

    def _refusal(self, result: _Scan) -> CorruptDataError:
        """The error for damage with intact records after it (nothing was changed)."""
        lost = sum(d.lost_seqs for d in result.damage)
        ranges = ", ".join(f"{d.start}..{d.end}" for d in result.damage)
        log.error(
            "store_damage_refused",
            path=str(self.path),
            kind=self.KIND,
            offset=result.valid_end,
            reason=result.bad_reason,
            intact_records_after=result.intact_after,
            damaged_byte_ranges=ranges,
        )
        return CorruptDataError(
            f"{self.path}: {self.KIND} damaged at byte {result.valid_end} "
            f"({result.bad_reason}) with {result.intact_after} intact records after it "
            f"(damaged bytes {ranges}; {lost} records lost in between); nothing was changed: "
            "repair the user to keep every intact record (memoryos repair USER)",
            path=str(self.path),
            offset=result.valid_end,
            intact_after=result.intact_after,
        )

    def _cut_tail(self, result: _Scan) -> None:
        dropped = result.size - result.valid_end
        fields = {
            "path": str(self.path),
            "kind": self.KIND,
            "offset": result.valid_end,
            "dropped_bytes": dropped,
            "last_valid_seq": result.last_seq,
            "reason": result.bad_reason,
        }
        if result.bad_reason in ("truncated frame header", "truncated record"):
            log.warning("store_torn_tail_truncated", **fields)
        else:
            # The last record is whole but wrong: still the tail, still cut (a crash can
            # leave a frame's length written and its bytes not), but keep a copy.
            backup = self.path.with_name(f"{self.path.name}.corrupt-{int(time.time() * 1000)}")
            shutil.copy2(self.path, backup)
            fsync_dir(self.path.parent)
            log.error("store_damaged_tail_cut", backup=str(backup), **fields)
        with open(self.path, "r+b") as f:
            f.truncate(result.valid_end)
            f.flush()
            os.fsync(f.fileno())

    # -- appending -------------------------------------------------------------------------

    @property
    def last_seq(self) -> int:
        """Sequence number of the newest record (the base seq when the log holds none)."""
        with self._lock:
            return self._last_seq

    @property
    def first_seq(self) -> int:
        """Sequence number the oldest kept record has (or would have)."""
        with self._lock:
            return self._base + 1

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` has been called."""
        return self._closed

    def _append_payload(self, payload: bytes) -> int:
        if self.read_only:
            with self._lock:
                self._check_usable()
                self._last_seq += 1
                self._overlay.append((self._last_seq, payload))
                return self._last_seq
        with self._lock:
            self._check_usable()
            seq = self._last_seq + 1
            frame = encode_frame(seq, payload)
            # Write at the accounted end with pwrite, never at "the file position": if the
            # writing thread is interrupted (an actor killed mid-message) after the bytes
            # land but before the two lines below, the next append simply overwrites that
            # unacknowledged frame, and the file stays a sequence of whole frames.
            fd = self._writer().fileno()
            try:
                view = memoryview(frame)
                at = self._end
                while view:
                    written = os.pwrite(fd, view, at)
                    view = view[written:]
                    at += written
            except OSError as exc:
                # Cut a partial frame off so the file stays a sequence of whole frames.
                try:
                    self._writer().truncate(self._end)
                except OSError:
                    self._sync_error = exc
                raise StorageError(f"{self.path}: append failed: {exc}") from exc
            self._last_offset = self._end
            self._checkpoint_current = False
            if self.CHECKPOINT and seq % MARK_EVERY == 0:
                self._marks.append((seq, self._end))
            self._end += len(frame)
            self._last_seq = seq
        if self.fsync == "always":
            self._sync(seq)
        return seq

    def _writer(self) -> io.FileIO:
        """The file a writable log appends to (a read-only log reads through ``_fd``)."""
        if self._file is None:
            raise StorageError(f"{self.path}: {self.KIND} is open read-only")
        return self._file

    def _check_usable(self) -> None:
        if self._closed:
            raise StorageError(f"{self.path}: {self.KIND} is closed")
        if self._sync_error is not None:
            # After a failed fsync the page cache may have dropped our pages: keep refusing.
            raise StorageError(f"{self.path}: earlier write or fsync failed: {self._sync_error}")

    def _sync(self, seq: int) -> None:
        with self._sync_lock:
            if self._synced_seq >= seq:
                return  # another appender's fsync already covered our record
            with self._lock:
                self._check_usable()
                target = self._last_seq
                fd = self._writer().fileno()
            try:
                self._fsync(fd)
            except OSError as exc:
                self._sync_error = exc
                raise StorageError(f"{self.path}: fsync failed: {exc}") from exc
            self._synced_seq = target

    def _fsync(self, fd: int) -> None:
        """fsync the file; the first time after an unsynced creation, make its name durable
        too (caller holds ``_sync_lock``)."""
        os.fsync(fd)
        self._name_durable()

    def _name_durable(self) -> None:
        if self._created_unsynced:
            if self._on_first_sync is not None:
                self._on_first_sync()
            else:
                fsync_dir(self.path.parent)
            self._created_unsynced = False

    def sync_if_dirty(self) -> None:
        """Fsync if records were appended since the last fsync (the flusher's entry point)."""
        if self.read_only:
            return
        with self._sync_lock:
            with self._lock:
                if self._closed or self._sync_error is not None:
                    return
                target = self._last_seq
                fd = self._writer().fileno()
            if target <= self._synced_seq:
                return
            try:
                self._fsync(fd)
            except OSError as exc:
                self._sync_error = exc
                log.error("store_fsync_failed", path=str(self.path), error=str(exc))
                return
            self._synced_seq = target

    def flush(self) -> None:
        """Make every appended record durable now (fsync), whatever the fsync policy; a
        read-only log has nothing to make durable."""
        with self._lock:
            self._check_usable()
            seq = self._last_seq
        if not self.read_only:
            self._sync(seq)

    # -- reading ----------------------------------------------------------------------------

    def _iter_payloads(self, after_seq: int = 0) -> Iterator[tuple[int, bytes]]:
        overlay: list[tuple[int, bytes]] = []
        kept: list[tuple[int, bytes]] | None = None
        with self._lock:
            if self._closed:
                raise StorageError(f"{self.path}: {self.KIND} is closed")
            if self.read_only:
                after_seq = max(after_seq, self._hide_below - 1)
                overlay = list(self._overlay)
                kept, self._kept = self._kept, None
                # Reads see the file opened with the log, whatever another process renames
                # into place meanwhile (the records kept at open are that file's).
                f: io.BufferedReader | _Reader | None = (
                    None
                    if self._fd is None or kept is not None
                    else self._same_file_reader(self._fd)
                )
            else:
                # Opening under the lock pins the current file: a concurrent truncate
                # renames a new file into place, and this handle keeps reading the old,
                # complete one.
                f = open(self.path, "rb")  # noqa: SIM115 - closed below
            end = self._end
            start = None
            if self._marks and after_seq + 1 >= self._marks[0][0]:
                # The last mark at or before the first frame wanted (marks only grow).
                i = bisect.bisect_right(self._marks, (after_seq + 1, end)) - 1
                start = self._marks[i]
        if kept is not None:
            yield from ((seq, payload) for seq, payload in kept if seq > after_seq)
        if f is not None:
            try:
                yield from self._disk_payloads(f, after_seq, end, start)
            finally:
                if not isinstance(f, _Reader):
                    f.close()
        for seq, payload in overlay:
            if seq > after_seq:
                yield seq, payload

    def _same_file_reader(self, fd: int) -> io.BufferedReader | _Reader:
        """A buffered reader of the file open at ``fd`` with its own offset (the path
        opened again, if it still names that file), else a ``pread`` view of ``fd``."""
        try:
            f = open(self.path, "rb")  # noqa: SIM115 - closed by the caller
        except OSError:
            return _Reader(fd)
        mine, theirs = os.fstat(fd), os.fstat(f.fileno())
        if (mine.st_ino, mine.st_dev) == (theirs.st_ino, theirs.st_dev):
            return f
        f.close()
        return _Reader(fd)

    def _disk_payloads(
        self,
        f: io.BufferedReader | _Reader,
        after_seq: int,
        end: int,
        start: tuple[int, int] | None,
    ) -> Iterator[tuple[int, bytes]]:
        prev = read_header(f, self.path, self.MAGIC, self.VERSION, self.KIND)
        offset = HEADER_SIZE
        if start is not None:
            prev, offset = start[0] - 1, start[1]
            f.seek(offset)
        while offset < end:
            if prev + 1 <= after_seq:
                head = f.read(_FRAME.size)
                if len(head) == _FRAME.size:
                    length, _crc, seq = _FRAME.unpack(head)
                    if seq == prev + 1 and 0 < length <= MAX_RECORD_BYTES:
                        f.seek(length, os.SEEK_CUR)
                        offset += _FRAME.size + length
                        prev = seq
                        continue
                f.seek(offset)
            got = read_frame(f, offset, end, prev)
            if isinstance(got, str):
                raise self._damage_found(f, offset, end, prev, got)
            prev, payload = got
            offset += _FRAME.size + len(payload)
            if prev > after_seq:
                yield prev, payload

    def _damage_found(
        self, f: io.BufferedReader | _Reader, offset: int, end: int, prev: int, reason: str
    ) -> CorruptDataError:
        """The error for damage met while reading (behind a trusted checkpoint, or
        appeared since the log was opened)."""
        fd = f.fd if isinstance(f, _Reader) else f.fileno()
        try:
            _damages, frames = walk_damaged(fd, offset, end, prev, reason)
            after: int | None = len(frames)
        except OSError:
            after = None
        return CorruptDataError(
            f"{self.path}: {self.KIND} damaged at byte {offset}: {reason}"
            + (
                ""
                if not after
                else f", with {after} intact records after it; repair the "
                "user to keep them (memoryos repair USER)"
            ),
            path=str(self.path),
            offset=offset,
            intact_after=after,
        )

    def _iter_records(self, after_seq: int = 0) -> Iterator[tuple[int, dict[str, Any]]]:
        for seq, payload in self._iter_payloads(after_seq):
            yield seq, unpack_record(payload, self.path, seq)

    # -- closing ----------------------------------------------------------------------------

    def close(self) -> None:
        """Fsync (unless the policy is ``"never"``) and close; idempotent. A read-only log
        just lets go of its file and of what was appended in memory."""
        if self.read_only:
            with self._lock:
                if self._closed:
                    return
                self._closed = True
                fd, self._fd = self._fd, None
                self._overlay = []
            if fd is not None:
                os.close(fd)
            return
        if self.fsync == "interval":
            FLUSHER.unregister(self)  # before our locks: the flusher may be waiting on them
        with self._sync_lock, self._lock:
            if self._closed:
                return
            self._closed = True
            try:
                if self.fsync != "never" and self._sync_error is None:
                    self._fsync(self._writer().fileno())
            finally:
                self._writer().close()
                try:
                    if (
                        self.CHECKPOINT
                        and self._sync_error is None
                        and not self._checkpoint_current
                    ):
                        self._write_checkpoint()
                finally:
                    with _open_paths_lock:
                        _open_paths.discard(self._key)

    def _write_checkpoint(self) -> None:
        """Describe the closed file for the next open (see ``CHECKPOINT``); best effort."""
        try:
            st = self.path.stat()
            if st.st_size != self._end:
                return
            data = {
                "v": 1,
                "file": _file_identity(st),
                "base": self._base,
                "last_seq": self._last_seq,
                "last_off": self._last_offset,
                "marks": self._marks,
            }
            atomic_write(
                checkpoint_path(self.path), msgpack.packb(data), "checkpoint", durable=False
            )
        except (OSError, StorageError) as exc:
            log.warning("store_checkpoint_failed", path=str(self.path), error=str(exc))

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self.path)!r}, fsync={self.fsync!r})"
