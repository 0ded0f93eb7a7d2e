"""Writing the cold index's rows: new items, and the user's edits of indexed ones.

Each function runs inside the caller's transaction and answers what changed in the
corpus statistics (:class:`CorpusDelta`); :class:`~memoryos_actors.store.cold.ColdIndex`
owns the transaction, the ``meta`` counts and ``df``.
"""

from __future__ import annotations

import sqlite3
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

import msgpack

from memoryos_actors.cold_items import ColdItem
from memoryos_actors.lexicon import terms
from memoryos_actors.store.cold_rows import CAND_COLUMNS, COLUMNS, edit_item_ids, fts_text
from memoryos_actors.store.cold_schema import term_ids
from memoryos_actors.store.formats import EditRecord

__all__ = ["CorpusDelta", "apply_edits", "insert_items"]


@dataclass
class CorpusDelta:
    """How a write changed the corpus: items (``n_docs``), terms (``total_len``), each
    term's document frequency (``df``) and the items of each kind (``kinds``)."""

    n_docs: int = 0
    total_len: int = 0
    df: Counter[str] = field(default_factory=Counter)
    kinds: Counter[str] = field(default_factory=Counter)


def insert_items(db: sqlite3.Connection, items: Sequence[ColdItem]) -> CorpusDelta:
    """Index ``items`` (wide row, narrow row, FTS5 row each); an item already indexed (one
    archived twice) is skipped."""
    delta = CorpusDelta()
    item_tids = term_ids(db, [item.terms for item in items])
    for item, tids in zip(items, item_tids, strict=True):
        emb = None if item.embedding is None else item.embedding.astype("<f2").tobytes()
        keywords = " ".join(sorted(item.keywords))
        cur = db.execute(
            f"INSERT OR IGNORE INTO items ({COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
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
            f"INSERT INTO cand (id, {CAND_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
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
            (cur.lastrowid, fts_text(item.kind, " ".join(item.terms))),
        )
        delta.n_docs += 1
        delta.total_len += len(item.terms)
        delta.df.update(set(item.terms))
        delta.kinds[item.kind] += 1
    return delta


def apply_edits(db: sqlite3.Connection, edits: Sequence[EditRecord]) -> CorpusDelta:
    """Apply edit records (deleted items go, corrected ones get the new text and
    embedding) to the indexed items they touch."""
    delta = CorpusDelta()
    for edit in edits:
        ids = edit_item_ids(edit)
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
                (rowid, fts_text(kind, terms_)),
            )
            delta.df.subtract(set(old_terms))
            delta.total_len -= len(old_terms)
            if edit.op == "delete":
                db.execute("DELETE FROM items WHERE id = ?", (rowid,))
                db.execute("DELETE FROM cand WHERE id = ?", (rowid,))
                delta.n_docs -= 1
                delta.kinds[kind] -= 1
                continue
            text = str(edit.new)
            new_terms = tuple(terms(text))
            # The entry as archived, with the corrected text.
            record = {**msgpack.unpackb(blob, raw=False), "text": text}
            emb = edit.emb
            # A corrected item is one text: no query side is known any more.
            db.execute(
                "UPDATE items SET text = ?, terms = ?, emb = ?, record = ?, nq = 0 WHERE id = ?",
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
                (len(text), term_ids(db, [new_terms])[0], emb if emb else None, rowid),
            )
            db.execute(
                "INSERT INTO fts (rowid, terms) VALUES (?, ?)",
                (rowid, fts_text(kind, " ".join(new_terms))),
            )
            delta.df.update(set(new_terms))
            delta.total_len += len(new_terms)
    return delta
