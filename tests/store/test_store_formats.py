"""The record formats have one owner (``store/formats.py``) and did not change on disk (#43).

Three checks:

* every frame of the WAL and archive files of ``tests/data/v1_datadir.tar.gz`` (written by
  main before the formats module existed) decodes to a typed record whose encoding packs
  to the very bytes on disk;
* for every record kind, a record encodes to what the code before the formats module
  wrote for the same content (the old writers are copied below, byte for byte in msgpack);
* for every record kind, decoding an encoded record gives the record back, and encoding a
  decoded map gives the map back.
"""

from __future__ import annotations

import dataclasses
import json
import struct
import tarfile
from collections import Counter
from pathlib import Path
from typing import Any

import msgpack
from hypothesis import given
from hypothesis import strategies as st
from strategies import (
    agent_profiles,
    ids,
    kb_entries,
    keyword_sets,
    pages,
    segment_records,
    texts,
    timestamps,
    user_profiles,
)

from memoryos_actors.messages import AgentProfile, Page, UserProfile
from memoryos_actors.store.formats import (
    AgentProfileRecord,
    ArchivedFact,
    ArchivedPage,
    ArchivedSegment,
    EditRecord,
    LostRecord,
    MetaRecord,
    PersonaRecord,
    RememberRecord,
    TurnRecord,
    UnknownRecord,
    UserProfileRecord,
    decode_archived,
    decode_wal,
    emb_to_f16,
    encode_edit_state,
)
from memoryos_actors.store.snapshot import read_snapshot

_DATA = Path(__file__).resolve().parents[1] / "data"
_HEADER_SIZE = 6 + 2 + 8 + 4
_FRAME = struct.Struct(">IIQ")


def _pack(rec: dict[str, Any]) -> bytes:
    return bytes(msgpack.packb(rec, use_bin_type=True))


def _unpack(payload: bytes) -> dict[str, Any]:
    out: dict[str, Any] = msgpack.unpackb(payload, raw=False, strict_map_key=False)
    return out


def _payloads(data: bytes) -> list[bytes]:
    """The record payloads of a framed log's bytes, in order."""
    out, at = [], _HEADER_SIZE
    while at < len(data):
        length = _FRAME.unpack_from(data, at)[0]
        out.append(data[at + _FRAME.size : at + _FRAME.size + length])
        at += _FRAME.size + length
    return out


def _v1_logs(name: str) -> list[bytes]:
    """The payloads of every user's ``name`` log in the v1 data directory."""
    out: list[bytes] = []
    with tarfile.open(_DATA / "v1_datadir.tar.gz") as tar:
        for member in tar.getmembers():
            if member.isfile() and member.name.endswith("/" + name):
                f = tar.extractfile(member)
                assert f is not None
                out.extend(_payloads(f.read()))
    return out


def test_every_wal_record_of_a_v1_directory_decodes_and_encodes_to_its_bytes() -> None:
    kinds: Counter[str] = Counter()
    for payload in _v1_logs("wal.log"):
        record = decode_wal(_unpack(payload))
        assert not isinstance(record, UnknownRecord), _unpack(payload)
        kinds[type(record).__name__] += 1
        assert _pack(record.encode()) == payload, record
    assert set(kinds) == {
        "TurnRecord",
        "MetaRecord",
        "PersonaRecord",
        "UserProfileRecord",
        "AgentProfileRecord",
        "EditRecord",
        "LostRecord",
    }, kinds


def test_every_archive_record_of_a_v1_directory_decodes_and_encodes_to_its_bytes() -> None:
    kinds: Counter[str] = Counter()
    for payload in _v1_logs("archive.log"):
        raw = _unpack(payload)
        record = decode_archived(raw)
        if record is None:
            lost = decode_wal(raw)  # a repair's placeholder is the same record in both logs
            assert isinstance(lost, LostRecord)
            kinds["lost"] += 1
            assert _pack(lost.encode()) == payload
            continue
        kinds[record.kind] += 1
        assert _pack(record.encode()) == payload, record
    assert set(kinds) == {"segment", "page", "fact", "agent_trait", "lost"}, kinds


