"""Framed, checksummed record logs: the machinery shared by the WAL and the archive.

The file format is :mod:`memoryos_actors.store._frames`'s; the reading at open (scan,
damage, checkpoint) :mod:`memoryos_actors.store._recovery`'s.

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
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Literal, Self

from memoryos_actors.errors import ConfigError, CorruptDataError, StorageError
from memoryos_actors.logs import lazy_logger
from memoryos_actors.store._files import atomic_write, fsync_dir, is_blank, tmp_path
from memoryos_actors.store._flusher import FLUSHER
from memoryos_actors.store._frames import (
    _FRAME,
    HEADER_SIZE,
    MAX_RECORD_BYTES,
    PreadReader,
    encode_frame,
    encode_header,
    read_frame,
    read_header,
    unpack_record,
)
from memoryos_actors.store._recovery import (
    KEEP_AT_OPEN_BYTES,
    cut_tail,
    read_checkpoint,
    refusal,
    scan,
    walk_damaged,
    write_checkpoint,
)

__all__ = ["FSYNC_POLICIES", "MARK_EVERY", "FsyncPolicy", "RecordLog", "log"]

# Lazy: readers such as ``memoryos stats`` import structlog only if they log something.
log = lazy_logger("memoryos.store")

FsyncPolicy = Literal["always", "interval", "never"]
FSYNC_POLICIES: tuple[str, ...] = ("always", "interval", "never")

MARK_EVERY = 256
"""A log that keeps marks remembers where every ``MARK_EVERY``-th frame starts, so reading
from a given seq seeks close to it instead of walking every frame before it."""

_open_paths: set[str] = set()
_open_paths_lock = threading.Lock()


class RecordLog:
    """An append-only file of framed msgpack records with consecutive sequence numbers.

    Opening checks the file. An incomplete last record (the file ends inside it, or its
    end is zero bytes from a sector boundary on: never written) is a torn tail, the end
    of a write a crash cut short: it is cut off and logged (a copy of the file is kept
    beside it as ``<name>.corrupt-<unix ms>`` unless the file simply ended early).
    Damage with intact records after it, or a whole last record that fails its checksum
    or sequence check, is not a crash's doing (media damage, a stray write): opening
    raises :class:`CorruptDataError` naming the file, the byte offset and how many intact
    records follow, and changes nothing; :func:`memoryos_actors.repair.repair_user`
    salvages them. A file that exists but
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
    where it is and not read (another process may be appending: its record is then
    incomplete, never whole and wrong, which is refused as above). Appends are kept in
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
                result = read_checkpoint(self.path, self.MAGIC, self.VERSION, self.KIND, fd)
            elif os.fstat(fd).st_size <= KEEP_AT_OPEN_BYTES:
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
                        marks=MARK_EVERY if self.CHECKPOINT else 0,
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
                if not result.torn:
                    raise refusal(self.path, self.KIND, result)
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
                result = read_checkpoint(self.path, self.MAGIC, self.VERSION, self.KIND)
            #: The checkpoint on disk still describes the file (nothing appended since).
            self._checkpoint_current = result is not None
            if result is None:
                result = scan(
                    self.path,
                    self.MAGIC,
                    self.VERSION,
                    self.KIND,
                    marks=MARK_EVERY if self.CHECKPOINT else 0,
                )
        except OSError as exc:
            raise StorageError(f"{self.path}: cannot read {self.KIND}: {exc}") from exc
        if result.bad_reason is not None:
            if not result.torn:
                # Not a crash's torn tail: cutting here would drop acknowledged records.
                raise refusal(self.path, self.KIND, result)
            cut_tail(self.path, self.KIND, result)
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

    def append_payload(self, payload: bytes) -> int:
        """Append one encoded record (a msgpack map) and return its seq once it is as
        durable as the fsync policy says (the subclasses encode: WAL, archive)."""
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
                f: io.BufferedReader | PreadReader | None = (
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
                if not isinstance(f, PreadReader):
                    f.close()
        for seq, payload in overlay:
            if seq > after_seq:
                yield seq, payload

    def _same_file_reader(self, fd: int) -> io.BufferedReader | PreadReader:
        """A buffered reader of the file open at ``fd`` with its own offset (the path
        opened again, if it still names that file), else a ``pread`` view of ``fd``."""
        try:
            f = open(self.path, "rb")  # noqa: SIM115 - closed by the caller
        except OSError:
            return PreadReader(fd)
        mine, theirs = os.fstat(fd), os.fstat(f.fileno())
        if (mine.st_ino, mine.st_dev) == (theirs.st_ino, theirs.st_dev):
            return f
        f.close()
        return PreadReader(fd)

    def _disk_payloads(
        self,
        f: io.BufferedReader | PreadReader,
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
        self, f: io.BufferedReader | PreadReader, offset: int, end: int, prev: int, reason: str
    ) -> CorruptDataError:
        """The error for damage met while reading (behind a trusted checkpoint, or
        appeared since the log was opened)."""
        fd = f.fd if isinstance(f, PreadReader) else f.fileno()
        try:
            _damages, frames = walk_damaged(fd, offset, end, prev, reason)
            after: int | None = len(frames)
        except OSError:
            after = None
        return CorruptDataError(
            f"{self.path}: {self.KIND} damaged at byte {offset}: {reason}"
            + (
                "; repair the user to keep every intact record (memoryos repair USER)"
                if not after
                else f", with {after} intact records after it; repair the "
                "user to keep them (memoryos repair USER)"
            ),
            path=str(self.path),
            offset=offset,
            intact_after=after,
        )

    def iter_records(self, after_seq: int = 0) -> Iterator[tuple[int, dict[str, Any]]]:
        """Yield ``(seq, map)`` for every record after ``after_seq``, in order, as the file
        holds it (the subclasses decode: WAL, archive)."""
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
                        write_checkpoint(
                            self.path,
                            self._end,
                            self._base,
                            self._last_seq,
                            self._last_offset,
                            self._marks,
                        )
                finally:
                    with _open_paths_lock:
                        _open_paths.discard(self._key)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self.path)!r}, fsync={self.fsync!r})"
