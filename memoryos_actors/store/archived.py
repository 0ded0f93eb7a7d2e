"""The archive's records, typed: what leaves MTM and LPM for a user's archive file.

Three kinds, each with its encoding (the msgpack-ready dict the archive file holds, key
``"t"`` naming the kind) and its decoding (:func:`decode_archived`):

* :class:`ArchivedSegment` — a segment MTM evicted, with the pages it held and their
  embeddings;
* :class:`ArchivedPage` — one page pushed out of a full segment;
* :class:`ArchivedFact` — a user fact (``kind="fact"``) or an assistant trait
  (``kind="agent_trait"``) pushed out of LPM's FIFO.

Pages, segments and KB entries stay the plain dicts of their ``to_dict`` (the archive is
read far more often than it is turned back into objects: a listing, the cold index and an
export need a few fields each). Embeddings are little-endian float16 bytes
(:func:`emb_to_f16`, :func:`emb_from_f16`). The MTM and LPM actors write these records;
the cold index, recovery, repair, the listings and the server read them through
:func:`decode_archived`, so a record's shape is written down once, here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

__all__ = [
    "ARCHIVED_KINDS",
    "ArchiveRecord",
    "ArchivedFact",
    "ArchivedPage",
    "ArchivedSegment",
    "decode_archived",
    "emb_from_f16",
    "emb_to_f16",
]

ARCHIVED_KINDS = ("segment", "page", "fact", "agent_trait")
"""The record kinds (key ``"t"``) the archive holds items of; other kinds (a repaired
record's placeholder) hold none."""


def emb_to_f16(emb: npt.ArrayLike) -> bytes:
    """An embedding as the little-endian float16 bytes archive records carry."""
    return np.asarray(emb, dtype=np.float32).astype("<f2").tobytes()


def emb_from_f16(raw: object) -> npt.NDArray[np.float32] | None:
    """The float32 vector of :func:`emb_to_f16` bytes, or None when ``raw`` is not such
    bytes (a record written before embeddings were archived has none)."""
    if not isinstance(raw, (bytes, bytearray)) or not raw or len(raw) % 2:
        return None
    return np.frombuffer(bytes(raw), dtype="<f2").astype(np.float32)


@dataclass(frozen=True, slots=True)
class ArchivedPage:
    """One page pushed out of a full segment.

    Attributes:
        page: the page as ``Page.to_dict`` gives it (``seq``, ``page_id``, ``query``, ...).
        segment_id: the segment it left, or None when unknown.
        keywords: the page's keywords, sorted.
        emb: its embedding as float16 bytes, or None.
    """

    page: Mapping[str, Any]
    segment_id: str | None = None
    keywords: tuple[str, ...] = ()
    emb: bytes | None = None

    kind: Literal["page"] = field(default="page", init=False)

    @property
    def pages(self) -> Sequence[Mapping[str, Any]]:
        """The pages the record holds: this one."""
        return (self.page,)

    def seqs(self) -> list[int]:
        """Turn seqs of the pages the record holds."""
        return [int(self.page["seq"])]

    def encode(self) -> dict[str, Any]:
        """The dict the archive file holds."""
        rec: dict[str, Any] = {"t": "page", "keywords": list(self.keywords), "page": self.page}
        if self.segment_id:
            rec["segment_id"] = self.segment_id
        if self.emb is not None:
            rec["emb"] = self.emb
        return rec


@dataclass(frozen=True, slots=True)
class ArchivedSegment:
    """A segment MTM evicted, with its pages.

    Attributes:
        segment: the segment as ``SegmentRecord.to_dict`` gives it (``segment_id``,
            ``summary``, ``heat``, ``created``, ``pages``: page dicts, ...).
        keywords: the segment's keywords (K_s), sorted.
        embs: the pages' embeddings as float16 bytes, by turn seq as a string.
    """

    segment: Mapping[str, Any]
    keywords: tuple[str, ...] = ()
    embs: Mapping[str, bytes] = field(default_factory=dict)

    kind: Literal["segment"] = field(default="segment", init=False)

    @property
    def segment_id(self) -> str:
        """The segment's id."""
        return str(self.segment["segment_id"])

    @property
    def pages(self) -> Sequence[Mapping[str, Any]]:
        """The pages the record holds, oldest first."""
        pages: Sequence[Mapping[str, Any]] = self.segment.get("pages") or ()
        return pages

    def seqs(self) -> list[int]:
        """Turn seqs of the pages the record holds."""
        return [int(p["seq"]) for p in self.pages]

    def emb_of(self, seq: int) -> bytes | None:
        """The float16 embedding of the page of turn ``seq``, or None."""
        found = self.embs.get(str(seq))
        if found is None:  # records of an early version keyed them by int
            found = self.embs.get(seq)  # type: ignore[call-overload]
        return found

    def with_pages(self, pages: Iterable[Mapping[str, Any]]) -> ArchivedSegment:
        """This record holding only ``pages``."""
        return ArchivedSegment({**self.segment, "pages": list(pages)}, self.keywords, self.embs)

    def encode(self) -> dict[str, Any]:
        """The dict the archive file holds."""
        return {
            "t": "segment",
            "keywords": list(self.keywords),
            "segment": self.segment,
            "embs": dict(self.embs),
        }


@dataclass(frozen=True, slots=True)
class ArchivedFact:
    """A user fact or an assistant trait pushed out of LPM's FIFO.

    Attributes:
        kind: ``"fact"`` or ``"agent_trait"``.
        entry: the entry as ``KBEntry.to_dict`` gives it (``entry_id``, ``text``, ...).
        assistant: the assistant an ``agent_trait`` belongs to (``""`` for a fact).
        emb: its embedding as float16 bytes, or None.
    """

    kind: Literal["fact", "agent_trait"]
    entry: Mapping[str, Any]
    assistant: str = ""
    emb: bytes | None = None

    @property
    def pages(self) -> Sequence[Mapping[str, Any]]:
        """The pages the record holds: none."""
        return ()

    def seqs(self) -> list[int]:
        """Turn seqs of the pages the record holds: none."""
        return []

    def encode(self) -> dict[str, Any]:
        """The dict the archive file holds."""
        rec: dict[str, Any] = {"t": self.kind, "entry": self.entry, "assistant": self.assistant}
        if self.emb is not None:
            rec["emb"] = self.emb
        return rec


ArchiveRecord = ArchivedSegment | ArchivedPage | ArchivedFact
"""Any record of the archive that holds items."""


def decode_archived(rec: Mapping[str, Any]) -> ArchiveRecord | None:
    """The typed record of an archive file's dict, or None for a kind that holds no item
    (a repaired record's placeholder, a kind of a later version).

    Raises:
        KeyError, TypeError: a record of a known kind without what that kind must hold (a
            page without ``seq`` is caught by the readers of damaged data; see repair).
    """
    kind = rec.get("t")
    if kind == "segment":
        segment = rec["segment"]
        if not isinstance(segment, Mapping):
            raise TypeError(f"archived segment is a {type(segment).__name__}, not a map")
        return ArchivedSegment(segment, tuple(rec.get("keywords") or ()), rec.get("embs") or {})
    if kind == "page":
        page = rec["page"]
        if not isinstance(page, Mapping):
            raise TypeError(f"archived page is a {type(page).__name__}, not a map")
        sid = rec.get("segment_id")
        return ArchivedPage(
            page,
            str(sid) if sid else None,
            tuple(rec.get("keywords") or ()),
            rec.get("emb"),
        )
    if kind in ("fact", "agent_trait"):
        return ArchivedFact(
            kind,
            rec.get("entry") or {},
            str(rec.get("assistant") or ""),
            rec.get("emb"),
        )
    return None