def test_the_edits_a_v1_snapshot_keeps_encode_to_the_same_maps(tmp_path: Path) -> None:
    """A snapshot's LPM state keeps each edit as its WAL map with ``lsn`` last."""
    with tarfile.open(_DATA / "v1_datadir.tar.gz") as tar:
        tar.extractall(tmp_path, filter="data")
    snaps = sorted(tmp_path.rglob("snapshots/*"))
    assert snaps
    seen = 0
    for path in snaps:
        state = read_snapshot(path).state
        for raw in state["lpm"].get("edits") or ():
            assert _pack(encode_edit_state(EditRecord.decode(raw))) == _pack(raw)
            seen += 1
    assert seen


# -- the writers of the code before the formats module, for the same content ---------------


def _old_turn(page: Page, turn_key: str) -> dict[str, object]:
    rec: dict[str, object] = {
        "t": "turn",
        "seq": page.seq,
        "a": page.assistant_id,
        "q": page.query,
        "r": page.response,
        "ts": page.timestamp,
    }
    if turn_key:
        rec["k"] = turn_key
    return rec


def _old_meta(page: Page) -> dict[str, object]:
    return {
        "t": "meta",
        "seq": page.seq,
        "m": page.meta_chain,
        "ch": page.chain_id,
        "k": sorted(page.keywords),
    }


def _old_persona(data: dict[str, Any], assistant: str, segment: str, ts: float, job: str) -> Any:
    record: dict[str, Any] = {
        "t": "persona",
        "assistant": assistant or "default",
        "segment": segment,
        "traits": [
            [str(t["name"]), str(t["level"]), str(t.get("evidence", ""))]
            for t in data.get("traits", ())
        ],
        "facts": [str(f) for f in data.get("facts", ())],
        "agent_traits": [str(a) for a in data.get("agent_traits", ())],
        "degraded": False,
        "ts": ts,
    }
    if job:
        record["job"] = job
    return record


def _old_edit(e: EditRecord) -> dict[str, Any]:
    rec: dict[str, Any] = {
        "t": "edit",
        "op": e.op,
        "id": e.memory_id,
        "old": e.old,
        "pages": list(e.pages),
        "chains": [[c, s, u] for c, s, u in e.chains],
        "segments": list(e.segments),
        "ts": e.ts,
    }
    if e.new is not None:
        rec["new"] = e.new
    if e.evidence is not None:
        rec["evidence"] = e.evidence
    if e.emb is not None:
        rec["emb"] = e.emb
    if e.lsn:
        rec["lsn"] = e.lsn
    if e.derived:
        rec["derived"] = [[mid, action, list(at)] for mid, action, at in e.derived]
    return rec


def _round_trips(record: Any, old: dict[str, Any]) -> None:
    """``record`` encodes to the bytes of ``old`` and decodes back to itself."""
    payload = _pack(record.encode())
    assert payload == _pack(old)
    again = decode_wal(_unpack(payload))
    assert again == record
    assert _pack(again.encode()) == payload


@given(page=pages(), turn_key=st.one_of(st.just(""), ids))
def test_a_turn_record_encodes_as_before_and_round_trips(page: Page, turn_key: str) -> None:
    _round_trips(TurnRecord.of_page(page, turn_key), _old_turn(page, turn_key))
    assert TurnRecord.of_page(page, turn_key).page(page.user_id) == Page(
        page.user_id,
        page.assistant_id,
        page.page_id,
        page.seq,
        page.query,
        page.response,
        page.timestamp,
    )


@given(page=pages())
def test_a_meta_record_encodes_as_before_and_round_trips(page: Page) -> None:
    _round_trips(MetaRecord.of_page(page), _old_meta(page))


_trait_answers = st.lists(
    st.fixed_dictionaries(
        {"name": ids, "level": st.sampled_from(["low", "medium", "high"])},
        optional={"evidence": texts},
    ),
    max_size=3,
)


@given(
    traits=_trait_answers,
    facts=st.lists(texts, max_size=3),
    agent=st.lists(texts, max_size=3),
    assistant=ids,
    segment=ids,
    ts=timestamps,
    job=st.one_of(st.just(""), ids),
)
def test_a_persona_record_from_the_gateway_encodes_as_before_and_round_trips(
    traits: list[dict[str, str]],
    facts: list[str],
    agent: list[str],
    assistant: str,
    segment: str,
    ts: float,
    job: str,
) -> None:
    data = {"traits": traits, "facts": facts, "agent_traits": agent}
    record = PersonaRecord.from_gateway(
        data, assistant_id=assistant, segment_id=segment, degraded=False, timestamp=ts
    )
    if job:
        record = dataclasses.replace(record, job=job)
    _round_trips(record, _old_persona(data, assistant, segment, ts, job))


