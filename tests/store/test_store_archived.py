"""The archive's typed records (store/archived.py): each kind encodes to the dict the
archive file holds and decodes back to itself; kinds that hold no item decode to None; a
record of a known kind missing what it must hold is an error, not an empty record."""

from __future__ import annotations

from typing import Any

import msgpack
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memoryos_actors.store.archived import (
    ArchivedFact,
    ArchivedPage,
    ArchivedSegment,
    decode_archived,
    emb_from_f16,
    emb_to_f16,
)

texts = st.text(max_size=20)
keywords = st.lists(st.text(min_size=1, max_size=8), max_size=4, unique=True).map(
    lambda ks: tuple(sorted(ks))
)
embs = st.none() | st.binary(min_size=2, max_size=16).filter(lambda b: len(b) % 2 == 0)


@st.composite
def page_dicts(draw: Any, seq: int | None = None) -> dict[str, Any]:
    s = draw(st.integers(min_value=1, max_value=10_000)) if seq is None else seq
    return {
        "seq": s,
        "page_id": f"p{s}",
        "query": draw(texts),
        "response": draw(texts),
        "timestamp": draw(st.floats(min_value=0, max_value=2e9)),
    }


@st.composite
def records(draw: Any) -> ArchivedPage | ArchivedSegment | ArchivedFact:
    kind = draw(st.sampled_from(["page", "segment", "fact", "agent_trait"]))
    if kind == "page":
        sid = draw(st.none() | st.sampled_from(["s1", "s22"]))
        return ArchivedPage(draw(page_dicts()), sid, draw(keywords), draw(embs))
    if kind == "segment":
        seqs = draw(st.lists(st.integers(1, 500), min_size=1, max_size=4, unique=True))
        pages = [draw(page_dicts(s)) for s in sorted(seqs)]
        seg = {"segment_id": "s7", "summary": draw(texts), "pages": pages}
        vectors = {str(s): draw(embs) for s in seqs}
        return ArchivedSegment(
            seg, draw(keywords), {k: v for k, v in vectors.items() if v is not None}
        )
    entry = {"entry_id": draw(st.text(min_size=1, max_size=6)), "text": draw(texts)}
    owner = draw(st.sampled_from(["", "bot"])) if kind == "agent_trait" else ""
    return ArchivedFact(kind, entry, owner, draw(embs))


@settings(max_examples=200, deadline=None)
@given(records())
def test_every_record_survives_the_archive_file_encoding(
    record: ArchivedPage | ArchivedSegment | ArchivedFact,
) -> None:
    # Through msgpack as the archive file stores it (bytes stay bytes, maps stay maps).
    stored = msgpack.unpackb(msgpack.packb(record.encode()), raw=False, strict_map_key=False)
    back = decode_archived(stored)
    assert back == record
    assert back is not None and back.kind == stored["t"]
    assert back.seqs() == [int(p["seq"]) for p in back.pages]


def test_kinds_that_hold_no_item_decode_to_none() -> None:
    assert decode_archived({"t": "lost", "repaired": 1.0}) is None
    assert decode_archived({"t": "a-kind-of-a-later-version"}) is None
    assert decode_archived({}) is None


def test_a_known_kind_without_what_it_must_hold_is_an_error() -> None:
    with pytest.raises(KeyError):
        decode_archived({"t": "segment"})
    with pytest.raises(KeyError):
        decode_archived({"t": "page"})
    with pytest.raises(TypeError):
        decode_archived({"t": "page", "page": ["not", "a", "map"]})


def test_segment_embeddings_of_an_early_version_keyed_by_int_are_found() -> None:
    seg = decode_archived(
        {"t": "segment", "segment": {"segment_id": "s1", "pages": []}, "embs": {3: b"\x00<"}}
    )
    assert isinstance(seg, ArchivedSegment)
    assert seg.emb_of(3) == b"\x00<" and seg.emb_of(4) is None


def test_a_segment_keeps_only_the_pages_asked_for() -> None:
    pages = [{"seq": 1, "page_id": "p1"}, {"seq": 2, "page_id": "p2"}]
    seg = ArchivedSegment({"segment_id": "s1", "pages": pages}, ("a",), {"1": b"\x00<"})
    fewer = seg.with_pages(pages[1:])
    assert fewer.seqs() == [2] and seg.seqs() == [1, 2]
    assert fewer.segment_id == "s1" and fewer.keywords == ("a",)


def test_embeddings_round_trip_at_half_precision() -> None:
    v = np.array([0.6, -0.8, 0.0], dtype=np.float32)
    back = emb_from_f16(emb_to_f16(v))
    assert back is not None and back.dtype == np.float32
    assert np.allclose(back, v, atol=1e-3)
    assert emb_from_f16(None) is None and emb_from_f16(b"\x00") is None
    assert emb_from_f16("not bytes") is None
