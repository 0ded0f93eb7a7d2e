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
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, overload

import numpy as np
import numpy.typing as npt

from memoryos_actors.cold_items import ColdCandidates, ColdItem, ColdRow
from memoryos_actors.errors import StorageError

# bm25_idf is re-exported: the cold tier's BM25 idf.
from memoryos_actors.lexicon import TERM_ID_DTYPE, TermString, bm25_idf
from memoryos_actors.store._framing import log
from memoryos_actors.store.archived import (
    ArchivedFact,
    ArchivedPage,
    ArchivedSegment,
    decode_archived,
    emb_from_f16,
)
from memoryos_actors.store.edits import EditLog

__all__ = [
    "CACHE_KIB",
    "COLD_FILE",
    "RANK_WINDOW",
    "ColdIndex",
    "bm25_idf",
    "match_plan",
    "record_items",
]

COLD_FILE = "cold.db"
"""File name of a user's cold index inside the user directory."""

CACHE_KIB = 2048
"""SQLite page cache per open cold index, KiB (bounds the index's memory)."""

_FORMAT = 2

#: A token each item's FTS5 row carries for its kind, so a query for facts matches facts
#: only (and does not rank the far more numerous pages first and filter after LIMIT).
#: Not a stemmed word of any language; never counted in ``df`` or the corpus length.
_KIND_TOKENS = {"page": "kindq0page", "fact": "kindq0fact", "agent_trait": "kindq0agent"}

#: Query terms in more than this share of the items (at least ``_COMMON_MIN`` items, at
#: most ``_COMMON_MAX``) are left out of the FTS5 MATCH when a rarer query term is there:
#: FTS5 ranks every row the MATCH finds, so long posting lists cost most of a query at
#: 100,000 items, and their BM25 weight is low. The absolute bound keeps that cost from
#: growing with the history. They still count in the BM25 of every candidate (scored from
#: its terms). When every term is common, see :func:`match_plan`.
_COMMON_SHARE = 0.05
_COMMON_MIN = 50
_COMMON_MAX = 1000

RANK_WINDOW = 2000
"""Most items one FTS5 MATCH of a cold query ranks. FTS5 ranks every row a MATCH finds
(about 1 us a row on this project's 2-core machine), so a query whose terms are in tens of
thousands of items would cost tens of milliseconds, growing with the history. When a MATCH
may find more, only the newest ``RANK_WINDOW`` items it finds are ranked: the cost of a
cold query is bounded whatever the history, and among many equally plain matches the newer
ones are preferred."""


def _fts_text(kind: str, terms_: str) -> str:
    """The text an item's FTS5 row indexes: its terms and its kind token."""
    token = _KIND_TOKENS.get(kind, "")
    return f"{terms_} {token}" if token else terms_


def _page_text(page: dict[str, Any]) -> str:
    return f"{page.get('query', '')} {page.get('response', '')}"


def _query_terms(page: dict[str, Any]) -> int:
    """How many index terms a page's query side gives: the query and the response are
    joined by a space and no token spans it, so these are the page's first terms."""
    from memoryos_actors.lexicon import terms

    return len(terms(str(page.get("query", ""))))


def record_items(seq: int, record: dict[str, Any]) -> Iterator[ColdItem]:
    """The items an archive record holds (nothing for record kinds the cold tier ignores;
    shapes in :mod:`memoryos_actors.store.archived`). Older records without embeddings are
    indexed lexically only."""
    from memoryos_actors.lexicon import terms

    found = decode_archived(record)
    if isinstance(found, ArchivedSegment | ArchivedPage):
        sid = found.segment_id or None
        for page in found.pages:
            pseq = int(page["seq"])
            text = _page_text(page)
            emb = found.emb_of(pseq) if isinstance(found, ArchivedSegment) else found.emb
            yield ColdItem(
                item_id=str(page.get("page_id") or f"p{pseq}"),
                kind="page",
                seq=pseq,
                segment_id=sid,
                timestamp=float(page.get("timestamp", 0.0)),
                archive_seq=seq,
                text=text,
                keywords=frozenset(str(k) for k in page.get("keywords") or ()),
                terms=tuple(terms(text)),
                embedding=emb_from_f16(emb),
                raw_record=dict(page),
                query_terms=_query_terms(page),
            )
    elif isinstance(found, ArchivedFact):
        entry = found.entry
        text = str(entry.get("text", ""))
        src = entry.get("source_segment")
        yield ColdItem(
            item_id=f"{found.kind}:{found.assistant}:{entry.get('entry_id', seq)}",
            kind=found.kind,
            seq=None,
            segment_id=str(src) if src else None,
            timestamp=float(entry.get("timestamp", 0.0)),
            archive_seq=seq,
            text=text,
            keywords=frozenset(),
            terms=tuple(terms(text)),
            embedding=emb_from_f16(found.emb),
            raw_record={**entry, "assistant": found.assistant},
        )