@given(profile=user_profiles)
def test_a_user_profile_record_encodes_as_before_and_round_trips(profile: UserProfile) -> None:
    _round_trips(UserProfileRecord(profile), {"t": "user_profile", "profile": profile.to_dict()})


@given(profile=agent_profiles, assistant=ids)
def test_an_agent_profile_record_encodes_as_before_and_round_trips(
    profile: AgentProfile, assistant: str
) -> None:
    old = {"t": "agent_profile", "assistant": assistant, "profile": profile.to_dict()}
    _round_trips(AgentProfileRecord(assistant, profile), old)


_memory_ids = st.one_of(
    st.integers(1, 99).map(lambda n: f"page:p{n}"),
    st.integers(1, 99).map(lambda n: f"fact:f{n}"),
    st.integers(1, 99).map(lambda n: f"agent_trait:default:a{n}"),
    st.just("trait:humor"),
)
_derived = st.tuples(
    st.integers(1, 99).map(lambda n: f"fact:f{n}"),
    st.sampled_from(["delete", "scrub"]),
    st.lists(st.integers(0, 9), max_size=3).map(tuple),
)
edits = st.builds(
    EditRecord,
    op=st.sampled_from(["delete", "correct"]),
    memory_id=_memory_ids,
    old=texts,
    ts=timestamps,
    pages=st.lists(st.integers(1, 10**6), max_size=3).map(tuple),
    chains=st.lists(st.tuples(ids, st.integers(1, 99), st.integers(1, 99)), max_size=2).map(tuple),
    segments=st.lists(ids, max_size=2).map(tuple),
    new=st.one_of(st.none(), texts),
    evidence=st.one_of(st.none(), texts),
    emb=st.one_of(st.none(), st.binary(min_size=2, max_size=16)),
    lsn=st.integers(0, 10**9),
    derived=st.lists(_derived, max_size=2).map(tuple),
)


@given(edit=edits)
def test_an_edit_record_encodes_as_before_and_round_trips(edit: EditRecord) -> None:
    _round_trips(edit, _old_edit(edit))
    state = encode_edit_state(edit)
    assert list(state)[-1] == "lsn" and EditRecord.decode(state) == edit


@given(repaired=st.one_of(st.none(), timestamps))
def test_a_lost_placeholder_encodes_as_before_and_round_trips(repaired: float | None) -> None:
    old: dict[str, Any] = {"t": "lost"}
    if repaired is not None:
        old["repaired"] = repaired
    _round_trips(LostRecord(repaired), old)


@given(
    fields=st.dictionaries(ids, st.one_of(texts, st.integers(), st.binary()), max_size=4),
    kind=st.one_of(st.none(), ids.filter(lambda k: k not in _KNOWN)),
)
def test_a_record_of_an_unknown_kind_is_kept_as_it_is(fields: dict[str, Any], kind: str) -> None:
    raw = {**({"t": kind} if kind is not None else {}), **fields}
    record = decode_wal(raw)
    assert isinstance(record, UnknownRecord) and record.encode() == raw


_KNOWN = {"turn", "meta", "persona", "user_profile", "agent_profile", "edit", "remember", "lost"}


_metadata_texts = st.one_of(
    st.just(""),
    st.dictionaries(
        ids, st.one_of(texts, st.integers(), st.booleans()), min_size=1, max_size=3
    ).map(lambda d: json.dumps(d, sort_keys=True, separators=(",", ":"))),
)


@given(
    n=st.integers(1, 10**6),
    text=texts.filter(str.strip),
    ts=timestamps,
    metadata=_metadata_texts,
    emb=st.one_of(st.none(), st.binary(min_size=2, max_size=16)),
)
def test_a_remember_record_encodes_and_round_trips(
    n: int, text: str, ts: float, metadata: str, emb: bytes | None
) -> None:
    record = RememberRecord(f"f{n}", text, ts, metadata, emb)
    old: dict[str, Any] = {"t": "remember", "id": f"f{n}", "text": text, "ts": ts}
    if metadata:
        old["meta"] = metadata
    if emb is not None:
        old["emb"] = emb
    _round_trips(record, old)
    entry = record.entry()  # the user fact it adds, marked as remembered
    assert (entry.entry_id, entry.text, entry.origin, entry.metadata) == (
        f"f{n}",
        text,
        "remembered",
        metadata,
    )
    # Archived (pushed out of the KB), it keeps its origin and metadata.
    archived = ArchivedFact.of_entry("fact", entry, "", emb)
    assert decode_archived(_unpack(_pack(archived.encode()))).to_entry() == entry  # type: ignore[union-attr]


