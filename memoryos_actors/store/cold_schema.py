"""The cold index's tables (format 2), the upgrades an older index gets when opened, and
the terms' vocabulary ids.

An item has a wide row (``items``: text, record, terms, embedding), a narrow one (``cand``:
what scoring reads) and an FTS5 row of its terms; ``df`` holds each term's document
frequency and ``meta`` the counts and the archive seq indexed up to.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from memoryos_actors.lexicon import TERM_ID_DTYPE
from memoryos_actors.store.cold_rows import CAND_COLUMNS, fts_text, query_terms

__all__ = [
    "CAND_TABLE",
    "FORMAT",
    "FTS_TABLE",
    "SCHEMA",
    "UPGRADES",
    "cand_at",
    "create_schema",
    "fill_cand",
    "fill_fts",
    "term_ids",
    "upgrade",
]

CAND_TABLE = """CREATE TABLE IF NOT EXISTS cand (
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

#: The FTS5 index of every item's terms (and its kind token). ``columnsize=0``: it keeps no
#: row lengths, so its rank is, in effect, the sum of the idf of the query terms a row
#: holds (a term's repeats count for very little, a row's length not at all); every
#: candidate is scored again with the full BM25 from its own terms. Ranking a row then
#: needs no look-up of its length: at 100,000 items, ranking 2,000 rows of a one-term
#: MATCH took 1.3 ms instead of 5.6 ms, and a cold query's FTS5 time halved (see
#: bench/README.md). An index made with row lengths gets this table on its next open
#: (:func:`upgrade`).
FTS_TABLE = """CREATE VIRTUAL TABLE IF NOT EXISTS fts USING fts5(
    terms, content='', columnsize=0, tokenize='unicode61 remove_diacritics 0'
)"""

SCHEMA = (
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
CREATE INDEX IF NOT EXISTS items_segment ON items(segment_id);
CREATE TABLE IF NOT EXISTS df (term TEXT PRIMARY KEY, n INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS vocab (id INTEGER PRIMARY KEY, term TEXT NOT NULL UNIQUE);
"""
    + CAND_TABLE
    + """;
CREATE INDEX IF NOT EXISTS cand_seq ON cand(seq);
"""
    + FTS_TABLE
    + ";"
)

#: Added to format 2 in place: an index made before them gets them when it is opened (its
#: older rows keep ``nq`` NULL). The query side's term count, and the index over item times
#: (time first: an index led by ``kind`` would be chosen for the ``kind = 'page' AND seq IN``
#: lookups of neighbouring turns and scan every page; the listing reads, newest first of
#: one kind, walk it backwards), and the index over segment ids (the pages a segment keeps
#: when one of them is deleted). Then the vocabulary of every term indexed (``vocab``) and
#: each item's narrow row (``cand``, see :data:`CAND_COLUMNS`), with its terms as ids so a
#: query counts its terms in its candidates with numpy: both are derived from ``items``, so
#: an older index gets them for every row when it is opened (:func:`fill_cand`, in the
#: same transaction as the tables).
UPGRADES = (
    ("column", "nq", "ALTER TABLE items ADD COLUMN nq INTEGER"),
    ("index", "items_ts_kind", "CREATE INDEX IF NOT EXISTS items_ts_kind ON items(ts, kind)"),
    ("index", "items_segment", "CREATE INDEX IF NOT EXISTS items_segment ON items(segment_id)"),
    (
        "table",
        "vocab",
        "CREATE TABLE IF NOT EXISTS vocab (id INTEGER PRIMARY KEY, term TEXT NOT NULL UNIQUE)",
    ),
    ("table", "cand", CAND_TABLE),
)


def cand_at(meta: Mapping[str, Any]) -> str:
    """The archive seq and edit count an index's narrow rows were last brought up to (meta
    key ``cand_at``, written with them): a version of this module that does not keep them
    changes the index without changing it, and the next open sees they differ."""
    return f"{int(meta.get('archive_seq') or 0)}:{int(meta.get('edits') or 0)}"


def upgrade(db: sqlite3.Connection, meta: Mapping[str, Any]) -> None:
    """Add what :data:`UPGRADES` lists to an index made before it existed (and, with the
    ``cand`` table, every item's narrow row); narrow rows that are not in step with the
    items (written to by a version without them, see :func:`cand_at`) are made again, and
    an FTS5 table that keeps row lengths is made again as :data:`FTS_TABLE` (from the
    items' terms: 3.7 s at 100,000 items). All in one transaction."""
    have = {
        "column": {row[1] for row in db.execute("PRAGMA table_info(items)")},
        "index": {row[1] for row in db.execute("PRAGMA index_list(items)")},
        "table": {
            row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        },
    }
    stale = "cand" in have["table"] and meta.get("cand_at") != cand_at(meta)
    if stale:
        have["table"].discard("cand")
    todo = [(name, sql) for what, name, sql in UPGRADES if name not in have[what]]
    fts = db.execute("SELECT sql FROM sqlite_master WHERE name = 'fts'").fetchone()
    refts = fts is not None and "columnsize=0" not in str(fts[0])
    if not todo and not refts:
        return
    db.execute("BEGIN")
    try:
        if stale:
            db.execute("DROP TABLE cand")  # and its index
        if refts:
            db.execute("DROP TABLE fts")
            db.execute(FTS_TABLE)
            fill_fts(db)
        for name, sql in todo:
            db.execute(sql)
            if name == "cand":
                fill_cand(db)
                db.execute("INSERT OR REPLACE INTO meta VALUES ('cand_at', ?)", (cand_at(meta),))
        db.execute("COMMIT")
    except BaseException:
        with contextlib.suppress(sqlite3.Error):
            db.execute("ROLLBACK")
        raise


def term_ids(db: sqlite3.Connection, docs: Sequence[Sequence[str]]) -> list[bytes]:
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


def fill_fts(db: sqlite3.Connection, batch: int = 2000) -> None:
    """Index every item's terms in a new, empty ``fts`` table, a batch of rows at a time
    in rowid order (inside the caller's transaction)."""
    last = 0
    while True:
        rows = db.execute(
            "SELECT id, kind, terms FROM items WHERE id > ? ORDER BY id LIMIT ?", (last, batch)
        ).fetchall()
        if not rows:
            break
        db.executemany(
            "INSERT INTO fts (rowid, terms) VALUES (?, ?)",
            [(rowid, fts_text(kind, terms_)) for rowid, kind, terms_ in rows],
        )
        last = rows[-1][0]


def fill_cand(db: sqlite3.Connection, batch: int = 1000) -> None:
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
        ids = term_ids(db, [terms_.split() if terms_ else () for *_, terms_, _e, _r in rows])
        out = []
        for (rowid, kind, seq, ts, text, nq, kws, _t, emb, rec), tids in zip(
            rows, ids, strict=True
        ):
            if rec is not None:
                nq = query_terms(msgpack.unpackb(rec, raw=False, strict_map_key=False))
            out.append((rowid, kind, seq, ts, len(text), nq, kws, tids, emb))
        db.executemany(
            f"INSERT INTO cand (id, {CAND_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", out
        )
        last = rows[-1][0]
    db.execute("CREATE INDEX IF NOT EXISTS cand_seq ON cand(seq)")


FORMAT = 3
"""The cold index's format number (in its meta table); a file of another is rebuilt.
3: index terms drop a possessive "'s" (:func:`~memoryos_actors.lexicon.stem`), so the
terms stored by format 2 ("kitchen'") are made again from the archive."""


def create_schema(db: sqlite3.Connection, user_id: str, n_edits: int) -> None:
    """Make the tables of a new, empty index of ``user_id`` and its meta data, in one
    transaction (a kill in between leaves no half-made file). Records are indexed with
    the ``n_edits`` edits known now already applied."""
    db.execute("BEGIN")
    for statement in SCHEMA.split(";"):
        if statement.strip():
            db.execute(statement)
    db.executemany(
        "INSERT OR REPLACE INTO meta VALUES (?, ?)",
        [
            ("format", FORMAT),
            ("user_id", user_id),
            ("archive_seq", 0),
            ("n_docs", 0),
            ("total_len", 0),
            ("edits", n_edits),
        ],
    )
    db.execute(
        "INSERT OR REPLACE INTO meta VALUES ('cand_at', ?)",
        (cand_at(dict(db.execute("SELECT key, value FROM meta"))),),
    )
    db.execute("COMMIT")
