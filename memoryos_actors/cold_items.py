"""What the cold index answers: archived items (:class:`ColdItem`), their narrow scoring
rows (:class:`ColdRow`) and a query's candidates with the statistics to score them
(:class:`ColdCandidates`).

A leaf module: :mod:`memoryos_actors.store.cold` makes these, the MTM tier core
(:mod:`memoryos_actors.tiers.mtm`) scores them, and neither imports the other.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

__all__ = ["ColdCandidates", "ColdItem", "ColdRow"]


@dataclass(frozen=True, slots=True)
class ColdItem:
    """One archived item as the cold index holds it.

    ``seq`` is the page's turn seq (``None`` for facts and traits), ``timestamp`` seconds
    since the epoch, ``archive_seq`` the archive record it came from, ``terms`` its index
    terms (with repeats, in order; read from the index, a
    :class:`~memoryos_actors.lexicon.TermString`, split only if iterated), ``embedding``
    a float32 unit vector or ``None`` when the archive record carried none, ``record`` the
    page or KB-entry dict as archived.
    ``query_terms`` is how many of a page's ``terms`` come from its query side (the user's
    words; they come first), or ``None`` when the index does not know (rows indexed before
    it counted them).
    """

    item_id: str
    kind: str
    seq: int | None
    segment_id: str | None
    timestamp: float
    archive_seq: int
    text: str
    keywords: frozenset[str]
    terms: Sequence[str]
    embedding: npt.NDArray[np.float32] | None
    raw_record: dict[str, Any] | bytes
    query_terms: int | None = None

    #: Text and record included (a :class:`ColdRow` has neither).
    complete = True

    @property
    def chars(self) -> int:
        """Length of ``text`` in characters."""
        return len(self.text)

    @property
    def record(self) -> dict[str, Any]:
        """The page or KB-entry dict as archived."""
        raw = self.raw_record
        if isinstance(raw, bytes):
            import msgpack

            decoded: dict[str, Any] = msgpack.unpackb(raw, raw=False, strict_map_key=False)
            return decoded
        return raw

    @property
    def owner(self) -> str:
        """The assistant an agent trait belongs to (``""`` for a fact or a page)."""
        return str(self.record.get("assistant", "")) if self.kind != "page" else ""

    @property
    def memory_id(self) -> str:
        """Its memory id: ``page:p3``, ``fact:f7``, ``agent_trait:<assistant>:a2``."""
        if self.kind == "page":
            return f"page:{self.item_id}"
        entry_id = str(self.record.get("entry_id", ""))
        if self.kind == "fact":
            return f"fact:{entry_id}"
        return f"agent_trait:{self.owner}:{entry_id}"

    @property
    def entry_text(self) -> str:
        """A fact's or agent trait's sentence as archived (its index text if none)."""
        return str(self.record.get("text", self.text))

    @property
    def source_segment(self) -> str | None:
        """The segment a fact or agent trait was distilled from, as archived (None or
        ``""`` when not known)."""
        source = self.record.get("source_segment")
        return None if source is None else str(source)

    def page_parts(self) -> tuple[str, str, str | None, str | None]:
        """A page's ``(query, response, assistant id, chain id)`` as archived (ids None
        when empty)."""
        page = self.record
        return (
            str(page.get("query", "")),
            str(page.get("response", "")),
            str(page.get("assistant_id", "")) or None,
            str(page.get("chain_id") or "") or None,
        )


class ColdRow(NamedTuple):
    """What scoring needs of one archived item, read without its text and record (the
    cold index's narrow ``cand`` table: a query reads hundreds of candidates and returns a
    few; their full :class:`ColdItem` comes from :meth:`ColdIndex.pages_by_seq`).

    Fields as in :class:`ColdItem`; ``chars`` is the length of its text in characters and
    ``term_ids`` its terms, in order, as ids in the index's vocabulary
    (:data:`~memoryos_actors.lexicon.TERM_ID_DTYPE` bytes, for
    :func:`~memoryos_actors.lexicon.term_id_counts`; see
    :meth:`ColdCandidates.ids_of`). ``query_terms`` is known for every page. A named tuple
    (immutable, made in one step): a query reads hundreds.
    """

    kind: str
    seq: int | None
    timestamp: float
    chars: int
    keywords: frozenset[str]
    term_ids: bytes
    embedding: npt.NDArray[np.float32] | None
    query_terms: int | None

    @property
    def complete(self) -> bool:
        """False: neither text nor record (see :class:`ColdItem` for those)."""
        return False


@dataclass(frozen=True, slots=True)
class ColdCandidates:
    """Lexical candidates from the cold tier plus the statistics to score them with BM25.

    ``n_docs`` and ``total_len`` cover every item indexed; ``df`` maps each query term to
    the number of cold items containing it. ``items`` are best first by FTS5's own rank.
    ``items`` are :class:`ColdRow` s when asked for ``light`` ones.
    ``term_ids`` maps each query term looked up to its id in the index's vocabulary (-1:
    no indexed item ever had it), or is ``None`` when they were not looked up; with it,
    :class:`ColdRow` s' ``term_ids`` count the query's terms (see :meth:`ids_of`).
    """

    items: tuple[ColdItem, ...] | tuple[ColdRow, ...] = ()
    n_docs: int = 0
    total_len: int = 0
    df: tuple[tuple[str, int], ...] = ()
    term_ids: tuple[tuple[str, int], ...] | None = None

    def ids_of(self, terms_: Sequence[str]) -> list[int] | None:
        """The vocabulary id of each of ``terms_`` (-1 for a term no item has), or ``None``
        when one of them was not looked up (count them in the items' ``terms`` then)."""
        if not terms_:
            return []
        if self.term_ids is None:
            return None
        known = dict(self.term_ids)
        out = [known.get(t) for t in terms_]
        return None if any(i is None for i in out) else out  # type: ignore[return-value]

    def df_of(self, term: str) -> int:
        """Cold document frequency of ``term`` (0 when it is not a query term)."""
        for t, n in self.df:
            if t == term:
                return n
        return 0