@given(entry=kb_entries)
def test_a_learnt_kb_entry_is_stored_as_before(entry: Any) -> None:
    # Only a remembered fact carries origin and metadata: every other entry's map (in
    # snapshots, archives and exports) has the four keys earlier versions wrote.
    assert list(entry.to_dict()) == ["entry_id", "text", "timestamp", "source_segment"]


# -- archive records ----------------------------------------------------------------------

_embs = st.one_of(st.none(), st.binary(min_size=2, max_size=16).filter(lambda b: len(b) % 2 == 0))


def _archive_round_trips(record: Any, old: dict[str, Any]) -> None:
    payload = _pack(record.encode())
    assert payload == _pack(old)
    again = decode_archived(_unpack(payload))
    assert again is not None and _pack(again.encode()) == payload
    assert again.kind == record.kind and again.seqs() == record.seqs()


@given(page=pages(), segment_id=st.one_of(st.none(), ids), emb=_embs)
def test_an_archived_page_encodes_as_before_and_round_trips(
    page: Page, segment_id: str | None, emb: bytes | None
) -> None:
    record = ArchivedPage.of_page(page, segment_id, emb)
    assert record.to_page() == page  # the contents are the Page
    old: dict[str, Any] = {
        "t": "page",
        "keywords": sorted(page.keywords),
        "page": page.to_dict(),
    }
    if segment_id:
        old["segment_id"] = segment_id
    if emb is not None:
        old["emb"] = emb
    _archive_round_trips(record, old)


@given(segment=segment_records(), keywords=keyword_sets)
def test_an_archived_segment_encodes_as_before_and_round_trips(
    segment: Any, keywords: frozenset[str]
) -> None:
    embs = {str(p.seq): emb_to_f16([float(p.seq % 1000), 1.0]) for p in segment.pages}
    record = ArchivedSegment(segment.to_dict(), tuple(sorted(keywords)), embs)
    assert record.to_segment() == segment  # the contents are the SegmentRecord
    assert ArchivedSegment.of_segment(segment, embs).encode() == {
        **record.encode(),
        "keywords": sorted(segment.keywords),
    }
    old = {
        "t": "segment",
        "keywords": sorted(keywords),
        "segment": segment.to_dict(),
        "embs": embs,
    }
    _archive_round_trips(record, old)


@given(
    segment=segment_records(),
    lsn=st.integers(0, 2**40),
    mid=st.text(max_size=20),
    ts=st.floats(allow_nan=False, allow_infinity=False),
)
def test_an_archived_segment_keeps_the_last_deletion_its_summary_had_seen(
    segment: Any, lsn: int, mid: str, ts: float
) -> None:
    record = ArchivedSegment.of_segment(segment, {}, (lsn, mid, ts))
    payload = _pack(record.encode())
    assert _unpack(payload)["scrubbed_through"] == [lsn, mid, ts]
    again = decode_archived(_unpack(payload))
    assert isinstance(again, ArchivedSegment) and again.scrubbed_through == (lsn, mid, ts)
    assert again.with_pages(again.pages[:1]).scrubbed_through == (lsn, mid, ts)
    assert "scrubbed_through" not in ArchivedSegment.of_segment(segment, {}).encode()


@given(
    entry=kb_entries,
    kind=st.sampled_from(["fact", "agent_trait"]),
    assistant=st.one_of(st.just(""), ids),
    emb=_embs,
)
def test_an_archived_fact_encodes_as_before_and_round_trips(
    entry: Any, kind: Any, assistant: str, emb: bytes | None
) -> None:
    record = ArchivedFact.of_entry(kind, entry, assistant, emb)
    assert record.to_entry() == entry  # the contents are the KBEntry
    old: dict[str, Any] = {"t": kind, "entry": entry.to_dict(), "assistant": assistant}
    if emb is not None:
        old["emb"] = emb
    _archive_round_trips(record, old)
