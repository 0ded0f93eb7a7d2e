"""Per-memory edits of one user: deletions and corrections of single memories.

A user's memories each have an id, the same in every tier and in the archive:

* ``page:<page id>`` (``page:p12``): a stored turn, in STM, MTM or the archive;
* ``segment:<segment id>`` (``segment:s3``): a topic segment with its summary and pages;
* ``fact:<entry id>`` (``fact:f7``): a knowledge-base fact, in LPM or archived;
* ``agent_trait:<assistant>:<entry id>``: a trait of an assistant, in LPM or archived;
* ``trait:<name>`` (``trait:sense_of_humor``): one of the 90 user traits.

An edit is a WAL record (``{"t": "edit", ...}``) that the LPM actor writes and replays; its
state keeps every edit (the history of the user's memories). The archive is append-only,
so it is never rewritten: :class:`EditLog` is applied to its records wherever they are
read (the cold index, listings, exports), and the hot tiers drop deleted pages when they
replay the WAL. This module is pure: no I/O.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from ..errors import InvalidInput

__all__ = [
    "DERIVED_ACTIONS",
    "EditRecord",
    "EDITABLE_KINDS",
    "MEMORY_KINDS",
    "EditLog",
    "MemoryRef",
    "cold_item_id",
    "parse_memory_id",
]

#: Kinds of memory, as they appear in memory ids.
MEMORY_KINDS = ("page", "segment", "fact", "agent_trait", "trait")

#: Kinds whose value can be corrected (pages and segments can only be deleted).
EDITABLE_KINDS = ("fact", "agent_trait", "trait")

#: What a deletion does to a memory derived from the deleted pages that quotes them (see
#: :attr:`EditRecord.derived`).
DERIVED_ACTIONS = ("delete", "revert", "scrub")

#: Longest memory id accepted, in characters.
_MAX_ID = 512


@dataclasses.dataclass(frozen=True, slots=True)
class MemoryRef:
    """A parsed memory id: its kind, its key within the kind, and (agent traits) the
    assistant it belongs to."""

    kind: str
    key: str
    assistant: str = ""

    @property
    def memory_id(self) -> str:
        """The id in its text form."""
        if self.kind == "agent_trait":
            return f"agent_trait:{self.assistant}:{self.key}"
        return f"{self.kind}:{self.key}"


def parse_memory_id(memory_id: object) -> MemoryRef:
    """Parse ``memory_id``; raises :class:`InvalidInput` saying what a valid id looks like."""
    if not isinstance(memory_id, str) or not memory_id or len(memory_id) > _MAX_ID:
        raise InvalidInput(
            f"memory_id must be a non-empty str of at most {_MAX_ID} "
            f"characters, got {memory_id!r:.80}"
        )
    kind, sep, rest = memory_id.partition(":")
    if not sep or kind not in MEMORY_KINDS or not rest:
        raise InvalidInput(
            f"memory_id {memory_id!r:.80} is not one of page:<id>, segment:<id>, fact:<id>, "
            "agent_trait:<assistant>:<id>, trait:<name>"
        )
    if kind == "agent_trait":
        assistant, sep, key = rest.rpartition(":")
        if not sep or not assistant or not key:
            raise InvalidInput(
                f"memory_id {memory_id!r:.80}: an agent trait's id is "
                "agent_trait:<assistant>:<entry id>"
            )
        return MemoryRef(kind, key, assistant)
    return MemoryRef(kind, rest)


def cold_item_id(ref: MemoryRef) -> str | None:
    """The cold index's id of the item ``ref`` names (None: the cold tier has no such
    items)."""
    if ref.kind == "page":
        return ref.key
    if ref.kind == "fact":
        return f"fact::{ref.key}"
    if ref.kind == "agent_trait":
        return f"agent_trait:{ref.assistant}:{ref.key}"
    return None


def _page_seq(page_id: str) -> int | None:
    return int(page_id[1:]) if page_id[:1] == "p" and page_id[1:].isdigit() else None


@dataclasses.dataclass(frozen=True, slots=True)
class EditRecord:
    """One per-memory edit, as the LPM actor logs it in the WAL and answers it.

    Attributes:
        op: ``"delete"`` or ``"correct"``.
        memory_id: the memory edited (``fact:f3``, ``page:p12``, ``trait:humor``, ...).
        old: its value before (``""`` once a later deletion erased it).
        ts: when, seconds since the epoch.
        pages: turn seqs of the pages a deletion removes.
        chains: ``(chain id, deleted seq, last seq stored then)`` of the dialogue chains a
            deleted page was in (their later chain summaries may quote it).
        segments: the segments whose summary may quote a deleted page.
        new: a correction's new value.
        evidence: a trait correction's evidence.
        emb: a fact or agent-trait correction's embedding, float16 bytes.
        lsn: the record's WAL LSN (0 before it is logged, and once imported).
        derived: what a deletion of pages did to the memories distilled from them that
            quote them (:mod:`memoryos_actors.tiers.quotes`), as ``(memory id, action,
            history positions)``: ``"delete"`` a fact or agent trait (its history keeps
            no value); ``"revert"`` a trait: the changes of its history at those positions
            (0 the oldest) go, and it takes the newest change left, or is cleared;
            ``"scrub"`` the same for a trait whose value stays, and for a fact or agent
            trait the user corrected (its text is the user's): the old values of its
            history are erased. Replaying the record does exactly that again: no text of
            the deleted pages is needed, and none is kept.
    """

    op: str
    memory_id: str
    old: Any
    ts: float
    pages: tuple[int, ...] = ()
    chains: tuple[tuple[str, int, int], ...] = ()
    segments: tuple[str, ...] = ()
    new: str | None = None
    evidence: str | None = None
    emb: bytes | None = None
    lsn: int = 0
    derived: tuple[tuple[str, str, tuple[int, ...]], ...] = ()

    @property
    def rewrote(self) -> tuple[str, ...]:
        """The memory ids :attr:`derived` names, in its order."""
        return tuple(mid for mid, _action, _at in self.derived)

    def encode(self) -> dict[str, Any]:
        """The WAL record (``{"t": "edit", ...}``; ``lsn`` only when set)."""
        rec: dict[str, Any] = {
            "t": "edit",
            "op": self.op,
            "id": self.memory_id,
            "old": self.old,
            "pages": list(self.pages),
            "chains": [[c, s, u] for c, s, u in self.chains],
            "segments": list(self.segments),
            "ts": self.ts,
        }
        if self.new is not None:
            rec["new"] = self.new
        if self.evidence is not None:
            rec["evidence"] = self.evidence
        if self.emb is not None:
            rec["emb"] = self.emb
        if self.lsn:
            rec["lsn"] = self.lsn
        if self.derived:
            rec["derived"] = [[mid, action, list(at)] for mid, action, at in self.derived]
        return rec

    @classmethod
    def decode(cls, rec: Mapping[str, Any]) -> EditRecord:
        """The edit of a WAL or export record (see :meth:`encode`)."""
        new, evidence, emb = rec.get("new"), rec.get("evidence"), rec.get("emb")
        return cls(
            op=str(rec["op"]),
            memory_id=str(rec["id"]),
            old=rec.get("old", ""),
            ts=float(rec.get("ts", 0.0) or 0.0),
            pages=tuple(int(s) for s in rec.get("pages") or ()),
            chains=tuple((str(c), int(s), int(u)) for c, s, u in rec.get("chains") or ()),
            segments=tuple(str(x) for x in rec.get("segments") or ()),
            new=None if new is None else str(new),
            evidence=None if evidence is None else str(evidence),
            emb=bytes(emb) if emb else None,
            lsn=int(rec.get("lsn", 0) or 0),
            derived=derived_of(rec),
        )


def derived_of(rec: Mapping[str, Any]) -> tuple[tuple[str, str, tuple[int, ...]], ...]:
    """The :attr:`EditRecord.derived` of a WAL or export record, checked: a malformed
    entry raises :class:`InvalidInput`."""
    out = []
    for entry in rec.get("derived") or ():
        if not isinstance(entry, (list, tuple)) or len(entry) != 3:
            raise InvalidInput(
                f"an edit's derived entry must be [id, action, [positions]], got {entry!r:.80}"
            )
        mid, action, at = entry
        ref = parse_memory_id(mid)
        allowed = ("revert", "scrub") if ref.kind == "trait" else ("delete", "scrub")
        if action not in allowed or ref.kind not in ("fact", "agent_trait", "trait"):
            raise InvalidInput(f"an edit's derived entry {entry!r:.80} is not one a deletion makes")
        if not isinstance(at, (list, tuple)) or not all(
            isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in at
        ):
            raise InvalidInput(f"an edit's derived positions must be ints >= 0, got {at!r:.80}")
        out.append((ref.memory_id, str(action), tuple(int(i) for i in at)))
    return tuple(out)


class EditLog:
    """Every edit of one user, oldest first, with the lookups readers need.

    Records: ``{"t": "edit", "op": "delete" | "correct", "id": <memory id>, "old": <value
    before>, "new": <value after, corrections>, "pages": [<page seqs removed>], "emb":
    <f16 bytes of the corrected text's embedding, or absent>, "ts": <seconds>, "lsn": <WAL
    LSN, 0 once imported>}``. A page's deletion also names the dialogue chains it was in
    (``"chains": [[<chain id>, <its seq>, <last seq stored then>], ...]``) and the segment
    that held it (``"segments"``): the chain summaries of the later pages of those chains
    stored by then, and that segment's summary, may quote it, so they are cleared (a new
    summary is asked for the segment). It also names the facts, agent traits and traits
    that quoted a deleted page and what became of each (``"derived": [[<memory id>,
    <action>, [<positions>]], ...]``, see :attr:`EditRecord.derived`).
    """

    def __init__(self, records: Iterable[Mapping[str, Any]] = ()) -> None:
        self.records: list[dict[str, Any]] = []
        self.deleted: set[str] = set()
        self.deleted_pages: set[int] = set()
        self.corrected: dict[str, dict[str, Any]] = {}
        #: Chain id -> ``(deleted seq, last seq then)`` ranges: the chain summaries of the
        #: pages in those ranges (ends included) are cleared.
        self.scrub_chains: dict[str, list[tuple[int, int]]] = {}
        #: Segments whose summary may quote a deleted page.
        self.scrub_segments: set[str] = set()
        self._keys: set[tuple[int, str, str, float]] = set()
        for rec in records:
            self.add(rec)

    def __len__(self) -> int:
        return len(self.records)

    def __bool__(self) -> bool:
        return bool(self.records)

    def add(self, record: Mapping[str, Any]) -> bool:
        """Take ``record`` in; False if it is already here (same LSN, id, op and time)."""
        key = (
            int(record.get("lsn", 0) or 0),
            str(record.get("id")),
            str(record.get("op")),
            float(record.get("ts", 0.0) or 0.0),
        )
        if key in self._keys:
            return False
        self._keys.add(key)
        rec = dict(record)
        self.records.append(rec)
        mid = str(rec["id"])
        if rec.get("op") == "delete":
            # A deletion erases the memory's values from its history too, and those of
            # what it took along (a fact that quoted a deleted page).
            self._erase(mid, everything=True)
            self.deleted.add(mid)
            self.corrected.pop(mid, None)
            for other, action, _at in derived_of(rec):
                if action == "delete":
                    self._erase(other, everything=True)
                    self.deleted.add(other)
                    self.corrected.pop(other, None)
                elif not other.startswith("trait:"):
                    self._erase(other, everything=False)  # a text the user corrected stays
            self.deleted_pages.update(int(s) for s in rec.get("pages") or ())
            for chain, seq, upto in rec.get("chains") or ():
                self.scrub_chains.setdefault(str(chain), []).append((int(seq), int(upto)))
            self.scrub_segments.update(str(s) for s in rec.get("segments") or ())
        elif rec.get("op") == "correct":
            if mid in self.deleted and not mid.startswith("trait:"):
                # A correction that raced the deletion and was logged after it (the LPM
                # refuses those now): it changes nothing, and keeps no text.
                rec["old"] = ""
                for value_key in ("new", "emb", "evidence"):
                    rec.pop(value_key, None)
            else:
                self.corrected[mid] = rec
        return True

    def _erase(self, mid: str, *, everything: bool) -> None:
        """Erase the values of ``mid`` from the records before the newest: the old ones
        only (``everything`` False: a correction's new value is the memory's text)."""
        for earlier in self.records[:-1]:
            if earlier.get("id") == mid:
                earlier["old"] = ""
                if everything:
                    for value_key in ("new", "emb", "evidence"):
                        earlier.pop(value_key, None)

    def to_state(self) -> list[dict[str, Any]]:
        """The records, for a snapshot or an export."""
        return [dict(r) for r in self.records]

    @classmethod
    def from_recovered(
        cls, state: Mapping[str, Any] | None, records: Iterable[tuple[int, Mapping[str, Any]]]
    ) -> EditLog:
        """The edits of a snapshot's LPM state plus those in the WAL tail after it."""
        log = cls(((state or {}).get("lpm") or {}).get("edits") or ())
        for lsn, rec in records:
            if rec.get("t") == "edit":
                log.add({**rec, "lsn": lsn})
        return log

    def history(self, memory_id: str) -> list[dict[str, Any]]:
        """The edits of ``memory_id``, oldest first: its own, and the deletions that took
        it along (their ``"id"`` is the deleted page's)."""
        return [
            dict(r)
            for r in self.records
            if r.get("id") == memory_id
            or any(entry[0] == memory_id for entry in r.get("derived") or ())
        ]

    def is_deleted(self, memory_id: str) -> bool:
        """Whether ``memory_id`` was deleted."""
        return memory_id in self.deleted

    def gone(self, memory_id: str) -> bool:
        """Whether ``memory_id`` names a memory that was deleted and cannot come back: a
        page (itself or with its segment), a segment, a fact or an agent trait. A trait is
        never gone: one of the 90 dimensions can be learned or set again."""
        if memory_id.startswith("trait:"):
            return False
        if memory_id in self.deleted:
            return True
        seq = _page_seq(memory_id[len("page:") :]) if memory_id.startswith("page:") else None
        return seq is not None and seq in self.deleted_pages

    def scrubbed(self, chain_id: str, seq: int) -> bool:
        """Whether the chain summary of page ``seq`` of chain ``chain_id`` may quote a
        deleted page (and must be cleared)."""
        ranges = self.scrub_chains.get(chain_id, ()) if chain_id else ()
        return any(first < seq <= upto for first, upto in ranges)

    def scrub_page(self, page: dict[str, Any]) -> dict[str, Any]:
        """A page record with its chain summary cleared if it may quote a deleted page."""
        if page.get("meta_chain") and self.scrubbed(
            str(page.get("chain_id") or ""), int(page["seq"])
        ):
            return {**page, "meta_chain": ""}
        return page

    def deleted_segments(self) -> set[str]:
        """Ids of the segments deleted whole (``s3``)."""
        return {m[len("segment:") :] for m in self.deleted if m.startswith("segment:")}

    def page_deleted(self, seq: int) -> bool:
        """Whether the page of turn ``seq`` was deleted (itself or with its segment)."""
        return seq in self.deleted_pages

    # -- archive records ---------------------------------------------------------------------

    def apply(self, record: dict[str, Any]) -> dict[str, Any] | None:
        """``record`` (an archive record) as the edits leave it: None when nothing of it is
        left, the record itself when no edit touches it, else an edited copy."""
        if not self.records:
            return record
        kind = record.get("t")
        if kind == "segment":
            seg = record.get("segment") or {}
            if f"segment:{seg.get('segment_id')}" in self.deleted:
                return None
            pages = seg.get("pages") or []
            kept = [self.scrub_page(p) for p in pages if int(p["seq"]) not in self.deleted_pages]
            scrub = str(seg.get("segment_id")) in self.scrub_segments
            if (
                len(kept) == len(pages)
                and not scrub
                and all(a is b for a, b in zip(kept, pages, strict=True))
            ):
                return record
            if not kept:
                return None
            embs = record.get("embs") or {}
            seqs = {int(p["seq"]) for p in kept}
            out = {
                **record,
                "segment": {**seg, "pages": kept},
                "embs": {k: v for k, v in embs.items() if int(k) in seqs},
            }
            if scrub:
                kws = sorted({str(k) for p in kept for k in p.get("keywords") or ()})
                out["segment"] = {**out["segment"], "summary": "", "keywords": kws}
                out["keywords"] = kws
            return out
        if kind == "page":
            page = record.get("page") or {}
            if int(page["seq"]) in self.deleted_pages:
                return None
            scrubbed = self.scrub_page(page)
            return record if scrubbed is page else {**record, "page": scrubbed}
        if kind in ("fact", "agent_trait"):
            entry = record.get("entry") or {}
            owner = str(record.get("assistant", ""))
            mid = (
                f"fact:{entry.get('entry_id')}"
                if kind == "fact"
                else f"agent_trait:{owner}:{entry.get('entry_id')}"
            )
            if mid in self.deleted:
                return None
            fix = self.corrected.get(mid)
            if fix is None:
                return record
            out = {**record, "entry": {**entry, "text": str(fix["new"])}}
            out.pop("emb", None)
            if fix.get("emb"):
                out["emb"] = fix["emb"]
            return out
        return record

    def apply_all(
        self, records: Iterable[tuple[int, dict[str, Any]]]
    ) -> Iterator[tuple[int, dict[str, Any]]]:
        """``(seq, record)`` pairs with the edits applied; records left empty are skipped."""
        for seq, rec in records:
            out = self.apply(rec)
            if out is not None:
                yield seq, out

    def page_ids(self) -> set[str]:
        """Page ids of the deleted pages."""
        return {f"p{s}" for s in self.deleted_pages}


def page_seq(page_id: str) -> int | None:
    """The turn seq of a page id ``p<seq>`` (None for anything else)."""
    return _page_seq(page_id)
