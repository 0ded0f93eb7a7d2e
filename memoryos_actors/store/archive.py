"""The per-user archive: an append-only log of evicted segments and pages.

Nothing a user gave is dropped silently: when MTM evicts a segment, or a full segment pushes
out its oldest pages, the records land here. The archive uses the same framing as the WAL
(length, CRC32, sequence number, msgpack) with its own magic, and is never truncated; only
:meth:`UserStore.forget <memoryos_actors.store.userstore.UserStore.forget>` deletes it.

An archive opened with ``enabled=False`` (``MemoryConfig.archive_enabled = False``) accepts
appends and drops them, but still reads whatever an earlier run archived.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self

from memoryos_actors.errors import InvalidInput, StorageError
from memoryos_actors.store._frames import pack_record
from memoryos_actors.store._framing import FsyncPolicy, RecordLog
from memoryos_actors.store.formats import (
    LOST_RECORD,
    ArchiveRecord,
    archive_keywords,
    decode_archived,
    encode_archived,
    is_archive_placeholder,
)

__all__ = ["LOST_RECORD", "Archive", "ArchiveHit", "ArchiveLog"]


@dataclass(frozen=True, slots=True)
class ArchiveHit:
    """One archive search result: the record, its sequence number and how well it matched.

    ``score`` is the number of query keywords found (keyword search) or the number of
    occurrences of the substring (substring search).
    """

    seq: int
    record: dict[str, Any]
    score: float


class ArchiveLog(RecordLog):
    """The framed file behind an :class:`Archive` (different magic from the WAL)."""

    MAGIC = b"MOSARC"
    VERSION = 1
    KIND = "archive"
    CHECKPOINT = True  # never truncated, grows with the whole history


def _strings(value: Any) -> Iterator[str]:
    """Every string inside a record (map keys excluded), depth first."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _strings(item)


class Archive:
    """Append-only archive of ``dict`` records at ``path``; thread-safe.

    The file is created on the first append (so a user with nothing archived has no archive
    file), after calling ``before_create`` (the store makes a new user's directory durable
    there). ``fsync`` and ``interval`` (seconds) work as for the WAL. With ``read_only``
    the file is never created nor changed; appends are kept in memory (see
    :class:`~memoryos_actors.store._framing.RecordLog`).

    Records of type ``"lost"`` are placeholders a repair wrote for records that damage
    destroyed (their seqs stay taken); :meth:`iter` and :meth:`search` leave them out.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        enabled: bool = True,
        fsync: FsyncPolicy | str = "interval",
        interval: float = 0.1,
        before_create: Callable[[], None] | None = None,
        read_only: bool = False,
    ) -> None:
        self.path = Path(path)
        self.enabled = enabled
        self.read_only = read_only
        self._fsync = fsync
        self._interval = interval
        self._before_create = before_create
        self._log: ArchiveLog | None = None
        self._open_lock = threading.Lock()
        if self.path.exists():
            # Open (and so validate and recover) existing archives up front: damage is
            # reported when the user's store opens, not at some later eviction.
            self._log = ArchiveLog(self.path, fsync=fsync, interval=interval, read_only=read_only)

    def _ensure_log(self) -> ArchiveLog:
        with self._open_lock:
            if self._log is None and self.read_only:
                # Nothing on disk: an empty log that keeps its appends in memory.
                self._log = ArchiveLog(
                    self.path, fsync=self._fsync, interval=self._interval, read_only=True
                )
            if self._log is None:
                if self._before_create is not None:
                    try:
                        self._before_create()
                    except OSError as exc:
                        raise StorageError(f"{self.path}: fsync failed: {exc}") from exc
                self._log = ArchiveLog(self.path, fsync=self._fsync, interval=self._interval)
            return self._log

    def append(self, record: ArchiveRecord | dict[str, Any]) -> int:
        """Archive ``record``; return its sequence number (0 when the archive is disabled).

        A typed record is encoded by :mod:`~memoryos_actors.store.formats`; a plain dict is
        written as it is (the framed log under the records, for tools and tests).

        Raises :class:`InvalidInput` for records that are not msgpack-encodable dicts.
        """
        payload = pack_record(
            encode_archived(record)
        )  # validate even when disabled: same contract either way
        if not self.enabled:
            return 0
        return self._ensure_log().append_payload(payload)

    def __len__(self) -> int:
        """Number of archived records."""
        if self._log is None:
            return 0
        return self._log.last_seq - self._log.first_seq + 1

    def iter(self, after_seq: int = 0) -> Iterator[tuple[int, dict[str, Any]]]:
        """Yield ``(seq, map)`` for every archived record after ``after_seq``, oldest first,
        as the file holds it (:meth:`records` gives them typed)."""
        if self._log is None:
            return iter(())
        return (
            item
            for item in self._log.iter_records(after_seq)
            if not is_archive_placeholder(item[1])
        )

    def records(self, after_seq: int = 0) -> Iterator[tuple[int, ArchiveRecord]]:
        """Yield ``(seq, record)``, typed (:func:`~memoryos_actors.store.formats.
        decode_archived`), for every archived record after ``after_seq`` that holds items,
        oldest first (a kind of a later version is left out)."""
        for seq, raw in self.iter(after_seq):
            record = decode_archived(raw)
            if record is not None:
                yield seq, record

    def search(self, query_kw: Iterable[str], limit: int = 10) -> list[ArchiveHit]:
        """Records matching the most of ``query_kw`` (lower-case keywords), best first.

        A keyword matches when it is in the record's ``keywords`` list or occurs in any of the
        record's strings (case-insensitive). Ties go to the newest record. Records matching no
        keyword are left out. Reads the whole archive: O(archive size).
        """
        if isinstance(query_kw, str):
            raise InvalidInput("query_kw must be a collection of keywords, not one str")
        if limit < 0:
            raise InvalidInput(f"limit must be >= 0, not {limit}")
        query = frozenset(k.lower() for k in query_kw if k)
        if not query or limit == 0:
            return []
        hits: list[ArchiveHit] = []
        for seq, record in self.iter():
            own = archive_keywords(record)
            rest = query - own
            score = len(query) - len(rest)
            if rest:
                text = "\n".join(_strings(record)).lower()
                score += sum(1 for k in rest if k in text)
            if score:
                hits.append(ArchiveHit(seq, record, float(score)))
        hits.sort(key=lambda h: (-h.score, -h.seq))
        return hits[:limit]

    def flush(self) -> None:
        """Make every archived record durable now (fsync)."""
        if self._log is not None:
            self._log.flush()

    def close(self) -> None:
        """Close the file (fsync unless the policy is ``"never"``); idempotent."""
        if self._log is not None:
            self._log.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
