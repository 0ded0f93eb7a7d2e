"""How a cold query finds its candidates: which FTS5 matches it runs (:func:`match_plan`),
how many rows one ranks (:data:`RANK_WINDOW`), and the whole query on one connection
(:func:`find_items`)."""

from __future__ import annotations

import dataclasses
import sqlite3
from collections.abc import Callable, Mapping

from memoryos_actors.cold_items import ColdCandidates
from memoryos_actors.store.cold_rows import (
    CAND_COLUMNS,
    COLUMNS,
    KIND_TOKENS,
    cand_rows,
    row_items,
)

__all__ = [
    "COMMON_MAX",
    "COMMON_MIN",
    "COMMON_SHARE",
    "FILL_WINDOW",
    "RANK_WINDOW",
    "find_items",
    "match_plan",
    "newest_rowids",
    "ranked_rowids",
]

#: Query terms in more than this share of the items (at least ``COMMON_MIN`` items, at
#: most ``COMMON_MAX``) are left out of the FTS5 MATCH when a rarer query term is there:
#: FTS5 ranks every row the MATCH finds, so long posting lists cost most of a query at
#: 100,000 items, and their BM25 weight is low. The absolute bound keeps that cost from
#: growing with the history. They still count in the BM25 of every candidate (scored from
#: its terms). When every term is common, see :func:`match_plan`.
COMMON_SHARE = 0.05
COMMON_MIN = 50
COMMON_MAX = 1000

RANK_WINDOW = 2000
"""Most items one FTS5 MATCH of a cold query ranks. FTS5 ranks every row a MATCH finds
(about 1 us a row on this project's 2-core machine), so a query whose terms are in tens of
thousands of items would cost tens of milliseconds, growing with the history. When a MATCH
may find more, only the newest ``RANK_WINDOW`` items it finds are ranked: the cost of a
cold query is bounded whatever the history, and among many equally plain matches the newer
ones are preferred."""

FILL_WINDOW = 500
"""Most items a MATCH ranks when it only fills up the candidates of an earlier MATCH of the
same query that found some (when every query term is common: the AND of all of them
first, then the OR of the two rarest, see :func:`match_plan`). The fill's matches are
weak (common terms only, each of a low weight) and ranking a window costs about 4 us an
item at 100,000 items, most of such a query's time. The AND's matches are not ranked
(:func:`newest_rowids`)."""


def match_plan(
    qt: list[str], dfs: Mapping[str, int], n_docs: int
) -> list[tuple[str, tuple[str, ...], int]]:
    """The FTS5 matches a cold query runs, in order, each ``(operator, terms, bound)``:
    ``operator`` is ``"OR"`` or ``"AND"`` over ``terms``, ``bound`` an upper bound of the
    items it matches (from the document frequencies ``dfs``).

    Query terms no item has are dropped, and so are terms in more than half of the items
    (and more than ``COMMON_MAX``) while another term is left: in this history they are
    stop words (their Robertson-Sparck Jones weight is negative; BM25's idf, which keeps
    them positive, gives them less than 0.7 against 3 for a term in one item in twenty),
    they hardly narrow an AND, and FTS5's ranking reads each MATCH term's whole posting
    list, so they cost most of a query. They still count in the BM25 of every candidate.
    Then: when rare terms are present (see ``COMMON_SHARE``), one OR over them. When
    every term is common: first the items that have all of them (an AND, far fewer and
    better matches than any one common term; its newest, see :func:`newest_rowids`),
    then an OR of the two rarest to fill up.
    """
    present = [t for t in qt if dfs.get(t, 0) > 0]
    if not present:
        return []
    telling = [t for t in present if 2 * dfs[t] <= n_docs or dfs[t] <= COMMON_MAX]
    if telling:
        present = telling
    cap = min(max(COMMON_MIN, int(COMMON_SHARE * n_docs)), COMMON_MAX)
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


def ranked_rowids(db: sqlite3.Connection, match: str, n: int, bound: int, window: int) -> list[int]:
    """Rowids of the ``n`` items FTS5 ranks best for ``match``, ranking at most ``window``
    of them (:data:`RANK_WINDOW`, or :data:`FILL_WINDOW` for a fill): when ``match`` may
    find more (``bound``, an upper bound), only the newest ``window`` it finds are ranked
    (best first; equal ranks, newer first)."""
    if bound > window:
        # Rowids follow archive order, and FTS5 walks a MATCH in rowid order: the newest
        # ``window`` matches, each with its rank, cost one walk of the window.
        rows = db.execute(
            "SELECT rowid, rank FROM fts WHERE fts MATCH ? ORDER BY rowid DESC LIMIT ?",
            (match, window),
        ).fetchall()
        rows.sort(key=lambda r: (r[1], -r[0]))
        return [int(r[0]) for r in rows[:n]]
    return [
        int(r)
        for (r,) in db.execute(
            "SELECT rowid FROM fts WHERE fts MATCH ? ORDER BY rank LIMIT ?", (match, n)
        )
    ]


