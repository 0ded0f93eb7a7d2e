"""The cold index's reads that are not a search: items by kind newest first, pages by turn
seq or by time, one item by id, items per day. Functions of an open connection;
:class:`~memoryos_actors.store.cold.ColdIndex` opens it, keeps it in step with the archive
and turns SQLite errors into a rebuild.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from memoryos_actors.cold_items import ColdItem, ColdRow
from memoryos_actors.store.cold_rows import CAND_COLUMNS, COLUMNS, cand_rows, row_items

__all__ = ["day_counts", "item", "newest", "pages_between", "pages_by_seq", "segment_pages"]


def newest(
    db: sqlite3.Connection, kind: str, offset: int, limit: int
) -> tuple[int, list[ColdItem]]:
    """``(n, items)``: how many items of ``kind`` there are, and ``limit`` of them from
    ``offset`` on, newest (by timestamp) first."""
    (n,) = db.execute("SELECT count(*) FROM items WHERE kind = ?", (kind,)).fetchone()
    if limit == 0 or offset >= n:
        return int(n), []
    rows = db.execute(
        f"SELECT {COLUMNS} FROM items WHERE kind = ? ORDER BY ts DESC, id DESC LIMIT ? OFFSET ?",
        (kind, limit, offset),
    ).fetchall()
    return int(n), row_items(rows)


def day_counts(db: sqlite3.Connection, kind: str, day_seconds: float) -> list[tuple[int, int]]:
    """``(day, items)`` for every day with items of ``kind``, oldest first."""
    rows = db.execute(
        "SELECT CAST(ts / ? AS INTEGER) AS d, count(*) FROM items "
        "WHERE kind = ? GROUP BY d ORDER BY d",
        (day_seconds, kind),
    ).fetchall()
    return [(int(d), int(c)) for d, c in rows]


def pages_by_seq(
    db: sqlite3.Connection, wanted: list[int], light: bool = False
) -> dict[int, ColdItem] | dict[int, ColdRow]:
    """The pages among turn seqs ``wanted``, by seq, in full or (``light``) as narrow rows."""
    out: dict[int, Any] = {}
    columns, table = (CAND_COLUMNS, "cand") if light else (COLUMNS, "items")
    for i in range(0, len(wanted), 500):
        chunk = wanted[i : i + 500]
        rows = db.execute(
            f"SELECT {columns} FROM {table} WHERE kind = 'page' AND seq IN "
            f"({','.join('?' for _ in chunk)})",
            chunk,
        ).fetchall()
        for item in cand_rows(rows) if light else row_items(rows):
            out[int(item.seq)] = item  # type: ignore[arg-type]
    return out


def segment_pages(db: sqlite3.Connection, segment_ids: list[str]) -> list[tuple[str, int, str]]:
    """``(segment id, seq, text)`` of the pages of ``segment_ids``, oldest first."""
    out: list[tuple[str, int, str]] = []
    for i in range(0, len(segment_ids), 500):
        chunk = segment_ids[i : i + 500]
        out.extend(
            (str(sid), int(seq), str(text))
            for sid, seq, text in db.execute(
                "SELECT segment_id, seq, text FROM items WHERE kind = 'page' AND segment_id IN "
                f"({','.join('?' for _ in chunk)}) ORDER BY seq",
                chunk,
            )
        )
    return out


def pages_between(
    db: sqlite3.Connection, start: float, end: float, limit: int, light: bool = False
) -> tuple[int, dict[int, Any]]:
    """How many pages were written in ``[start, end)``, and, when at most ``limit``, those
    pages by seq, in full or (``light``) as narrow rows."""
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
            f"SELECT {CAND_COLUMNS} FROM cand WHERE id IN ({','.join('?' for _ in ids)})", ids
        ).fetchall()
        found: list[Any] = cand_rows(rows)
    else:
        found = row_items(
            db.execute(
                f"SELECT {COLUMNS} FROM items WHERE kind = 'page' AND ts >= ? AND ts < ?",
                (start, end),
            ).fetchall()
        )
    return int(count), {item.seq: item for item in found if item.seq is not None}


def item(db: sqlite3.Connection, item_id: str) -> ColdItem | None:
    """The indexed item ``item_id``, or None."""
    rows = db.execute(f"SELECT {COLUMNS} FROM items WHERE item_id = ?", (item_id,)).fetchall()
    return row_items(rows)[0] if rows else None