_CAND_TABLE = """CREATE TABLE IF NOT EXISTS cand (
    id INTEGER PRIMARY KEY,
    kind TEXT NOT NULL,
    seq INTEGER,
    ts REAL NOT NULL,
    chars INTEGER NOT NULL,
    nq INTEGER,
    keywords TEXT NOT NULL,
    tids BLOB NOT NULL,
    emb BLOB
)"""

_SCHEMA = (
    """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS items (
    id INTEGER PRIMARY KEY,
    item_id TEXT NOT NULL UNIQUE,
    kind TEXT NOT NULL,
    seq INTEGER,
    segment_id TEXT,
    ts REAL NOT NULL,
    archive_seq INTEGER NOT NULL,
    text TEXT NOT NULL,
    keywords TEXT NOT NULL,
    terms TEXT NOT NULL,
    emb BLOB,
    record BLOB NOT NULL,
    nq INTEGER
);
CREATE INDEX IF NOT EXISTS items_seq ON items(seq);
CREATE INDEX IF NOT EXISTS items_ts_kind ON items(ts, kind);
CREATE TABLE IF NOT EXISTS df (term TEXT PRIMARY KEY, n INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS vocab (id INTEGER PRIMARY KEY, term TEXT NOT NULL UNIQUE);
"""
    + _CAND_TABLE
    + """;
CREATE INDEX IF NOT EXISTS cand_seq ON cand(seq);
CREATE VIRTUAL TABLE IF NOT EXISTS fts USING fts5(
    terms, content='', tokenize='unicode61 remove_diacritics 0'
);
"""
)

_COLUMNS = "item_id, kind, seq, segment_id, ts, archive_seq, text, keywords, terms, emb, record, nq"

#: The narrow side of an item (table ``cand``, same rowid as ``items``): what scoring reads.
#: An item's row in ``items`` spans several pages (text, record, terms, embedding: ~8 KB
#: for a LongMemEval page), so reading hundreds of candidates walked ~3 pages each; here a
#: row (term ids, embedding, keywords, ~2 KB) fits in one.
_CAND_COLUMNS = "kind, seq, ts, chars, nq, keywords, tids, emb"

