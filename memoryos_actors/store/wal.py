"""The per-user write-ahead log.

Every change to a user's memory is appended here before the caller is acknowledged. Each
record gets a log sequence number (LSN), increasing by one from 1 across the file's whole
life (dropping old records with :meth:`WAL.truncate_before` never restarts the numbering).
The file format, recovery rules and fsync policies are described in
:mod:`memoryos_actors.store._framing`; in short:

* ``fsync="always"``: :meth:`WAL.append` returns after the record is on stable storage;
* ``fsync="interval"`` (default): the record is in the OS page cache when ``append`` returns,
  so a killed process loses nothing acknowledged; a machine crash or power loss may lose up to
  ``interval`` seconds of acknowledged records. One shared background thread fsyncs every
  dirty WAL; it runs only while such a WAL is open;
* ``fsync="never"``: the operating system decides when to write back.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Any, BinaryIO

from memoryos_actors.errors import StorageError
from memoryos_actors.store._files import atomic_write
from memoryos_actors.store._frames import (
    _FRAME,
    HEADER_SIZE,
    encode_header,
    pack_record,
    read_frame,
    read_header,
)
from memoryos_actors.store._framing import FsyncPolicy, RecordLog, log
from memoryos_actors.store.formats import WalRecord, decode_wal, encode_wal

__all__ = ["WAL"]


class WAL(RecordLog):
    """A write-ahead log of msgpack ``dict`` records at ``path``; thread-safe.

    ``fsync`` is ``"always"``, ``"interval"`` or ``"never"``; ``interval`` is the flusher
    period in seconds for ``"interval"``. The file is created if missing and recovered if it
    exists (torn tails cut, damaged files backed up, see :class:`RecordLog`, which also
    describes ``sync_create``, ``on_first_sync``, ``read_only`` and ``empty_if_blank``).
    Damage with intact records after it is refused with :class:`CorruptDataError`.
    """

    MAGIC = b"MOSWAL"
    VERSION = 1
    KIND = "WAL"

    def __init__(
        self,
        path: str | os.PathLike[str],
        fsync: FsyncPolicy | str = "interval",
        interval: float = 0.1,
        *,
        sync_create: bool = True,
        on_first_sync: Callable[[], None] | None = None,
        read_only: bool = False,
        empty_if_blank: bool | Callable[[], bool] = False,
    ) -> None:
        super().__init__(
            path,
            fsync=fsync,
            interval=interval,
            sync_create=sync_create,
            on_first_sync=on_first_sync,
            read_only=read_only,
            empty_if_blank=empty_if_blank,
        )

    @property
    def last_lsn(self) -> int:
        """LSN of the newest record (0 for a new WAL; kept after all records were truncated)."""
        return self.last_seq

    def append(self, record: WalRecord | dict[str, Any]) -> int:
        """Append ``record`` and return its LSN once it is as durable as the fsync policy says.

        A typed record (:data:`~memoryos_actors.store.formats.WalRecord`) is encoded by
        :mod:`~memoryos_actors.store.formats`; a plain dict is written as it is (the framed
        log under the records, for tools and tests).

        Raises :class:`InvalidInput` if the record is not a msgpack-encodable dict or is over
        16 MiB encoded, and :class:`StorageError` if the write fails or the WAL is closed.
        """
        return self.append_payload(pack_record(encode_wal(record)))

    def records(self, after_lsn: int = 0) -> Iterator[tuple[int, WalRecord]]:
        """Yield ``(lsn, record)``, typed (:func:`~memoryos_actors.store.formats.decode_wal`),
        for every record with an LSN above ``after_lsn``, in order (as :meth:`read`)."""
        for lsn, raw in self.iter_records(after_lsn):
            yield lsn, decode_wal(raw)

    def read(self, after_lsn: int = 0) -> Iterator[tuple[int, dict[str, Any]]]:
        """Yield ``(lsn, map)`` for every record with an LSN above ``after_lsn``, in order:
        the maps as the file holds them (:meth:`records` gives them typed).

        Sees the records appended before iteration starts. Raises :class:`CorruptDataError`
        naming the file if damage appeared after the WAL was opened.
        """
        return self.iter_records(after_lsn)

    def truncate_before(self, lsn: int) -> None:
        """Drop every record with an LSN below ``lsn``, atomically.

        Call this only once a snapshot covering those records is durable. The kept records
        are copied to a temporary file which is fsynced and renamed over the WAL, so a crash at
        any moment leaves either the old or the new file, never a mix. LSNs continue from
        where they were; if ``lsn`` is beyond the newest record, the WAL ends up empty and the
        next append gets ``lsn`` (used when a snapshot covers more than the WAL kept).

        A read-only WAL leaves the file alone and only stops showing those records.
        """
        if self.read_only:
            with self._lock:
                self._check_usable()
                if lsn > self._base + 1:
                    self._hide_below = max(self._hide_below, lsn)
                    self._base = lsn - 1
                    self._last_seq = max(self._last_seq, self._base)
            return
        with self._sync_lock, self._lock:
            self._check_usable()
            keep_from = lsn
            if keep_from <= self._base + 1:
                return
            offset = self._offset_of(keep_from) if keep_from <= self._last_seq else self._end
            end = self._end

            def copy_tail(dst: BinaryIO) -> None:
                dst.write(encode_header(self.MAGIC, self.VERSION, keep_from - 1))
                with open(self.path, "rb") as src:
                    src.seek(offset)
                    remaining = end - offset
                    while remaining > 0:
                        chunk = src.read(min(remaining, 1024 * 1024))
                        if not chunk:
                            raise OSError("the file shrank during the truncate")
                        dst.write(chunk)
                        remaining -= len(chunk)

            atomic_write(self.path, copy_tail, "truncated WAL")
            self._writer().close()
            self._file = open(self.path, "r+b", buffering=0)  # noqa: SIM115 - until close()
            self._end = HEADER_SIZE + (self._end - offset)
            self._file.seek(self._end)
            dropped = min(keep_from - 1, self._last_seq) - self._base
            self._base = keep_from - 1
            self._last_seq = max(self._last_seq, self._base)
            self._synced_seq = self._last_seq  # the renamed file was fsynced whole
            try:
                self._name_durable()
            except OSError as exc:
                self._sync_error = exc
                raise StorageError(f"{self.path}: fsync failed: {exc}") from exc
        log.debug(
            "wal_truncated", path=str(self.path), dropped_records=dropped, first_lsn=keep_from
        )

    def _offset_of(self, seq: int) -> int:
        """Byte offset of the frame numbered ``seq`` (caller holds the locks)."""
        with open(self.path, "rb") as f:
            prev = read_header(f, self.path, self.MAGIC, self.VERSION, self.KIND)
            offset = HEADER_SIZE
            while prev + 1 < seq and offset < self._end:
                head = f.read(_FRAME.size)
                if len(head) < _FRAME.size:
                    break
                length = _FRAME.unpack(head)[0]
                f.seek(length, os.SEEK_CUR)
                offset += _FRAME.size + length
                prev += 1
            if prev + 1 != seq:
                f.seek(offset)
                got = read_frame(f, offset, self._end, prev)
                raise StorageError(f"{self.path}: cannot find LSN {seq} ({got})")
        return offset
