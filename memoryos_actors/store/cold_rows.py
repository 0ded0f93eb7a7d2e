"""How the cold index stores an item: the items of an archive record, and its rows read
back as items (:class:`~memoryos_actors.cold_items.ColdItem`) or as narrow scoring rows
(:class:`~memoryos_actors.cold_items.ColdRow`).

Pure functions (no database of their own); :mod:`memoryos_actors.store.cold` runs the
queries.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from memoryos_actors.cold_items import ColdItem, ColdRow
from memoryos_actors.lexicon import TermString, terms
from memoryos_actors.store.formats import (
    ArchivedFact,
    ArchivedPage,
    ArchivedSegment,
    ArchiveRecord,
    EditRecord,
    emb_from_f16,
)
from memoryos_actors.store.memory_ids import cold_item_id, parse_memory_id

__all__ = [
    "CAND_COLUMNS",
    "COLUMNS",
    "KIND_TOKENS",
    "cand_rows",
    "edit_item_ids",
    "embeddings",
    "f16_to_f32",
    "fts_text",
    "page_text",
    "query_terms",
    "record_items",
    "row_items",
]

#: A token each item's FTS5 row carries for its kind, so a query for facts matches facts
#: only (and does not rank the far more numerous pages first and filter after LIMIT).
#: Not a stemmed word of any language; never counted in ``df`` or the corpus length.
KIND_TOKENS = {"page": "kindq0page", "fact": "kindq0fact", "agent_trait": "kindq0agent"}

COLUMNS = "item_id, kind, seq, segment_id, ts, archive_seq, text, keywords, terms, emb, record, nq"

#: The narrow side of an item (table ``cand``, same rowid as ``items``): what scoring reads.
#: An item's row in ``items`` spans several pages (text, record, terms, embedding: ~8 KB
#: for a LongMemEval page), so reading hundreds of candidates walked ~3 pages each; here a
#: row (term ids, embedding, keywords, ~2 KB) fits in one.
CAND_COLUMNS = "kind, seq, ts, chars, nq, keywords, tids, emb"


def fts_text(kind: str, terms_: str) -> str:
    """The text an item's FTS5 row indexes: its terms and its kind token."""
    token = KIND_TOKENS.get(kind, "")
    return f"{terms_} {token}" if token else terms_


def page_text(page: Mapping[str, Any]) -> str:
    return f"{page.get('query', '')} {page.get('response', '')}"


def query_terms(page: Mapping[str, Any]) -> int:
    """How many index terms a page's query side gives: the query and the response are
    joined by a space and no token spans it, so these are the page's first terms."""
    return len(terms(str(page.get("query", ""))))


def record_items(seq: int, found: ArchiveRecord) -> Iterator[ColdItem]:
    """The items archive record ``seq`` holds. Older records without embeddings are
    indexed lexically only."""
    if isinstance(found, ArchivedSegment | ArchivedPage):
        sid = found.segment_id or None
        for page in found.pages:
            pseq = int(page["seq"])
            text = page_text(page)
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
                query_terms=query_terms(page),
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


_F16_TABLE: npt.NDArray[np.float32] | None = None


def f16_to_f32(raw: bytes) -> npt.NDArray[np.float32]:
    """Little-endian float16 values as float32: a look-up of each value's bits in a table
    of all 65,536 conversions (256 KiB, made once by numpy's own conversion, so the same
    bits), several times faster than numpy's per-value float16 conversion; a query decodes
    hundreds of embeddings."""
    global _F16_TABLE
    if _F16_TABLE is None:
        _F16_TABLE = np.arange(65536, dtype=np.uint16).view("<f2").astype(np.float32)
    out: npt.NDArray[np.float32] = _F16_TABLE[np.frombuffer(raw, dtype="<u2")]
    return out


def embeddings(blobs: Sequence[bytes | None]) -> list[npt.NDArray[np.float32] | None]:
    """Stored float16 embeddings as float32 vectors (None stays None): a batch of one size
    decoded together (one conversion, each vector a row of it)."""
    sizes = {len(b) for b in blobs if b is not None}
    if len(sizes) == 1 and (size := sizes.pop()) and size % 2 == 0:
        full = [b for b in blobs if b is not None]
        mat = f16_to_f32(b"".join(full)).reshape(len(full), size // 2)
        it = iter(mat)
        return [None if b is None else next(it) for b in blobs]
    return [None if b is None else emb_from_f16(b) for b in blobs]


def row_items(rows: Iterable[tuple[Any, ...]]) -> list[ColdItem]:
    """Items from ``items`` rows (columns :data:`COLUMNS`); the embeddings of a batch are
    decoded together (one float16-to-float32 conversion, each item a row of it)."""
    rows = list(rows)
    embs = embeddings([r[9] for r in rows])
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


def cand_rows(rows: Iterable[tuple[Any, ...]]) -> list[ColdRow]:
    """:class:`ColdRow` s from ``cand`` rows (columns :data:`CAND_COLUMNS`; SQLite gives
    the columns' own types: seq, chars and nq int or None, ts float)."""
    rows = list(rows)
    embs = embeddings([r[7] for r in rows])
    make, empty = tuple.__new__, frozenset[str]()
    return [
        make(
            ColdRow, (kind, seq, ts, chars, frozenset(kws.split()) if kws else empty, tids, emb, nq)
        )
        for (kind, seq, ts, chars, nq, kws, tids, _blob), emb in zip(rows, embs, strict=True)
    ]


def edit_item_ids(edit: EditRecord) -> list[str]:
    """Ids of the cold items an edit record touches (a deletion of pages: also the
    archived facts and agent traits that quoted them, see ``EditRecord.derived``)."""
    mid = edit.memory_id
    kind, _, rest = mid.partition(":")
    if kind in ("page", "segment"):
        took = [
            cold_item_id(parse_memory_id(other))
            for other, action, _at in edit.derived
            if action == "delete"
        ]
        return [f"p{int(s)}" for s in edit.pages] + [i for i in took if i]
    if kind == "fact":
        return [f"fact::{rest}"]
    if kind == "agent_trait":
        return [mid]
    return []