def newest_rowids(db: sqlite3.Connection, match: str, n: int) -> list[int]:
    """Rowids of the newest ``n`` items ``match`` finds, newest first, unranked: for the
    AND of every query term (when all are common, see :func:`match_plan`). Each row it
    finds holds every term, and FTS5's rank keeps no row lengths here (``columnsize=0``),
    so it would tell them apart only by how often a term repeats; yet ranking first walks
    each term's whole posting list (FTS5 counts each term's rows for its idf): most of
    such a query's time at 100,000 items."""
    return [
        int(r)
        for (r,) in db.execute(
            "SELECT rowid FROM fts WHERE fts MATCH ? ORDER BY rowid DESC LIMIT ?", (match, n)
        )
    ]


def find_items(
    db: sqlite3.Connection,
    qt: list[str],
    limit: int,
    kinds: tuple[str, ...],
    light: bool,
    n_docs: int,
    total_len: int,
    kind_count: Callable[[sqlite3.Connection, str], int],
) -> ColdCandidates:
    """The ``limit`` items of ``kinds`` FTS5 ranks best for the (sorted, distinct) stemmed
    terms ``qt``, read on ``db`` (see :meth:`ColdIndex.search
    <memoryos_actors.store.cold.ColdIndex.search>`), with the statistics BM25 needs:
    ``n_docs`` and ``total_len`` of the whole index, each term's document frequency, and
    with ``light`` its id in the vocabulary. ``kind_count`` gives the items of a kind."""
    marks = ",".join("?" for _ in qt)
    df_rows = db.execute(f"SELECT term, n FROM df WHERE term IN ({marks})", qt).fetchall()
    dfs = {str(t): int(n) for t, n in df_rows if int(n) > 0}
    term_ids = None
    if light:  # narrow rows hold term ids: the query's are looked up for them
        ids = dict.fromkeys(qt, -1)
        ids.update(db.execute(f"SELECT term, id FROM vocab WHERE term IN ({marks})", qt))
        term_ids = tuple(ids.items())
    stats = ColdCandidates(
        n_docs=n_docs, total_len=total_len, df=tuple(dfs.items()), term_ids=term_ids
    )
    pages_only = kinds == ("page",)
    # Kinds with no item are not asked for; for the rarer kinds (facts, traits), the
    # MATCH finds at most as many items as there are of them.
    kinds = tuple(k for k in kinds if k in KIND_TOKENS and (pages_only or kind_count(db, k) > 0))
    plan = match_plan(qt, dfs, n_docs)
    tokens = [KIND_TOKENS[k] for k in kinds]
    if not plan or not tokens:
        return stats  # no indexed item has any query term
    if not pages_only:
        n_kind = sum(kind_count(db, k) for k in kinds)
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
        if op == "AND":
            # Every row it finds holds every query term: see :func:`newest_rowids`.
            found = newest_rowids(db, match, fetch)
        else:
            # A MATCH that fills up after an earlier one found items ranks a smaller window.
            found = ranked_rowids(db, match, fetch, bound, FILL_WINDOW if order else RANK_WINDOW)
        for rowid in found:
            if rowid not in seen:
                seen.add(rowid)
                order.append(rowid)
    order = order[:fetch]
    if not order:
        return stats
    rank_of = {rowid: i for i, rowid in enumerate(order)}
    rows = db.execute(
        f"SELECT id, {CAND_COLUMNS if light else COLUMNS} FROM "
        f"{'cand' if light else 'items'} WHERE id IN ({','.join('?' for _ in order)})",
        order,
    ).fetchall()
    rows.sort(key=lambda r: rank_of[r[0]])
    # Rows of other kinds are left out before any item is made (the kind is column 1
    # of a narrow row, 2 of a full one).
    at = 1 if light else 2
    kept = [r[1:] for r in rows if r[at] in kinds][:limit]
    if light:
        return dataclasses.replace(stats, items=tuple(cand_rows(kept)))
    return dataclasses.replace(stats, items=tuple(row_items(kept)))
