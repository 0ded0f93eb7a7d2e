"""The cold tier's index: what left the hot tiers, searchable, derived from the archive.

The archive (:mod:`~memoryos_actors.store.archive`) stays the source of truth. This module
keeps beside it, in ``cold.db`` (SQLite, standard library), one row per archived *item*:

* every page of an evicted segment and every page pushed out of a full segment
  (``kind="page"``, ``item_id`` = page id), with its segment, time, keywords and embedding;
* every KB fact and agent trait pushed out of LPM's FIFOs (``kind="fact"`` /
  ``"agent_trait"``).

Lexical side: an FTS5 table over each item's index terms (the same stemmed terms the hot
tier's BM25 uses, :func:`~memoryos_actors.lexicon.terms`) finds candidates; a ``df`` table
and the document count and total length let the caller score them with one BM25 over hot
and cold documents together. Vector side: each row keeps its embedding as float16 bytes
(half the size; cosine changes by < 1e-3 on unit vectors), read only for the candidates the
lexical side found and their neighbouring turns. There is no vector index over the cold
tier: an ANN graph must live in memory whole and grows with history, a memory-mapped matrix
scan costs O(history) per query; both break "an active user's cold index costs bounded
memory, independent of history". SQLite's page cache is bounded (``CACHE_KIB``) and a
passive user's index is closed.

Recovery: the database records the last archive sequence number it indexed. When it is
opened it indexes whatever the archive holds beyond that (a crash between an archive
append and the index update, an import that appended records); when the file is missing,
unreadable, of another format or another user's, it is deleted and rebuilt from the
archive. Any SQLite error while in use marks it damaged and triggers the same rebuild.

This module holds :class:`ColdIndex` (the connection, its recovery and the queries);
beside it, :mod:`~memoryos_actors.store.cold_rows` (an item's rows and the items of an
archive record), :mod:`~memoryos_actors.store.cold_schema` (the tables and their upgrades),
:mod:`~memoryos_actors.store.cold_write` (new items and edits) and
:mod:`~memoryos_actors.store.cold_query` (which FTS5 matches a query runs).
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, Literal, TypeVar, overload

from memoryos_actors.cold_items import ColdCandidates, ColdItem, ColdRow
from memoryos_actors.errors import StorageError
from memoryos_actors.store import cold_read
from memoryos_actors.store._framing import log
from memoryos_actors.store.cold_aside import BUSY_TIMEOUT_S, AsideReader
from memoryos_actors.store.cold_query import find_items
from memoryos_actors.store.cold_rows import KIND_TOKENS, record_items
from memoryos_actors.store.cold_schema import FORMAT, cand_at, create_schema, upgrade
from memoryos_actors.store.cold_write import apply_edits, insert_items
from memoryos_actors.store.edits import EditLog
from memoryos_actors.store.formats import ArchiveRecord, decode_archived

__all__ = ["CACHE_KIB", "COLD_FILE", "ColdIndex"]

_T = TypeVar("_T")

COLD_FILE = "cold.db"
"""File name of a user's cold index inside the user directory."""

CACHE_KIB = 2048
"""SQLite page cache per open cold index, KiB (bounds the index's memory)."""


class _Damaged(Exception):
    pass