#: Added to format 2 in place: an index made before them gets them when it is opened (its
#: older rows keep ``nq`` NULL). The query side's term count, and the index over item times
#: (time first: an index led by ``kind`` would be chosen for the ``kind = 'page' AND seq IN``
#: lookups of neighbouring turns and scan every page; the listing reads, newest first of
#: one kind, walk it backwards). Then the vocabulary of every term indexed (``vocab``) and
#: each item's narrow row (``cand``, see :data:`_CAND_COLUMNS`), with its terms as ids so a
#: query counts its terms in its candidates with numpy: both are derived from ``items``, so
#: an older index gets them for every row when it is opened (:func:`_fill_cand`, in the
#: same transaction as the tables).
_UPGRADES = (
    ("column", "nq", "ALTER TABLE items ADD COLUMN nq INTEGER"),
    ("index", "items_ts_kind", "CREATE INDEX IF NOT EXISTS items_ts_kind ON items(ts, kind)"),
    (
        "table",
        "vocab",
        "CREATE TABLE IF NOT EXISTS vocab (id INTEGER PRIMARY KEY, term TEXT NOT NULL UNIQUE)",
    ),
    ("table", "cand", _CAND_TABLE),
)


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
        db = sqlite3.connect(str(self.path), check_same_thread=False, isolation_level=None)
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
            # Schema and meta in one transaction: a kill in between leaves no half-made file.
            db.execute("BEGIN")
            for statement in _SCHEMA.split(";"):
                if statement.strip():
                    db.execute(statement)
            db.executemany(
                "INSERT OR REPLACE INTO meta VALUES (?, ?)",
                [
                    ("format", _FORMAT),
                    ("user_id", self.user_id),
                    ("archive_seq", 0),
                    ("n_docs", 0),
                    ("total_len", 0),
                    # Records are indexed with every edit known now already applied.
                    ("edits", len(self._edits()) if self._edits is not None else 0),
                ],
            )
            db.execute(
                "INSERT OR REPLACE INTO meta VALUES ('cand_at', ?)",
                (_cand_at(dict(db.execute("SELECT key, value FROM meta"))),),
            )
            db.execute("COMMIT")
        meta = dict(db.execute("SELECT key, value FROM meta").fetchall())
        if meta.get("format") != _FORMAT:
            raise _Damaged(f"format {meta.get('format')!r}, expected {_FORMAT}")
        if meta.get("user_id") != self.user_id:
            raise _Damaged(f"belongs to user {meta.get('user_id')!r}")
        if not fresh:
            _upgrade(db, meta)
        try:
            self._indexed = int(meta["archive_seq"])
            self._n_docs = int(meta["n_docs"])
            self._total_len = int(meta["total_len"])
            self._edits_applied = int(meta.get("edits", 0))
        except (KeyError, TypeError, ValueError) as exc:
            raise _Damaged(f"meta incomplete: {exc!r}") from None
        self._kind_n = dict.fromkeys(_KIND_TOKENS, 0) if fresh else {}
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
            with contextlib.suppress(FileNotFoundError):
                Path(str(self.path) + suffix).unlink()

    def _catch_up(self) -> None:
        if self._archive_last() <= self._indexed:
            return
        batch: list[tuple[int, dict[str, Any]]] = []
        for seq, rec in self.archive.iter(after_seq=self._indexed):
            batch.append((seq, rec))
            if len(batch) >= 512:
                self._add_batch(batch)
                batch = []
        if batch:
            self._add_batch(batch)

    def _guard(self, fn: Any, *args: Any) -> Any:
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
        if self._db is not None:
            with contextlib.suppress(sqlite3.Error):
                self._db.close()
            self._db = None

    def rebuild(self) -> int:
        """Delete the index and build it again from the archive; return the items indexed."""
        with self._lock:
            self._drop_connection()
            self._delete_files()
            self.rebuilds += 1
            self._open()
            return self._n_docs

    # -- writing -------------------------------------------------------------------------

    def add(self, seq: int, record: dict[str, Any]) -> None:
        """Index archive record ``seq`` (call after appending it; older seqs are ignored)."""
        self._guard(self._add_batch, [(seq, record)])

    def _add_batch(self, batch: list[tuple[int, dict[str, Any]]]) -> None:
        import msgpack

        db = self._db
        assert db is not None
        fresh = [(s, r) for s, r in batch if s > self._indexed]
        if not fresh:
            return
        # The archive may be ahead of the index (a record appended while it was closed):
        # index the gap first so archive order is kept.
        if fresh[0][0] > self._indexed + 1 and self._archive_last() >= fresh[0][0]:
            gap = [(s, r) for s, r in self.archive.iter(after_seq=self._indexed) if s < fresh[0][0]]
            fresh = gap + fresh
        n_docs, total_len = self._n_docs, self._total_len
        df: Counter[str] = Counter()
        kind_n = dict(self._kind_n)
        edits = self._edits() if self._edits is not None else None
        db.execute("BEGIN")
        try:
            items: list[ColdItem] = []
            for seq, raw in fresh:
                rec = edits.apply(raw) if edits else raw
                if rec is not None:  # None: everything in it was deleted
                    items.extend(record_items(seq, rec))
            term_ids = _term_ids(db, [item.terms for item in items])
            for item, tids in zip(items, term_ids, strict=True):
                emb = None if item.embedding is None else item.embedding.astype("<f2").tobytes()
                keywords = " ".join(sorted(item.keywords))
                cur = db.execute(
                    f"INSERT OR IGNORE INTO items ({_COLUMNS}) VALUES "
                    "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        item.item_id,
                        item.kind,
                        item.seq,
                        item.segment_id,
                        item.timestamp,
                        item.archive_seq,
                        item.text,
                        keywords,
                        " ".join(item.terms),
                        emb,
                        msgpack.packb(item.record, use_bin_type=True),
                        item.query_terms,
                    ),
                )
                if cur.rowcount != 1:
                    continue  # already indexed (an item archived twice)
                db.execute(
                    f"INSERT INTO cand (id, {_CAND_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        cur.lastrowid,
                        item.kind,
                        item.seq,
                        item.timestamp,
                        len(item.text),
                        item.query_terms,
                        keywords,
                        tids,
                        emb,
                    ),
                )
                db.execute(
                    "INSERT INTO fts (rowid, terms) VALUES (?, ?)",
                    (cur.lastrowid, _fts_text(item.kind, " ".join(item.terms))),
                )
                n_docs += 1
                total_len += len(item.terms)
                df.update(set(item.terms))
                if item.kind in kind_n:
                    kind_n[item.kind] += 1
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
                (_cand_at({"archive_seq": last, "edits": self._edits_applied}),),
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
        records = self._edits().records
        if len(records) <= self._edits_applied:
            return 0
        import msgpack

        db = self._db
        assert db is not None
        todo = records[self._edits_applied :]
        n_docs, total_len = self._n_docs, self._total_len
        df: Counter[str] = Counter()
        kind_n = dict(self._kind_n)
        db.execute("BEGIN")
        try:
            for rec in todo:
                ids = edit_item_ids(rec)
                if not ids:
                    continue
                rows = db.execute(
                    f"SELECT id, kind, terms, record FROM items WHERE item_id IN "
                    f"({','.join('?' for _ in ids)})",
                    ids,
                ).fetchall()
                for rowid, kind, terms_, blob in rows:
                    old_terms = terms_.split() if terms_ else []
                    db.execute(
                        "INSERT INTO fts (fts, rowid, terms) VALUES ('delete', ?, ?)",
                        (rowid, _fts_text(kind, terms_)),
                    )
                    df.subtract(set(old_terms))
                    total_len -= len(old_terms)
                    if rec.get("op") == "delete":
                        db.execute("DELETE FROM items WHERE id = ?", (rowid,))
                        db.execute("DELETE FROM cand WHERE id = ?", (rowid,))
                        n_docs -= 1
                        if kind in kind_n:
                            kind_n[kind] -= 1
                        continue
                    from memoryos_actors.lexicon import terms

                    text = str(rec["new"])
                    new_terms = tuple(terms(text))
                    record = msgpack.unpackb(blob, raw=False)
                    record["text"] = text
                    emb = rec.get("emb")
                    # A corrected item is one text: no query side is known any more.
                    db.execute(
                        "UPDATE items SET text = ?, terms = ?, emb = ?, record = ?, nq = 0 "
                        "WHERE id = ?",
                        (
                            text,
                            " ".join(new_terms),
                            emb if emb else None,
                            msgpack.packb(record, use_bin_type=True),
                            rowid,
                        ),
                    )
                    db.execute(
                        "UPDATE cand SET chars = ?, nq = 0, tids = ?, emb = ? WHERE id = ?",
                        (len(text), _term_ids(db, [new_terms])[0], emb if emb else None, rowid),
                    )
                    db.execute(
                        "INSERT INTO fts (rowid, terms) VALUES (?, ?)",
                        (rowid, _fts_text(kind, " ".join(new_terms))),
                    )
                    df.update(set(new_terms))
                    total_len += len(new_terms)
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
                    ("cand_at", _cand_at({"archive_seq": self._indexed, "edits": len(records)})),
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
        return self._guard(self._search, qt, limit, kinds, light)

    def _search(
        self, qt: list[str], limit: int, kinds: tuple[str, ...], light: bool = False
    ) -> ColdCandidates:
        self._catch_up()
        db = self._db
        assert db is not None
        df_rows = db.execute(
            f"SELECT term, n FROM df WHERE term IN ({','.join('?' for _ in qt)})", qt
        ).fetchall()
        dfs = {str(t): int(n) for t, n in df_rows if int(n) > 0}
        term_ids = None
        if light:  # narrow rows hold term ids: the query's are looked up for them
            ids = dict.fromkeys(qt, -1)
            ids.update(
                db.execute(
                    f"SELECT term, id FROM vocab WHERE term IN ({','.join('?' for _ in qt)})",
                    qt,
                )
            )
            term_ids = tuple(ids.items())
        stats = dict(
            n_docs=self._n_docs,
            total_len=self._total_len,
            df=tuple(dfs.items()),
            term_ids=term_ids,
        )
        pages_only = kinds == ("page",)
        # Kinds with no item are not asked for; for the rarer kinds (facts, traits), the
        # MATCH finds at most as many items as there are of them.
        kinds = tuple(
            k for k in kinds if k in _KIND_TOKENS and (pages_only or self._kind_count(db, k) > 0)
        )
        plan = match_plan(qt, dfs, self._n_docs)
        tokens = [_KIND_TOKENS[k] for k in kinds]
        if not plan or not tokens:
            return ColdCandidates(**stats)  # no indexed item has any query term
        if not pages_only:
            n_kind = sum(self._kind_count(db, k) for k in kinds)
            plan = [(op, terms_, min(bound, n_kind)) for op, terms_, bound in plan]
        # Nearly every item is a page: for pages, ANDing the page token (a posting list as
        # long as the index) would cost more than the few facts it keeps out, so a few
        # more rows are fetched and the facts filtered out.
        fetch = limit + max(8, limit // 8) if pages_only else limit
        order: list[int] = []
        seen: set[int] = set()
        for op, terms_, bound in plan:
            if len(order) >= fetch:
                break
            expr = f" {op} ".join('"' + t.replace('"', '""') + '"' for t in terms_)
            match = expr if pages_only else f"({expr}) AND ({' OR '.join(tokens)})"
            for rowid in _ranked_rowids(db, match, fetch, bound):
                if rowid not in seen:
                    seen.add(rowid)
                    order.append(rowid)
        order = order[:fetch]
        if not order:
            return ColdCandidates(**stats)
        rank_of = {rowid: i for i, rowid in enumerate(order)}
        rows = db.execute(
            f"SELECT id, {_CAND_COLUMNS if light else _COLUMNS} FROM "
            f"{'cand' if light else 'items'} WHERE id IN ({','.join('?' for _ in order)})",
            order,
        ).fetchall()
        rows.sort(key=lambda r: rank_of[r[0]])
        # Rows of other kinds are left out before any item is made (the kind is column 1
        # of a narrow row, 2 of a full one).
        at = 1 if light else 2
        kept = [r[1:] for r in rows if r[at] in kinds][:limit]
        items = _cand_rows(kept) if light else _row_items(kept)
        return ColdCandidates(items=tuple(items), **stats)  # type: ignore[arg-type]

    def _kind_count(self, db: sqlite3.Connection, kind: str) -> int:
        """Items of ``kind`` in the index (counted from its FTS5 token once per open)."""
        n = self._kind_n.get(kind)
        if n is None:
            row = db.execute(
                "SELECT count(*) FROM fts WHERE fts MATCH ?", ('"' + _KIND_TOKENS[kind] + '"',)
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
        db = self._db
        assert db is not None
        (n,) = db.execute("SELECT count(*) FROM items WHERE kind = ?", (kind,)).fetchone()
        if limit == 0 or offset >= n:
            return int(n), []
        rows = db.execute(
            f"SELECT {_COLUMNS} FROM items WHERE kind = ? ORDER BY ts DESC, id DESC "
            "LIMIT ? OFFSET ?",
            (kind, limit, offset),
        ).fetchall()
        return int(n), _row_items(rows)

    def day_counts(self, kind: str = "page", day_seconds: float = 86400.0) -> list[tuple[int, int]]:
        """``(day, items)`` for every day with items of ``kind``, oldest first: ``day`` is
        the timestamp divided by ``day_seconds`` (UTC days by default), rounded down
        (timestamps are never negative)."""
        if self._db is None and self._archive_last() == 0:
            return []
        return self._guard(self._day_counts, kind, float(day_seconds))

    def _day_counts(self, kind: str, day_seconds: float) -> list[tuple[int, int]]:
        self._catch_up()
        db = self._db
        assert db is not None
        rows = db.execute(
            "SELECT CAST(ts / ? AS INTEGER) AS d, count(*) FROM items "
            "WHERE kind = ? GROUP BY d ORDER BY d",
            (day_seconds, kind),
        ).fetchall()
        return [(int(d), int(c)) for d, c in rows]

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
        db = self._db
        assert db is not None
        out: dict[int, Any] = {}
        columns, table = (_CAND_COLUMNS, "cand") if light else (_COLUMNS, "items")
        for i in range(0, len(wanted), 500):
            chunk = wanted[i : i + 500]
            rows = db.execute(
                f"SELECT {columns} FROM {table} WHERE kind = 'page' AND seq IN "
                f"({','.join('?' for _ in chunk)})",
                chunk,
            ).fetchall()
            for item in _cand_rows(rows) if light else _row_items(rows):
                out[int(item.seq)] = item  # type: ignore[arg-type]
        return out

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
        db = self._db
        assert db is not None
        (count,) = db.execute(
            "SELECT count(*) FROM items WHERE kind = 'page' AND ts >= ? AND ts < ?", (start, end)
        ).fetchone()
        if not count or count > limit:
            return int(count), {}
        if light:
            # The ids from the index over (ts, kind) alone, then their narrow rows.
            ids = [
                r
                for (r,) in db.execute(
                    "SELECT id FROM items WHERE kind = 'page' AND ts >= ? AND ts < ?", (start, end)
                )
            ]
            rows = db.execute(
                f"SELECT {_CAND_COLUMNS} FROM cand WHERE id IN ({','.join('?' for _ in ids)})", ids
            ).fetchall()
            found: list[Any] = _cand_rows(rows)
        else:
            found = _row_items(
                db.execute(
                    f"SELECT {_COLUMNS} FROM items WHERE kind = 'page' AND ts >= ? AND ts < ?",
                    (start, end),
                ).fetchall()
            )
        return int(count), {item.seq: item for item in found if item.seq is not None}

    def item_ids(self) -> set[str]:
        """Ids of every indexed item (for tests and inspection; O(items))."""
        return self._guard(lambda: {r[0] for r in self._db.execute("SELECT item_id FROM items")})

    def item(self, item_id: str) -> ColdItem | None:
        """The indexed item ``item_id`` (see :func:`~memoryos_actors.store.edits.cold_item_id`),
        or None."""
        if self._db is None and self._archive_last() == 0:
            return None
        return self._guard(self._item, item_id)

    def _item(self, item_id: str) -> ColdItem | None:
        self._catch_up()
        db = self._db
        assert db is not None
        rows = db.execute(f"SELECT {_COLUMNS} FROM items WHERE item_id = ?", (item_id,)).fetchall()
        return _row_items(rows)[0] if rows else None

    def contains(self, item_id: str) -> bool:
        """Whether ``item_id`` is indexed."""
        if self._db is None and self._archive_last() == 0:
            return False
        return bool(
            self._guard(
                lambda: self._db.execute(
                    "SELECT 1 FROM items WHERE item_id = ?", (item_id,)
                ).fetchone()
            )
        )

    def close(self) -> None:
        """Close the database (the file stays); idempotent."""
        with self._lock:
            self._drop_connection()


_F16_TABLE: npt.NDArray[np.float32] | None = None


def _f16_to_f32(raw: bytes) -> npt.NDArray[np.float32]:
    """Little-endian float16 values as float32: a look-up of each value's bits in a table
    of all 65,536 conversions (256 KiB, made once by numpy's own conversion, so the same
    bits), several times faster than numpy's per-value float16 conversion; a query decodes
    hundreds of embeddings."""
    global _F16_TABLE
    if _F16_TABLE is None:
        _F16_TABLE = np.arange(65536, dtype=np.uint16).view("<f2").astype(np.float32)
    return _F16_TABLE[np.frombuffer(raw, dtype="<u2")]


def _embeddings(blobs: Sequence[bytes | None]) -> list[npt.NDArray[np.float32] | None]:
    """Stored float16 embeddings as float32 vectors (None stays None): a batch of one size
    decoded together (one conversion, each vector a row of it)."""
    sizes = {len(b) for b in blobs if b is not None}
    if len(sizes) == 1 and (size := sizes.pop()) and size % 2 == 0:
        full = [b for b in blobs if b is not None]
        mat = _f16_to_f32(b"".join(full)).reshape(len(full), size // 2)
        it = iter(mat)
        return [None if b is None else next(it) for b in blobs]
    return [None if b is None else emb_from_f16(b) for b in blobs]


def _row_items(rows: Iterable[tuple[Any, ...]]) -> list[ColdItem]:
    """Items from ``items`` rows (columns :data:`_COLUMNS`); the embeddings of a batch are
    decoded together (one float16-to-float32 conversion, each item a row of it)."""
    rows = list(rows)
    embs = _embeddings([r[9] for r in rows])
    return [
        ColdItem(
            item_id=item_id,
            kind=kind,
            seq=None if seq is None else int(seq),
            segment_id=sid,
            timestamp=float(ts),
            archive_seq=int(aseq),
            text=text,
            keywords=frozenset(kws.split()) if kws else frozenset(),
            terms=TermString(terms_) if terms_ else (),
            embedding=emb,
            raw_record=bytes(rec),
            query_terms=None if nq is None else int(nq),
        )
        for (item_id, kind, seq, sid, ts, aseq, text, kws, terms_, _blob, rec, nq), emb in zip(
            rows, embs, strict=True
        )
    ]


def _cand_rows(rows: Iterable[tuple[Any, ...]]) -> list[ColdRow]:
    """:class:`ColdRow` s from ``cand`` rows (columns :data:`_CAND_COLUMNS`; SQLite gives
    the columns' own types: seq, chars and nq int or None, ts float)."""
    rows = list(rows)
    embs = _embeddings([r[7] for r in rows])
    make, empty = tuple.__new__, frozenset[str]()
    return [
        make(
            ColdRow, (kind, seq, ts, chars, frozenset(kws.split()) if kws else empty, tids, emb, nq)
        )
        for (kind, seq, ts, chars, nq, kws, tids, _blob), emb in zip(rows, embs, strict=True)
    ]


def _cand_at(meta: Mapping[str, Any]) -> str:
    """The archive seq and edit count an index's narrow rows were last brought up to (meta
    key ``cand_at``, written with them): a version of this module that does not keep them
    changes the index without changing it, and the next open sees they differ."""
    return f"{int(meta.get('archive_seq') or 0)}:{int(meta.get('edits') or 0)}"


def _upgrade(db: sqlite3.Connection, meta: Mapping[str, Any]) -> None:
    """Add what :data:`_UPGRADES` lists to an index made before it existed (and, with the
    ``cand`` table, every item's narrow row); narrow rows that are not in step with the
    items (written to by a version without them, see :func:`_cand_at`) are made again."""
    have = {
        "column": {row[1] for row in db.execute("PRAGMA table_info(items)")},
        "index": {row[1] for row in db.execute("PRAGMA index_list(items)")},
        "table": {
            row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        },
    }
    stale = "cand" in have["table"] and meta.get("cand_at") != _cand_at(meta)
    if stale:
        have["table"].discard("cand")
    todo = [(name, sql) for what, name, sql in _UPGRADES if name not in have[what]]
    if not todo:
        return
    db.execute("BEGIN")
    try:
        if stale:
            db.execute("DROP TABLE cand")  # and its index
        for name, sql in todo:
            db.execute(sql)
            if name == "cand":
                _fill_cand(db)
                db.execute("INSERT OR REPLACE INTO meta VALUES ('cand_at', ?)", (_cand_at(meta),))
        db.execute("COMMIT")
    except BaseException:
        with contextlib.suppress(sqlite3.Error):
            db.execute("ROLLBACK")
        raise


def _term_ids(db: sqlite3.Connection, docs: Sequence[Sequence[str]]) -> list[bytes]:
    """Each of ``docs`` (sequences of terms) as its terms' ids in the index's vocabulary
    (:data:`~memoryos_actors.lexicon.TERM_ID_DTYPE` bytes), adding the terms it lacks.
    Inside the caller's transaction."""
    distinct = list(dict.fromkeys(t for doc in docs for t in doc))
    db.executemany("INSERT OR IGNORE INTO vocab (term) VALUES (?)", ((t,) for t in distinct))
    id_of: dict[str, int] = {}
    for i in range(0, len(distinct), 500):  # within SQLite's limit of bound parameters
        chunk = distinct[i : i + 500]
        id_of.update(
            db.execute(
                f"SELECT term, id FROM vocab WHERE term IN ({','.join('?' for _ in chunk)})", chunk
            )
        )
    return [np.array([id_of[t] for t in doc], dtype=TERM_ID_DTYPE).tobytes() for doc in docs]


def _fill_cand(db: sqlite3.Connection, batch: int = 1000) -> None:
    """Give every item its narrow row (an index made before ``cand`` existed), a batch of
    rows at a time in rowid order. A page indexed before its query side was counted
    (``nq`` NULL) gets the count from its archived record, as a search would make it."""
    import msgpack

    last = 0
    while True:
        rows = db.execute(
            "SELECT id, kind, seq, ts, text, nq, keywords, terms, emb, "
            "CASE WHEN nq IS NULL AND kind = 'page' THEN record END "
            "FROM items WHERE id > ? ORDER BY id LIMIT ?",
            (last, batch),
        ).fetchall()
        if not rows:
            break
        ids = _term_ids(db, [terms_.split() if terms_ else () for *_, terms_, _e, _r in rows])
        out = []
        for (rowid, kind, seq, ts, text, nq, kws, _t, emb, rec), tids in zip(
            rows, ids, strict=True
        ):
            if rec is not None:
                nq = _query_terms(msgpack.unpackb(rec, raw=False, strict_map_key=False))
            out.append((rowid, kind, seq, ts, len(text), nq, kws, tids, emb))
        db.executemany(
            f"INSERT INTO cand (id, {_CAND_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", out
        )
        last = rows[-1][0]
    db.execute("CREATE INDEX IF NOT EXISTS cand_seq ON cand(seq)")


def match_plan(
    qt: list[str], dfs: Mapping[str, int], n_docs: int
) -> list[tuple[str, tuple[str, ...], int]]:
    """The FTS5 matches a cold query runs, in order, each ``(operator, terms, bound)``:
    ``operator`` is ``"OR"`` or ``"AND"`` over ``terms``, ``bound`` an upper bound of the
    items it matches (from the document frequencies ``dfs``).

    Query terms no item has are dropped, and so are terms in more than half of the items
    (and more than ``_COMMON_MAX``) while another term is left: in this history they are
    stop words (their Robertson-Sparck Jones weight is negative; BM25's idf, which keeps
    them positive, gives them less than 0.7 against 3 for a term in one item in twenty),
    they hardly narrow an AND, and FTS5's ranking reads each MATCH term's whole posting
    list, so they cost most of a query. They still count in the BM25 of every candidate.
    Then: when rare terms are present (see ``_COMMON_SHARE``), one OR over them. When
    every term is common: first the items that have all of them (an AND, far fewer and
    better matches than any one common term), then an OR of the two rarest to fill up.
    """
    present = [t for t in qt if dfs.get(t, 0) > 0]
    if not present:
        return []
    telling = [t for t in present if 2 * dfs[t] <= n_docs or dfs[t] <= _COMMON_MAX]
    if telling:
        present = telling
    cap = min(max(_COMMON_MIN, int(_COMMON_SHARE * n_docs)), _COMMON_MAX)
    rare = [t for t in present if dfs[t] <= cap]
    if rare:
        return [("OR", tuple(rare), sum(dfs[t] for t in rare))]
    ordered = sorted(present, key=lambda t: (dfs[t], t))
    plan: list[tuple[str, tuple[str, ...], int]] = []
    if len(ordered) > 1:
        plan.append(("AND", tuple(ordered), dfs[ordered[0]]))
    two = tuple(ordered[:2])
    plan.append(("OR", two, sum(dfs[t] for t in two)))
    return plan


def _ranked_rowids(db: sqlite3.Connection, match: str, n: int, bound: int) -> list[int]:
    """Rowids of the ``n`` items FTS5 ranks best for ``match``, ranking at most
    :data:`RANK_WINDOW` of them: when ``match`` may find more (``bound``, an upper bound),
    only the newest ``RANK_WINDOW`` it finds are ranked (best first; equal ranks, newer
    first)."""
    if bound > RANK_WINDOW:
        # Rowids follow archive order, and FTS5 walks a MATCH in rowid order: the newest
        # RANK_WINDOW matches, each with its rank, cost one walk of the window.
        rows = db.execute(
            "SELECT rowid, rank FROM fts WHERE fts MATCH ? ORDER BY rowid DESC LIMIT ?",
            (match, RANK_WINDOW),
        ).fetchall()
        rows.sort(key=lambda r: (r[1], -r[0]))
        return [int(r[0]) for r in rows[:n]]
    return [
        int(r)
        for (r,) in db.execute(
            "SELECT rowid FROM fts WHERE fts MATCH ? ORDER BY rank LIMIT ?", (match, n)
        )
    ]


def edit_item_ids(edit: Mapping[str, Any]) -> list[str]:
    """Ids of the cold items an edit record touches."""
    mid = str(edit.get("id", ""))
    kind, _, rest = mid.partition(":")
    if kind in ("page", "segment"):
        return [f"p{int(s)}" for s in edit.get("pages") or ()]
    if kind == "fact":
        return [f"fact::{rest}"]
    if kind == "agent_trait":
        return [mid]
    return []
