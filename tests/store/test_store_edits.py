"""Per-memory edits in the store: memory ids, the edit log over archive records, and the
cold index applying edits in step with a rebuild from the archive."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memoryos_actors.errors import InvalidInput
from memoryos_actors.store import UserStore
from memoryos_actors.store.archived import emb_to_f16
from memoryos_actors.store.cold import COLD_FILE
from memoryos_actors.store.edits import EditLog, MemoryRef, cold_item_id, parse_memory_id

keys = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=20)


@given(kind=st.sampled_from(["page", "segment", "fact", "trait"]), key=keys)
def test_memory_ids_round_trip(kind: str, key: str) -> None:
    ref = MemoryRef(kind, key)
    assert parse_memory_id(ref.memory_id) == ref


@given(assistant=keys, key=keys.filter(lambda k: ":" not in k))
def test_agent_trait_ids_round_trip_whatever_the_assistant_id(assistant: str, key: str) -> None:
    ref = MemoryRef("agent_trait", key, assistant)
    assert parse_memory_id(ref.memory_id) == ref
    assert cold_item_id(ref) == f"agent_trait:{assistant}:{key}"


@pytest.mark.parametrize(
    "bad",
    ["", "page", "page:", ":p1", "note:p1", "agent_trait:x", "agent_trait::a1", "x" * 513, 7, None],
)
def test_malformed_memory_ids_are_refused(bad: object) -> None:
    with pytest.raises(InvalidInput):
        parse_memory_id(bad)


def _page(seq: int, query: str, chain: str = "", meta: str = "") -> dict[str, Any]:
    return {
        "user_id": "u",
        "assistant_id": "default",
        "page_id": f"p{seq}",
        "seq": seq,
        "query": query,
        "response": "ok",
        "timestamp": 1000.0 + seq,
        "meta_chain": meta,
        "chain_id": chain,
        "keywords": [query.split()[0].lower()],
    }


def _unit(seed: int, dim: int = 8) -> np.ndarray:
    v = np.random.default_rng(seed).standard_normal(dim).astype(np.float32)
    return v / np.linalg.norm(v)


def _segment(sid: str, pages: list[dict[str, Any]], summary: str = "") -> dict[str, Any]:
    return {
        "t": "segment",
        "keywords": ["k"],
        "segment": {"segment_id": sid, "summary": summary, "keywords": ["k"], "pages": pages},
        "embs": {str(p["seq"]): emb_to_f16(_unit(p["seq"])) for p in pages},
    }


def _fact(entry_id: str, text: str) -> dict[str, Any]:
    return {
        "t": "fact",
        "assistant": "",
        "entry": {"entry_id": entry_id, "text": text, "timestamp": 5.0, "source_segment": "s1"},
        "emb": emb_to_f16(_unit(hash(entry_id) % 1000)),
    }


def _delete(mid: str, pages: list[int] = (), lsn: int = 0, **extra: Any) -> dict[str, Any]:
    return {
        "t": "edit",
        "op": "delete",
        "id": mid,
        "old": "",
        "pages": list(pages),
        "ts": float(lsn),
        "lsn": lsn,
        **extra,
    }


def test_the_edit_log_removes_deleted_pages_and_segments_from_archive_records() -> None:
    log = EditLog([_delete("page:p2", [2], 1), _delete("segment:s9", [7, 8], 2)])
    seg = _segment("s1", [_page(1, "alpha"), _page(2, "beta"), _page(3, "gamma")])
    out = log.apply(seg)
    assert out is not None and [p["seq"] for p in out["segment"]["pages"]] == [1, 3]
    assert set(out["embs"]) == {"1", "3"}
    assert log.apply(_segment("s9", [_page(7, "x"), _page(8, "y")])) is None
    assert log.apply({"t": "page", "page": _page(2, "beta")}) is None
    untouched = _segment("s5", [_page(5, "delta")])
    assert log.apply(untouched) is untouched
    assert EditLog().apply(seg) is seg


def test_a_deleted_page_clears_the_summaries_that_may_quote_it() -> None:
    log = EditLog([_delete("page:p2", [2], 1, chains=[["c1", 2, 4]], segments=["s1"])])
    seg = _segment(
        "s1",
        [
            _page(1, "alpha", "c1", "chain 1"),
            _page(2, "beta", "c1", "1+2"),
            _page(3, "gamma", "c1", "1+2+3"),
            _page(5, "eps", "c1", "late"),
        ],
        summary="alpha beta gamma",
    )
    out = log.apply(seg)
    assert out is not None
    metas = {p["seq"]: p["meta_chain"] for p in out["segment"]["pages"]}
    # Before the deleted page: kept; after it up to the last seq stored then: cleared;
    # pages stored after the deletion: kept.
    assert metas == {1: "chain 1", 3: "", 5: "late"}
    assert out["segment"]["summary"] == ""
    other = {"t": "page", "page": _page(4, "zeta", "c1", "1+2+3+4")}
    assert log.apply(other)["page"]["meta_chain"] == ""


def test_an_archived_summary_is_cleared_only_by_the_deletions_it_had_not_seen() -> None:
    # Two deletions name s1: a summary archived after MTM scrubbed for the first keeps its
    # text unless the second came after it; a record that names no deletion, or one this
    # log does not hold (from another user's log, through an import), is cleared.
    log = EditLog(
        [
            _delete("page:p2", [2], 1, segments=["s1"]),
            _delete("page:p9", [9], 2, segments=["s1"]),
            _delete("page:p8", [8], 3, segments=["s7"]),
        ]
    )
    first, second, third = (log.deletion_key(n) for n in (1, 2, 3))
    assert log.deletion_key(0) is None and first == (1, "page:p2", 1.0)
    with pytest.raises(ValueError, match="3 deletions"):
        log.deletion_key(4)
    seg = _segment("s1", [_page(1, "alpha"), _page(3, "gamma")], summary="alpha gamma")

    def summary(through: Any) -> str:
        rec = {**seg, "scrubbed_through": list(through)} if through is not None else seg
        out = log.apply(rec)
        assert out is not None
        return str(out["segment"]["summary"])

    assert summary(None) == ""
    assert summary(first) == ""  # the second deletion came after it
    assert summary(second) == "alpha gamma"
    assert summary(third) == "alpha gamma"
    assert summary((5, "page:p2", 1.0)) == ""  # not this log's
    assert log.segments_scrubbed_since(first) == {"s1", "s7"}
    assert log.segments_scrubbed_since(third) == frozenset()
    assert log.segments_scrubbed_since(None) == log.segments_scrubbed_after(0)


@pytest.mark.parametrize(
    "raw", [None, [], [1, "page:p2"], ["1", "page:p2", 1.0], [1, 2, 1.0], [True, "x", 1.0], "x"]
)
def test_a_malformed_scrub_mark_reads_as_no_deletion_seen(raw: Any) -> None:
    log = EditLog([_delete("page:p2", [2], 1, segments=["s1"])])
    seg = _segment("s1", [_page(1, "alpha")], summary="alpha")
    out = log.apply({**seg, "scrubbed_through": raw})
    assert out is not None and out["segment"]["summary"] == ""


def test_a_correction_changes_an_archived_fact_and_a_later_deletion_erases_its_history() -> None:
    new_emb = emb_to_f16(_unit(99))
    log = EditLog(
        [
            {
                "t": "edit",
                "op": "correct",
                "id": "fact:f1",
                "old": "User likes tea.",
                "new": "User likes coffee.",
                "emb": new_emb,
                "ts": 1.0,
                "lsn": 1,
            }
        ]
    )
    out = log.apply(_fact("f1", "User likes tea."))
    assert out["entry"]["text"] == "User likes coffee." and out["emb"] == new_emb
    assert log.history("fact:f1")[0]["old"] == "User likes tea."
    log.add(_delete("fact:f1", lsn=2))
    assert log.apply(_fact("f1", "User likes tea.")) is None
    assert [(r["op"], r["old"], r.get("new")) for r in log.history("fact:f1")] == [
        ("correct", "", None),
        ("delete", "", None),
    ]


def test_a_deleted_page_takes_the_facts_that_quoted_it_from_the_archive_and_history() -> None:
    log = EditLog(
        [
            {
                "t": "edit",
                "op": "correct",
                "id": "fact:f1",
                "old": "User's sister is Quillonby.",
                "new": "User has a sister.",
                "ts": 1.0,
                "lsn": 1,
            },
            {
                "t": "edit",
                "op": "correct",
                "id": "fact:f2",
                "old": "User's brother is Quillonby.",
                "new": "User has a brother.",
                "ts": 2.0,
                "lsn": 2,
            },
        ]
    )
    log.add(
        _delete(
            "page:p4",
            [4],
            3,
            derived=[
                ["fact:f1", "delete", []],
                ["fact:f2", "scrub", []],
                ["trait:travel", "revert", [0, 2]],
            ],
        )
    )
    # f1 went with the page: gone from the archive, its history keeps no value.
    assert log.apply(_fact("f1", "User's sister is Quillonby.")) is None
    assert log.gone("fact:f1") and not log.gone("fact:f2") and not log.gone("trait:travel")
    assert [(r["op"], r["old"], r.get("new")) for r in log.history("fact:f1")] == [
        ("correct", "", None),
        ("delete", "", None),
    ]
    # f2's text is the user's correction: it stays, its old value is erased.
    assert log.apply(_fact("f2", "x"))["entry"]["text"] == "User has a brother."
    assert [(r["op"], r["old"], r.get("new")) for r in log.history("fact:f2")] == [
        ("correct", "", "User has a brother."),
        ("delete", "", None),
    ]
    assert [r["id"] for r in log.history("trait:travel")] == ["page:p4"]


@pytest.mark.parametrize(
    "derived",
    [
        "fact:f1",
        [["fact:f1", "delete"]],
        [["fact:f1", "revert", []]],  # a fact is deleted or scrubbed
        [["trait:travel", "delete", []]],  # a trait is reverted or scrubbed
        [["page:p1", "delete", []]],
        [["fact:f1", "delete", [-1]]],
        [["fact:f1", "delete", [True]]],
        [["nope", "delete", []]],
    ],
)
def test_a_malformed_derived_entry_is_refused(derived: Any) -> None:
    from memoryos_actors.store.edits import EditRecord

    with pytest.raises(InvalidInput):
        EditRecord.decode(_delete("page:p1", [1], 1, derived=derived))


def test_the_same_edit_is_taken_once() -> None:
    rec = _delete("page:p2", [2], 7)
    log = EditLog([rec])
    assert log.add(rec) is False and len(log) == 1
    state = {"lpm": {"edits": log.to_state()}}
    again = EditLog.from_recovered(
        state, [(7, {k: v for k, v in rec.items() if k != "lsn"}), (8, _delete("page:p3", [3]))]
    )
    assert [r["id"] for r in again.records] == ["page:p2", "page:p3"]


def _archive(store: UserStore, n_segments: int = 6) -> None:
    words = ["glacier", "violin", "sourdough", "telescope", "compost", "parser"]
    seq = 0
    for s in range(n_segments):
        pages = []
        for _ in range(3):
            seq += 1
            pages.append(_page(seq, f"{words[seq % 6]} story number {seq}"))
        store.archive_append(_segment(f"s{s + 1}", pages))
    store.archive_append(_fact("f1", "User rebuilds old bicycles."))
    store.archive_append(_fact("f2", "User sings in a choir."))


def _stats(
    store: UserStore,
) -> tuple[int, int, dict[str, int], set[str], dict[str, int], dict[str, Any]]:
    db = store.cold._db
    assert db is not None
    df = dict(db.execute("SELECT term, n FROM df WHERE n > 0").fetchall())
    # The per-kind counts kept as items come and go (a fresh index counts from zero).
    kinds = {k: store.cold._kind_count(db, k) for k in ("page", "fact", "agent_trait")}
    # Each item's narrow row, its term ids read back as terms: a corrected item's are its
    # new ones (the ids themselves differ between an index and its rebuild: numbered as
    # met).
    vocab = dict(db.execute("SELECT id, term FROM vocab").fetchall())
    # (``nq`` is left out: a corrected item's is 0 in both tables, "no query side known",
    # and a rebuild counts it afresh.)
    ids = {
        item_id: (
            kind,
            seq,
            ts,
            chars,
            kws,
            emb,
            [vocab[int(i)] for i in np.frombuffer(tids, dtype="<u4")],
        )
        for item_id, kind, seq, ts, chars, kws, emb, tids in db.execute(
            "SELECT item_id, c.kind, c.seq, c.ts, c.chars, c.keywords, c.emb, c.tids "
            "FROM items JOIN cand AS c USING (id)"
        )
    }
    return store.cold._n_docs, store.cold._total_len, df, store.cold.item_ids(), kinds, ids


@settings(max_examples=15, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            [
                "page:p1",
                "page:p5",
                "page:p9",
                "segment:s4",
                "fact:f1",
                "fact:f2",
                "correct:f2",
                "page:p3+fact:f1",  # the page quoted by an archived fact
            ]
        ),
        max_size=5,
        unique=True,
    )
)
def test_applying_edits_to_an_index_equals_rebuilding_it(tmp_path_factory, edits) -> None:
    root = tmp_path_factory.mktemp("edits")
    store = UserStore(root, "u", fsync="never")
    try:
        _archive(store)
        store.cold.search(["glacier"])  # index everything before the edits
        for lsn, what in enumerate(edits, start=1):
            if what == "correct:f2":
                rec = {
                    "t": "edit",
                    "op": "correct",
                    "id": "fact:f2",
                    "old": "x",
                    "new": "User sings opera loudly.",
                    "emb": emb_to_f16(_unit(5)),
                    "ts": float(lsn),
                    "lsn": lsn,
                }
            elif what == "page:p3+fact:f1":
                rec = _delete("page:p3", [3], lsn, derived=[["fact:f1", "delete", []]])
            elif what.startswith("segment:"):
                rec = _delete(what, [10, 11, 12], lsn)
            elif what.startswith("page:"):
                rec = _delete(what, [int(what[len("page:p") :])], lsn)
            else:
                rec = _delete(what, lsn=lsn)
            store.edits.add(rec)
            assert store.cold.sync_edits() == 1
        applied = _stats(store)
        store.cold.rebuild()
        store.cold.search(["glacier"])
        assert _stats(store) == applied
        found = store.cold.search(["opera"], kinds=("fact",)).items
        assert [i.text for i in found] == (
            ["User sings opera loudly."] if "correct:f2" in edits and "fact:f2" not in edits else []
        )
        took = "fact:f1" in edits or "page:p3+fact:f1" in edits
        assert store.cold.contains("fact::f1") is not took
    finally:
        store.close()


def test_a_closed_index_applies_the_edits_it_missed_when_opened(tmp_path: Path) -> None:
    store = UserStore(tmp_path, "u", fsync="never")
    _archive(store)
    store.cold.search(["glacier"])
    assert store.cold.contains("p1")
    store.cold.close()
    store.edits.add(_delete("page:p1", [1], 1))
    assert not store.cold.contains("p1")  # opening it applied the edit
    store.close()
    assert (tmp_path / store.dir.relative_to(tmp_path) / COLD_FILE).exists()


@settings(max_examples=100, deadline=None)
@given(
    st.sampled_from(["delete", "correct"]),
    st.sampled_from(["fact:f3", "page:p12", "trait:humor", "agent_trait:bot:a1"]),
    st.lists(st.integers(1, 10_000), max_size=4),
    st.lists(st.tuples(st.text(max_size=5), st.integers(1, 99), st.integers(1, 99)), max_size=3),
    st.none() | st.text(max_size=10),
    st.none() | st.binary(min_size=2, max_size=8),
    st.integers(0, 1000),
    st.lists(
        st.sampled_from(
            [
                ("fact:f1", "delete", ()),
                ("agent_trait:bot:a2", "scrub", ()),
                ("trait:travel", "revert", (0, 3)),
            ]
        ),
        max_size=3,
        unique=True,
    ),
)
def test_an_edit_record_survives_the_wal_encoding(
    op: str,
    memory_id: str,
    pages: list[int],
    chains: list[tuple[str, int, int]],
    new: str | None,
    emb: bytes | None,
    lsn: int,
    derived: list[tuple[str, str, tuple[int, ...]]],
) -> None:
    import msgpack

    from memoryos_actors.store.edits import EditRecord

    edit = EditRecord(
        op,
        memory_id,
        "before",
        12.5,
        tuple(pages),
        tuple(chains),
        ("s1",),
        new,
        None,
        emb,
        lsn,
        tuple(derived),
    )
    stored = msgpack.unpackb(msgpack.packb(edit.encode()), raw=False)
    assert stored["t"] == "edit" and stored["id"] == memory_id
    assert EditRecord.decode(stored) == edit
    # What readers of the WAL record (the edit log, the cold index) find in it.
    assert [int(s) for s in stored["pages"]] == pages and ("new" in stored) == (new is not None)