class ColdIndex:
    """The cold index of one user at ``path``, kept in step with ``archive``; thread-safe.

    Nothing is opened until first use (:meth:`add`, :meth:`search`, ...), so a user whose
    hot tiers never evicted anything has no index file. ``user_id`` is recorded in the file
    and checked on open (a file of another user is rebuilt).

    With ``read_only`` the file is never created, changed or deleted: the index lives in
    memory, copied from the file when it is readable (else built from the archive), and
    brought up to date there.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        archive: Any,
        user_id: str,
        edits: Callable[[], EditLog] | None = None,
        *,
        read_only: bool = False,
    ) -> None:
        self.path = Path(path)
        self.read_only = read_only
        self.archive = archive
        self.user_id = user_id
        #: The user's per-memory edits: applied to archive records as they are indexed,
        #: and to indexed items as edits arrive (``edits_applied`` of them so far).
        self._edits = edits
        self._edits_applied = 0
        self._db: sqlite3.Connection | None = None
        self._lock = threading.RLock()
        #: The second, read-only connection: searches for archived facts and traits (LPM's,
        #: beside MTM's for pages) run on it, under its own lock.
        self._aside = None if read_only else AsideReader(self.path)
        self._indexed = 0
        self._n_docs = 0
        self._total_len = 0
        #: Items of each kind, for the kinds counted so far on the open database (a kind
        #: is counted from its FTS5 token the first time a query asks for it alone, then
        #: kept up to date): a query for facts of a user who has none costs nothing.
        self._kind_n: dict[str, int] = {}
        self.rebuilds = 0
        #: Read-only mode: whether the file on disk may still be copied from.
        self._disk_usable = True

    # -- opening, rebuilding -------------------------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        if self.read_only:
            return self._connect_in_memory()
        db = sqlite3.connect(
            str(self.path), check_same_thread=False, isolation_level=None, timeout=BUSY_TIMEOUT_S
        )
        db.execute(f"PRAGMA cache_size=-{CACHE_KIB}")
        # Derived data: losing the last transactions in a machine crash only means
        # re-indexing the archive's tail on the next open.
        db.execute("PRAGMA synchronous=OFF")
        return db

    def _connect_in_memory(self) -> sqlite3.Connection:
        """A private in-memory database holding a copy of the file (read-only mode): the
        file is opened with SQLite's ``mode=ro``, never written; an unreadable file gives
        an empty database (``_open`` then finds no meta and builds the index)."""
        db = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
        if self._disk_usable and self.path.exists():
            try:
                src = sqlite3.connect(self.path.resolve().as_uri() + "?mode=ro", uri=True)
                try:
                    src.backup(db)
                finally:
                    src.close()
            except sqlite3.DatabaseError as exc:
                log.warning("cold_index_copy_failed", path=str(self.path), reason=str(exc))
                db.close()
                self._disk_usable = False
                db = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
        return db

    def _connect_loaded(self, fresh: bool) -> sqlite3.Connection:
        """A connection with the meta loaded (the schema made when ``fresh``); closed again
        if that fails (a full disk, damage), never left open on a file about to go."""
        db = self._connect()
        try:
            self._load_meta(db, fresh)
        except BaseException:
            db.close()
            raise
        return db

    def _open(self) -> sqlite3.Connection:
        if self._db is not None:
            return self._db
        fresh = (
            not self.path.exists()
            if not self.read_only
            else not (self._disk_usable and self.path.exists())
        )
        try:
            db = self._connect_loaded(fresh)
        except (sqlite3.DatabaseError, _Damaged) as exc:
            if not fresh:
                log.warning("cold_index_rebuilt", path=str(self.path), reason=str(exc))
            self._delete_files()
            self.rebuilds += 0 if fresh else 1
            db = self._connect_loaded(True)
        self._db = db
        self._catch_up()
        self._sync_edits()
        return db

    def _load_meta(self, db: sqlite3.Connection, fresh: bool) -> None:
        if fresh:
            create_schema(db, self.user_id, len(self._edits()) if self._edits is not None else 0)
        meta = dict(db.execute("SELECT key, value FROM meta").fetchall())
        if meta.get("format") != FORMAT:
            raise _Damaged(f"format {meta.get('format')!r}, expected {FORMAT}")
        if meta.get("user_id") != self.user_id:
            raise _Damaged(f"belongs to user {meta.get('user_id')!r}")
        if not fresh:
            upgrade(db, meta)
        try:
            self._indexed = int(meta["archive_seq"])
            self._n_docs = int(meta["n_docs"])
            self._total_len = int(meta["total_len"])
            self._edits_applied = int(meta.get("edits", 0))
        except (KeyError, TypeError, ValueError) as exc:
            raise _Damaged(f"meta incomplete: {exc!r}") from None
        self._kind_n = dict.fromkeys(KIND_TOKENS, 0) if fresh else {}
        last = self._archive_last()
        if self._indexed > last:
            raise _Damaged(f"indexed archive seq {self._indexed} beyond archive end {last}")

    def _archive_last(self) -> int:
        log_ = getattr(self.archive, "_log", None)
        return int(log_.last_seq) if log_ is not None else 0

    def _delete_files(self) -> None:
        if self.read_only:
            self._disk_usable = False  # rebuild in memory, leave the file alone
            return
        for suffix in ("", "-wal", "-shm", "-journal"):
            path = Path(str(self.path) + suffix)
            if path.is_dir() and not path.is_symlink():
                # Not a file this index wrote (a directory put in its place): the index
                # is derived, so it is rebuilt, but what is there is moved aside, never
                # deleted.
                aside = Path(f"{path}.aside-{int(time.time() * 1000)}")
                os.replace(path, aside)
                log.warning("cold_index_moved_aside", path=str(path), to=str(aside))
                continue
            with contextlib.suppress(FileNotFoundError):
                path.unlink()

    def _catch_up(self) -> None:
        if self._archive_last() <= self._indexed:
            return
        batch: list[tuple[int, ArchiveRecord]] = []
        for seq, rec in self.archive.records(after_seq=self._indexed):
            batch.append((seq, rec))
            if len(batch) >= 512:
                self._add_batch(batch)
                batch = []
        if batch:
            self._add_batch(batch)

    def _guard(self, fn: Callable[..., _T], *args: Any) -> _T:
        """Run ``fn`` on the open database; rebuild from the archive once if it is damaged."""
        with self._lock:
            try:
                self._open()
                return fn(*args)
            except sqlite3.DatabaseError as exc:
                log.warning("cold_index_rebuilt", path=str(self.path), reason=str(exc))
                self._drop_connection()
                self._delete_files()
                self.rebuilds += 1
                try:
                    self._open()
                    return fn(*args)
                except sqlite3.DatabaseError as exc2:
                    raise StorageError(f"{self.path}: cold index unusable: {exc2}") from exc2

    def _drop_connection(self) -> None:
        if self._aside is not None:
            self._aside.close()
        if self._db is not None:
            with contextlib.suppress(sqlite3.Error):
                self._db.close()
            self._db = None

    def _ready(self) -> sqlite3.Connection:
        """The open connection (inside :meth:`_guard`, which opens it)."""
        db = self._db
        assert db is not None
        return db

    def rebuild(self) -> int:
        """Delete the index and build it again from the archive; return the items indexed."""
        with self._lock:
            self._drop_connection()
            self._delete_files()
            self.rebuilds += 1
            self._open()
            return self._n_docs

    # -- writing -------------------------------------------------------------------------

    def add(self, seq: int, record: ArchiveRecord | dict[str, Any]) -> None:
        """Index archive record ``seq`` (call after appending it; older seqs are ignored).
        A map is decoded first (one that holds no item is only counted as indexed)."""
        typed = record if not isinstance(record, dict) else decode_archived(record)
        self._guard(self._add_batch, [(seq, typed)])

    def _add_batch(self, batch: Sequence[tuple[int, ArchiveRecord | None]]) -> None:

        db = self._db
        assert db is not None
        fresh = [(s, r) for s, r in batch if s > self._indexed]
        if not fresh:
            return
        # The archive may be ahead of the index (a record appended while it was closed):
        # index the gap first so archive order is kept.
        if fresh[0][0] > self._indexed + 1 and self._archive_last() >= fresh[0][0]:
            gap: list[tuple[int, ArchiveRecord | None]] = [
                (s, r) for s, r in self.archive.records(after_seq=self._indexed) if s < fresh[0][0]
            ]
            fresh = [*gap, *fresh]
        n_docs, total_len = self._n_docs, self._total_len
        kind_n = dict(self._kind_n)
        edits = self._edits() if self._edits is not None else None
        db.execute("BEGIN")
        try:
            items: list[ColdItem] = []
            for seq, found in fresh:
                rec = edits.apply_record(found) if edits and found is not None else found
                if rec is not None:  # None: everything in it was deleted (or it held none)
                    items.extend(record_items(seq, rec))
            delta = insert_items(db, items)
            n_docs += delta.n_docs
            total_len += delta.total_len
            df = delta.df
            for kind, n in delta.kinds.items():
                if kind in kind_n:
                    kind_n[kind] += n
            db.executemany(
                "INSERT INTO df VALUES (?, ?) ON CONFLICT(term) DO UPDATE SET n = n + excluded.n",
                df.items(),
            )
            last = fresh[-1][0]
            db.executemany(
                "UPDATE meta SET value = ? WHERE key = ?",
                [(last, "archive_seq"), (n_docs, "n_docs"), (total_len, "total_len")],
            )
            db.execute(
                "INSERT OR REPLACE INTO meta VALUES ('cand_at', ?)",
                (cand_at({"archive_seq": last, "edits": self._edits_applied}),),
            )
            db.execute("COMMIT")
        except BaseException:
            with contextlib.suppress(sqlite3.Error):
                db.execute("ROLLBACK")
            raise
        self._indexed, self._n_docs, self._total_len = last, n_docs, total_len
        self._kind_n = kind_n

    # -- per-memory edits ----------------------------------------------------------------

    def sync_edits(self) -> int:
        """Apply the user's edits the index has not seen yet (deleted items go, corrected
        ones change text and embedding); returns how many. An index of a passive user
        applies them when it is next opened."""
        if self._edits is None or (self._db is None and self._archive_last() == 0):
            return 0
        return int(self._guard(self._sync_edits))

    def _sync_edits(self) -> int:
        if self._edits is None:
            return 0
        records = self._edits().edits
        if len(records) <= self._edits_applied:
            return 0

        db = self._db
        assert db is not None
        todo = records[self._edits_applied :]
        n_docs, total_len = self._n_docs, self._total_len
        kind_n = dict(self._kind_n)
        db.execute("BEGIN")
        try:
            delta = apply_edits(db, todo)
            n_docs += delta.n_docs
            total_len += delta.total_len
            df = delta.df
            for kind, n in delta.kinds.items():
                if kind in kind_n:
                    kind_n[kind] += n
            db.executemany(
                "INSERT INTO df VALUES (?, ?) ON CONFLICT(term) DO UPDATE SET n = n + excluded.n",
                [(t, n) for t, n in df.items() if n],
            )
            db.execute("DELETE FROM df WHERE n <= 0")
            db.executemany(
                "INSERT OR REPLACE INTO meta VALUES (?, ?)",
                [
                    ("edits", len(records)),
                    ("n_docs", n_docs),
                    ("total_len", total_len),
                    ("cand_at", cand_at({"archive_seq": self._indexed, "edits": len(records)})),
                ],
            )
            db.execute("COMMIT")
        except BaseException:
            with contextlib.suppress(sqlite3.Error):
                db.execute("ROLLBACK")
            raise
        self._edits_applied, self._n_docs, self._total_len = len(records), n_docs, total_len
        self._kind_n = kind_n
        return len(todo)

    # -- reading -------------------------------------------------------------------------

    def __len__(self) -> int:
        """Items indexed (opens the index)."""
        return int(self._guard(lambda: self._n_docs))

    @property
    def is_open(self) -> bool:
        """Whether the database is open (a passive user's index is not)."""
        return self._db is not None

    def search(
        self,
        query_terms: Iterable[str],
        limit: int = 200,
        kinds: tuple[str, ...] = ("page",),
        *,
        light: bool = False,
    ) -> ColdCandidates:
        """The ``limit`` items of ``kinds`` that FTS5 ranks best for ``query_terms``: as
        :class:`ColdItem` s, or with ``light`` as :class:`ColdRow` s (what scoring needs,
        read from the narrow table; several times less to read).

        An empty archive answers without creating an index file.
        """
        qt = sorted({t for t in query_terms if t})
        if not qt or limit <= 0 or (self._db is None and self._archive_last() == 0):
            return ColdCandidates(n_docs=self._n_docs, total_len=self._total_len)
        if (
            self._db is not None
            and "page" not in kinds
            and self._archive_last() <= self._indexed
            and all(self._kind_n.get(k) == 0 for k in kinds)
        ):
            # None of these kinds indexed, nothing left to index: answered without the
            # lock (LPM's query for archived facts never waits for MTM's for pages).
            return ColdCandidates(n_docs=self._n_docs, total_len=self._total_len)
        if "page" not in kinds and not light:
            return self._search_aside(qt, limit, kinds)
        return self._guard(self._search, qt, limit, kinds, light)

    def _search(
        self, qt: list[str], limit: int, kinds: tuple[str, ...], light: bool = False
    ) -> ColdCandidates:
        self._catch_up()
        return find_items(
            self._ready(), qt, limit, kinds, light, self._n_docs, self._total_len, self._kind_count
        )

    def _search_aside(self, qt: list[str], limit: int, kinds: tuple[str, ...]) -> ColdCandidates:
        """A search for archived facts and traits on the second connection (see
        :mod:`~memoryos_actors.store.cold_aside`); on the main one in read-only mode (the
        index lives in memory) or when the second one fails."""
        if self._db is None or self._archive_last() > self._indexed:
            self._guard(self._catch_up)  # opens the index, indexes the archive's tail
        if self._aside is not None:
            try:
                return self._aside.run(
                    lambda db: find_items(
                        db,
                        qt,
                        limit,
                        kinds,
                        False,
                        self._n_docs,
                        self._total_len,
                        self._kind_count_aside,
                    )
                )
            except sqlite3.DatabaseError as exc:
                log.warning("cold_index_aside_failed", path=str(self.path), reason=str(exc))
        return self._guard(self._search, qt, limit, kinds, False)

    def _kind_count_aside(self, db: sqlite3.Connection, kind: str) -> int:
        """:meth:`_kind_count` on the second connection: a count is kept only when it is of
        the index as it stands (taken under the main lock, nothing indexed meanwhile)."""
        n = self._kind_n.get(kind)
        if n is not None:
            return n
        at = (self._indexed, self._edits_applied)
        row = db.execute(
            "SELECT count(*) FROM fts WHERE fts MATCH ?", ('"' + KIND_TOKENS[kind] + '"',)
        ).fetchone()
        n = int(row[0])
        if self._lock.acquire(blocking=False):
            try:
                if at == (self._indexed, self._edits_applied) and self._db is not None:
                    self._kind_n.setdefault(kind, n)
            finally:
                self._lock.release()
        return n

    def _kind_count(self, db: sqlite3.Connection, kind: str) -> int:
        """Items of ``kind`` in the index (counted from its FTS5 token once per open)."""
        n = self._kind_n.get(kind)
        if n is None:
            row = db.execute(
                "SELECT count(*) FROM fts WHERE fts MATCH ?", ('"' + KIND_TOKENS[kind] + '"',)
            ).fetchone()
            n = self._kind_n[kind] = int(row[0])
        return n

    def newest(
        self, kind: str = "page", offset: int = 0, limit: int = 50
    ) -> tuple[int, list[ColdItem]]:
        """``(n, items)``: how many items of ``kind`` are indexed, and ``limit`` of them
        from ``offset`` on, newest (by timestamp) first. An empty archive answers without
        creating an index file."""
        if self._db is None and self._archive_last() == 0:
            return 0, []
        return self._guard(self._newest, kind, max(0, offset), max(0, limit))

    def _newest(self, kind: str, offset: int, limit: int) -> tuple[int, list[ColdItem]]:
        self._catch_up()
        return cold_read.newest(self._ready(), kind, offset, limit)

    def day_counts(self, kind: str = "page", day_seconds: float = 86400.0) -> list[tuple[int, int]]:
        """``(day, items)`` for every day with items of ``kind``, oldest first: ``day`` is
        the timestamp divided by ``day_seconds`` (UTC days by default), rounded down
        (timestamps are never negative)."""
        if self._db is None and self._archive_last() == 0:
            return []
        return self._guard(self._day_counts, kind, float(day_seconds))

    def _day_counts(self, kind: str, day_seconds: float) -> list[tuple[int, int]]:
        self._catch_up()
        return cold_read.day_counts(self._ready(), kind, day_seconds)

    @overload
    def pages_by_seq(self, seqs: Iterable[int]) -> dict[int, ColdItem]: ...

    @overload
    def pages_by_seq(
        self, seqs: Iterable[int], *, light: Literal[False]
    ) -> dict[int, ColdItem]: ...

    @overload
    def pages_by_seq(self, seqs: Iterable[int], *, light: Literal[True]) -> dict[int, ColdRow]: ...

    def pages_by_seq(
        self, seqs: Iterable[int], *, light: bool = False
    ) -> dict[int, ColdItem] | dict[int, ColdRow]:
        """The archived pages among turn ``seqs``, by seq (used for neighbouring turns, and
        for the few candidates a search returns); with ``light``, as :class:`ColdRow` s."""
        wanted = sorted({int(s) for s in seqs})
        if not wanted or (self._db is None and self._archive_last() == 0):
            return {}
        result: dict[int, ColdItem] | dict[int, ColdRow] = self._guard(
            self._pages_by_seq, wanted, light
        )
        return result

    def _pages_by_seq(
        self, wanted: list[int], light: bool = False
    ) -> dict[int, ColdItem] | dict[int, ColdRow]:
        return cold_read.pages_by_seq(self._ready(), wanted, light)

    def pages_between(
        self, start: float, end: float, limit: int, *, light: bool = False
    ) -> tuple[int, dict[int, ColdItem] | dict[int, ColdRow]]:
        """How many archived pages were written in ``[start, end)`` (epoch seconds), and,
        when that is at most ``limit``, those pages by seq (else an empty dict); with
        ``light``, as :class:`ColdRow` s."""
        if self._db is None and self._archive_last() == 0:
            return 0, {}
        result: tuple[int, dict[int, Any]] = self._guard(
            self._pages_between, float(start), float(end), int(limit), light
        )
        return result

    def _pages_between(
        self, start: float, end: float, limit: int, light: bool = False
    ) -> tuple[int, dict[int, Any]]:
        return cold_read.pages_between(self._ready(), start, end, limit, light)

    def segment_pages(self, segment_ids: Iterable[str]) -> list[tuple[str, int, str]]:
        """``(segment id, seq, text)`` of the archived pages of ``segment_ids``, oldest
        first (the pages a segment keeps in the archive)."""
        wanted = sorted({str(s) for s in segment_ids if s})
        if not wanted or (self._db is None and self._archive_last() == 0):
            return []
        return self._guard(self._segment_pages, wanted)

    def _segment_pages(self, wanted: list[str]) -> list[tuple[str, int, str]]:
        self._catch_up()
        return cold_read.segment_pages(self._ready(), wanted)

    def item_ids(self) -> set[str]:
        """Ids of every indexed item (for tests and inspection; O(items))."""
        return self._guard(
            lambda: {r[0] for r in self._ready().execute("SELECT item_id FROM items")}
        )

    def item(self, item_id: str) -> ColdItem | None:
        """The indexed item ``item_id`` (see :func:`~memoryos_actors.store.edits.cold_item_id`),
        or None."""
        if self._db is None and self._archive_last() == 0:
            return None
        return self._guard(self._item, item_id)

    def _item(self, item_id: str) -> ColdItem | None:
        self._catch_up()
        return cold_read.item(self._ready(), item_id)

    def contains(self, item_id: str) -> bool:
        """Whether ``item_id`` is indexed."""
        if self._db is None and self._archive_last() == 0:
            return False
        return bool(
            self._guard(
                lambda: (
                    self._ready()
                    .execute("SELECT 1 FROM items WHERE item_id = ?", (item_id,))
                    .fetchone()
                )
            )
        )

    def close(self) -> None:
        """Close the database (the file stays); idempotent."""
        with self._lock:
            self._drop_connection()
