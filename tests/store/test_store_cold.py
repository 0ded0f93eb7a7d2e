"""The cold index: derived from the archive, rebuilt when damaged, gone with the user."""

from __future__ import annotations

import math
import sqlite3
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memoryos_actors.lexicon import CorpusStats, LexIndex, bm25_score, terms
from memoryos_actors.store import UserStore
from memoryos_actors.store.archived import emb_to_f16
from memoryos_actors.store.cold import COLD_FILE
from memoryos_actors.store.cold_rows import fts_text


def _page(seq: int, query: str, response: str = "ok", ts: float = 1000.0) -> dict[str, Any]:
    return {
        "user_id": "alice",
        "assistant_id": "default",
        "page_id": f"p{seq}",
        "seq": seq,
        "query": query,
        "response": response,
        "timestamp": ts + seq,
        "meta_chain": "",
        "chain_id": "",
        "keywords": sorted(set(query.lower().split())),
    }


def _unit(seed: int, dim: int = 8) -> np.ndarray:
    v = np.random.default_rng(seed).standard_normal(dim).astype(np.float32)
    return v / np.linalg.norm(v)


def _segment_record(sid: str, pages: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "t": "segment",
        "keywords": [],
        "segment": {"segment_id": sid, "pages": pages},
        "embs": {str(p["seq"]): emb_to_f16(_unit(p["seq"])) for p in pages},
    }


def _fill(store: UserStore) -> None:
    store.archive_append(
        _segment_record(
            "s1",
            [
                _page(1, "my quokka is called zanzibar"),
                _page(2, "we hiked the granite ridge"),
            ],
        )
    )
    store.archive_append(
        {
            "t": "page",
            "page": _page(3, "the violin needs new strings"),
            "segment_id": "s2",
            "emb": emb_to_f16(_unit(3)),
        }
    )


def _archive_texts(store: UserStore, texts: list[str]) -> None:
    """Archive one page per text, turns 1, 2, ... in order, all from segment s1."""
    for seq, text in enumerate(texts, 1):
        store.archive_append({"t": "page", "page": _page(seq, text), "segment_id": "s1"})


def _open(tmp_path: Path) -> UserStore:
    return UserStore(tmp_path, "alice", fsync="never")


def test_archived_pages_are_indexed_with_segment_time_and_embedding(tmp_path: Path) -> None:
    with _open(tmp_path) as store:
        _fill(store)
        found = store.cold.search(terms("what is my quokka called"), 10)
    assert [i.item_id for i in found.items] == ["p1"]
    item = found.items[0]
    assert (item.kind, item.seq, item.segment_id, item.timestamp) == ("page", 1, "s1", 1001.0)
    assert item.archive_seq == 1
    assert item.embedding is not None
    assert float(item.embedding @ _unit(1)) == pytest.approx(1.0, abs=1e-3)
    assert found.n_docs == 3


def test_a_pushed_out_page_keeps_the_segment_it_left(tmp_path: Path) -> None:
    with _open(tmp_path) as store:
        _fill(store)
        found = store.cold.search(terms("violin strings"), 10)
    assert [(i.item_id, i.segment_id) for i in found.items] == [("p3", "s2")]


def test_a_user_whose_tiers_never_evicted_has_no_cold_index_file(tmp_path: Path) -> None:
    with _open(tmp_path) as store:
        assert store.cold.search(terms("anything at all"), 10).items == ()
        assert store.cold.pages_by_seq([1, 2]) == {}
        path = store.dir / COLD_FILE
    assert not path.exists()


def test_a_deleted_cold_index_is_rebuilt_from_the_archive(tmp_path: Path) -> None:
    with _open(tmp_path) as store:
        _fill(store)
        path = store.dir / COLD_FILE
    path.unlink()
    with _open(tmp_path) as store:
        assert [i.item_id for i in store.cold.search(terms("granite ridge"), 10).items] == ["p2"]
        assert store.cold.item_ids() == {"p1", "p2", "p3"}


def test_a_garbage_cold_index_is_rebuilt_from_the_archive(tmp_path: Path) -> None:
    with _open(tmp_path) as store:
        _fill(store)
        path = store.dir / COLD_FILE
    path.write_bytes(b"this is not an sqlite database" * 100)
    with _open(tmp_path) as store:
        assert [i.item_id for i in store.cold.search(terms("zanzibar"), 10).items] == ["p1"]
        assert store.cold.rebuilds == 1


def test_a_truncated_cold_index_is_rebuilt_from_the_archive(tmp_path: Path) -> None:
    with _open(tmp_path) as store:
        _fill(store)
        path = store.dir / COLD_FILE
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 3])
    with _open(tmp_path) as store:
        assert [i.item_id for i in store.cold.search(terms("violin"), 10).items] == ["p3"]
        assert len(store.cold) == 3


def test_a_cold_index_of_another_user_is_not_trusted(tmp_path: Path) -> None:
    with UserStore(tmp_path, "bob", fsync="never") as bob:
        bob.archive_append(
            {"t": "page", "page": {**_page(9, "bob secret tractor"), "user_id": "bob"}}
        )
        bob_index = (bob.dir / COLD_FILE).read_bytes()
    with _open(tmp_path) as store:
        _fill(store)
        path = store.dir / COLD_FILE
    path.write_bytes(bob_index)
    with _open(tmp_path) as store:
        assert store.cold.search(terms("tractor"), 10).items == ()
        assert store.cold.item_ids() == {"p1", "p2", "p3"}


def test_records_archived_while_the_index_lagged_are_indexed_on_next_search(
    tmp_path: Path,
) -> None:
    with _open(tmp_path) as store:
        _fill(store)
        # Appended behind the index's back (as an import does, or a crash between the
        # archive append and the index update would leave it).
        store.archive.append({"t": "page", "page": _page(4, "the telescope found saturn")})
    with _open(tmp_path) as store:
        assert [i.item_id for i in store.cold.search(terms("saturn"), 10).items] == ["p4"]


def test_a_page_archived_twice_is_indexed_once(tmp_path: Path) -> None:
    with _open(tmp_path) as store:
        _fill(store)
        store.archive_append({"t": "page", "page": _page(3, "the violin needs new strings")})
        assert len(store.cold) == 3
        assert store.cold.search(terms("violin"), 10).df_of("violin") == 1


def test_neighbouring_turns_are_looked_up_by_seq(tmp_path: Path) -> None:
    with _open(tmp_path) as store:
        _fill(store)
        got = store.cold.pages_by_seq([0, 2, 3, 99])
    assert sorted(got) == [2, 3]
    assert got[2].record["query"] == "we hiked the granite ridge"


def test_forget_removes_the_cold_index_with_the_user(tmp_path: Path) -> None:
    with _open(tmp_path) as store:
        _fill(store)
        store.cold.search(terms("quokka"), 10)
        path = store.dir / COLD_FILE
        root, user = store.root, store.user_id
    removed = UserStore.remove(root, user)
    assert str(path) in removed
    assert not path.exists() and not path.parent.exists()


def test_lpm_evictions_are_indexed_as_facts_and_agent_traits(tmp_path: Path) -> None:
    entry = {
        "entry_id": "f7",
        "text": "Alice is allergic to peanuts",
        "timestamp": 5.0,
        "source_segment": "s4",
    }
    with _open(tmp_path) as store:
        store.archive_append(
            {"t": "fact", "entry": entry, "assistant": "default", "emb": emb_to_f16(_unit(7))}
        )
        got = store.cold.search(terms("peanuts allergy"), 10, kinds=("fact", "agent_trait"))
        pages = store.cold.search(terms("peanuts allergy"), 10)
    assert [(i.kind, i.segment_id, i.record["text"]) for i in got.items] == [
        ("fact", "s4", "Alice is allergic to peanuts")
    ]
    assert pages.items == ()


_words = st.sampled_from(
    ["quokka", "ridge", "violin", "saturn", "soup", "bread", "lake", "train", "piano", "garden"]
)
_docs = st.lists(st.lists(_words, min_size=1, max_size=8), min_size=2, max_size=20)


@settings(max_examples=60, deadline=None)
@given(
    docs=_docs,
    split=st.integers(min_value=1, max_value=19),
    query=st.lists(_words, min_size=1, max_size=4),
)
def test_bm25_over_hot_plus_cold_equals_bm25_over_one_corpus(
    docs: list[list[str]], split: int, query: list[str]
) -> None:
    split = min(split, len(docs) - 1)
    whole = LexIndex()
    for i, d in enumerate(docs):
        whole.add(i, d)
    expected = whole.scores(query)
    hot, cold = docs[:split], docs[split:]
    hot_index = LexIndex()
    for i, d in enumerate(hot):
        hot_index.add(i, d)
    cold_df: dict[str, int] = {}
    for d in cold:
        for t in set(d):
            cold_df[t] = cold_df.get(t, 0) + 1
    extra = CorpusStats(len(cold), sum(len(d) for d in cold), cold_df)
    got = hot_index.scores(query, extra)
    n = len(docs)
    avg = sum(len(d) for d in docs) / n
    df = {t: hot_index.df(t) + cold_df.get(t, 0) for t in set(query)}
    for j, d in enumerate(cold):
        s = bm25_score(d, query, n, avg, df)
        if s:
            got[split + j] = s
    assert set(got) == set(expected)
    for key, value in expected.items():
        assert math.isclose(got[key], value, rel_tol=1e-9, abs_tol=1e-12)


def test_a_cold_index_with_incomplete_meta_is_rebuilt(tmp_path: Path) -> None:

    with _open(tmp_path) as store:
        _fill(store)
        path = store.dir / COLD_FILE
    db = sqlite3.connect(str(path))
    db.execute("DELETE FROM meta WHERE key = 'n_docs'")  # as a kill mid-creation could leave it
    db.commit()
    db.close()
    with _open(tmp_path) as store:
        assert store.cold.item_ids() == {"p1", "p2", "p3"}
        assert store.cold.rebuilds == 1


def test_a_facts_query_finds_a_fact_among_many_pages_with_the_same_words(tmp_path: Path) -> None:
    with _open(tmp_path) as store:
        for i in range(1, 61):
            store.archive_append(
                {"t": "page", "page": _page(i, f"zanzibar quokka day {i}"), "segment_id": "s1"}
            )
        store.archive_append(
            {
                "t": "fact",
                "assistant": "",
                "emb": emb_to_f16(_unit(1)),
                "entry": {
                    "entry_id": "f1",
                    "text": "User's quokka is zanzibar.",
                    "timestamp": 1.0,
                    "source_segment": "s1",
                },
            }
        )
        # Pages rank as well as the fact; the kind is part of the match, not a filter
        # applied after the limit.
        found = store.cold.search(terms("zanzibar quokka"), 1, kinds=("fact",))
        assert [i.item_id for i in found.items] == ["fact::f1"]
        pages = store.cold.search(terms("zanzibar quokka"), 5)
        assert len(pages.items) == 5 and {i.kind for i in pages.items} == {"page"}


def test_common_query_terms_are_left_out_of_the_match_when_a_rare_one_is_there() -> None:
    from memoryos_actors.store.cold_query import match_plan

    dfs = {"common": 900, "rare": 3, "mid": 40}
    assert match_plan(["common", "rare", "mid", "absent"], dfs, 1000) == [
        ("OR", ("rare", "mid"), 43)
    ]
    assert match_plan(["common"], dfs, 1000) == [("OR", ("common",), 900)]  # nothing rarer
    assert match_plan(["absent"], dfs, 1000) == []
    # In a small index nothing counts as common.
    assert match_plan(["common", "rare"], {"common": 40, "rare": 1}, 100) == [
        ("OR", ("common", "rare"), 41)
    ]


def test_terms_in_most_items_are_left_out_of_the_match_while_another_term_is_left() -> None:
    from memoryos_actors.store.cold_query import match_plan

    # In 100,000 items: a term in 60,000 is a stop word for the MATCH (it still counts in
    # each candidate's BM25), so the AND is over the telling terms only.
    dfs = {"everywhere": 60_000, "a": 5_000, "b": 3_000}
    assert match_plan(["everywhere", "a", "b"], dfs, 100_000) == [
        ("AND", ("b", "a"), 3_000),
        ("OR", ("b", "a"), 8_000),
    ]
    assert match_plan(["everywhere", "b"], dfs, 100_000) == [("OR", ("b",), 3_000)]
    # Nothing else left: the stop words are all there is to match.
    assert match_plan(["everywhere"], dfs, 100_000) == [("OR", ("everywhere",), 60_000)]
    # A small index has no stop words: few items, every match is cheap.
    assert match_plan(["x", "y"], {"x": 900, "y": 10}, 1_000) == [("OR", ("y",), 10)]
    assert match_plan(["x", "y"], {"x": 900, "y": 800}, 1_000) == [
        ("AND", ("y", "x"), 800),
        ("OR", ("y", "x"), 1_700),
    ]


def test_a_facts_query_of_a_user_without_archived_facts_finds_one_archived_later(
    tmp_path: Path,
) -> None:
    with _open(tmp_path) as store:
        _fill(store)
        assert store.cold.search(terms("quokka"), 5, kinds=("fact",)).items == ()
        store.archive_append(
            {
                "t": "fact",
                "assistant": "",
                "emb": emb_to_f16(_unit(1)),
                "entry": {
                    "entry_id": "f1",
                    "text": "User's quokka is zanzibar.",
                    "timestamp": 1.0,
                    "source_segment": "s1",
                },
            }
        )
        found = store.cold.search(terms("quokka"), 5, kinds=("fact",))
        assert [i.item_id for i in found.items] == ["fact::f1"]
    with _open(tmp_path) as store:  # counted afresh after a reopen
        found = store.cold.search(terms("quokka"), 5, kinds=("fact", "agent_trait"))
        assert [i.item_id for i in found.items] == ["fact::f1"]


def test_rows_with_and_without_embeddings_decode_to_the_stored_vectors(tmp_path: Path) -> None:
    with _open(tmp_path) as store:
        store.archive_append(
            {
                "t": "page",
                "page": _page(1, "quokka one"),
                "segment_id": "s1",
                "emb": emb_to_f16(_unit(1)),
            }
        )
        store.archive_append({"t": "page", "page": _page(2, "quokka two"), "segment_id": "s1"})
        store.archive_append(
            {
                "t": "page",
                "page": _page(3, "quokka three"),
                "segment_id": "s1",
                "emb": emb_to_f16(_unit(3)),
            }
        )
        got = store.cold.pages_by_seq([1, 2, 3])
        store.archive_append(
            {
                "t": "page",
                "page": _page(4, "quokka four"),
                "segment_id": "s1",
                "emb": emb_to_f16(_unit(4, dim=4)),
            }
        )
        mixed = store.cold.pages_by_seq([1, 4])
    assert got[2].embedding is None
    for seq in (1, 3):
        emb = got[seq].embedding
        assert emb is not None and emb.dtype == np.float32
        np.testing.assert_allclose(emb, _unit(seq), atol=1e-3)
    np.testing.assert_allclose(mixed[1].embedding, _unit(1), atol=1e-3)
    np.testing.assert_allclose(mixed[4].embedding, _unit(4, dim=4), atol=1e-3)


def test_when_every_query_term_is_common_items_with_all_of_them_come_first() -> None:
    from memoryos_actors.store.cold_query import match_plan

    dfs = {"a": 5000, "b": 3000, "c": 4000}
    assert match_plan(["a", "b", "c"], dfs, 10_000) == [
        ("AND", ("b", "c", "a"), 3000),
        ("OR", ("b", "c"), 7000),
    ]


def test_an_item_with_every_common_query_term_is_found_among_many_with_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from memoryos_actors.store import cold_query

    monkeypatch.setattr(cold_query, "COMMON_MAX", 10)
    with _open(tmp_path) as store:
        # 200 short pages with one of the words each, four times (FTS5's BM25 ranks them
        # above a long page with both words once), and one long page with both.
        for i in range(1, 201):
            word = "zanzibar" if i % 2 else "quokka"
            store.archive_append(
                {"t": "page", "page": _page(i, f"{word} " * 4), "segment_id": "s1"}
            )
        long_page = (
            "yesterday the zanzibar ferry carried a quokka plush toy across the "
            "harbour while gulls circled the grey morning sky above the old pier"
        )
        store.archive_append({"t": "page", "page": _page(201, long_page), "segment_id": "s2"})
        found = store.cold.search(terms("zanzibar quokka"), 1)
    assert [i.item_id for i in found.items] == ["p201"]


def test_a_match_wider_than_the_rank_window_ranks_only_its_newest_items(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from memoryos_actors.store import cold_query

    monkeypatch.setattr(cold_query, "RANK_WINDOW", 10)
    with _open(tmp_path) as store:
        # Older pages hold both query words (FTS5 ranks them first), the newest ten one.
        _archive_texts(store, ["quokka and wombat"] * 40 + ["quokka on a long walk today"] * 10)
        found = store.cold.search(terms("quokka wombat"), 5)
        assert len(found.items) == 5
        assert all(i.seq is not None and i.seq > 40 for i in found.items)
        assert found.df_of("quokka") == 50  # statistics still cover every item
        monkeypatch.setattr(cold_query, "RANK_WINDOW", 1000)
        wide = store.cold.search(terms("quokka wombat"), 5)
        assert all(i.seq is not None and i.seq <= 40 for i in wide.items)


def test_the_and_of_common_terms_takes_its_newest_matches_unranked(tmp_path: Path) -> None:
    with _open(tmp_path) as store:
        # Both words are common (in more than 50 of 200 pages) and 150 pages hold both:
        # the older ones twice each in a short page (BM25 with row lengths ranks them
        # first), the newer ones once in a longer page. Every match holds every term, so
        # the newest are taken.
        _archive_texts(
            store,
            ["alpha beta alpha beta"] * 100
            + ["alpha and beta on a long walk today"] * 50
            + ["nothing of either word"] * 50,
        )
        found = store.cold.search(terms("alpha beta"), 5)
    assert [i.seq for i in found.items] == [150, 149, 148, 147, 146]


def test_a_fill_after_the_and_of_common_terms_ranks_only_its_newest_items(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from memoryos_actors.store import cold_query

    monkeypatch.setattr(cold_query, "FILL_WINDOW", 10)
    with _open(tmp_path) as store:
        # Both words are common (in more than 50 of 250 pages): the AND of both finds the
        # three pages that have both (newest first), and the OR of the two fills up.
        _archive_texts(
            store,
            ["alpha beta"] * 3
            + ["alpha alpha"] * 67  # older, the rarer word: ranked first by FTS5
            + ["beta on a long walk today"] * 80
            + ["nothing of either word"] * 100,
        )
        found = store.cold.search(terms("alpha beta"), 5)
        seqs = [i.seq for i in found.items]
        assert seqs[:3] == [3, 2, 1]  # the AND's matches
        assert len(seqs) == 5 and all(s is not None and 140 < s <= 150 for s in seqs[3:]), seqs
        monkeypatch.setattr(cold_query, "FILL_WINDOW", 1000)
        wide = [i.seq for i in store.cold.search(terms("alpha beta"), 5).items]
        assert wide[:3] == [3, 2, 1]
        assert all(s is not None and 3 < s <= 70 for s in wide[3:]), wide


def test_an_index_made_with_row_sizes_gets_the_fts_table_without_them(tmp_path: Path) -> None:
    with _open(tmp_path) as store:
        _archive_texts(
            store,
            [
                f"page {i} about the harbour" if i % 3 else f"page {i} about a quokka"
                for i in range(1, 31)
            ],
        )
        before = [i.seq for i in store.cold.search(terms("quokka harbour"), 30).items]
        path = store.cold.path
    # An index written by an earlier version: its FTS5 table keeps row sizes.
    db = sqlite3.connect(path, isolation_level=None)
    rows = db.execute("SELECT id, kind, terms FROM items").fetchall()
    db.execute("DROP TABLE fts")
    db.execute(
        "CREATE VIRTUAL TABLE fts USING fts5(terms, content='', "
        "tokenize='unicode61 remove_diacritics 0')"
    )
    db.executemany(
        "INSERT INTO fts (rowid, terms) VALUES (?, ?)", [(r, fts_text(k, t)) for r, k, t in rows]
    )
    db.close()
    with _open(tmp_path) as store:
        after = [i.seq for i in store.cold.search(terms("quokka harbour"), 30).items]
        assert store.cold.rebuilds == 0  # upgraded in place, not rebuilt
    db = sqlite3.connect(path)
    try:
        (sql,) = db.execute("SELECT sql FROM sqlite_master WHERE name = 'fts'").fetchone()
        n_sizes = db.execute(
            "SELECT count(*) FROM sqlite_master WHERE name = 'fts_docsize'"
        ).fetchone()[0]
    finally:
        db.close()
    assert "columnsize=0" in sql and n_sizes == 0
    assert sorted(after) == sorted(before) == list(range(1, 31))


def _stored_terms(path: Path) -> dict[str, tuple[list[str], list[str]]]:
    """item id -> (its terms, its stored term ids read back through the vocabulary)."""

    db = sqlite3.connect(path)
    try:
        vocab = dict(db.execute("SELECT id, term FROM vocab").fetchall())
        return {
            item_id: (terms_.split(), [vocab[int(i)] for i in np.frombuffer(tids, dtype="<u4")])
            for item_id, terms_, tids in db.execute(
                "SELECT item_id, terms, tids FROM items JOIN cand USING (id)"
            )
        }
    finally:
        db.close()


def test_an_index_made_before_term_ids_gets_them_when_opened(tmp_path: Path) -> None:

    with _open(tmp_path) as store:
        _fill(store)
        before = store.cold.search(terms("my quokka hiked the granite ridge"), 10)
        path = store.dir / COLD_FILE
    # As an index of the version before: no vocabulary, no narrow rows; and a page indexed
    # before its query side was counted.
    db = sqlite3.connect(path)
    db.execute("DROP TABLE cand")
    db.execute("DROP TABLE vocab")
    db.execute("UPDATE items SET nq = NULL WHERE item_id = 'p1'")
    db.commit()
    db.close()
    with _open(tmp_path) as store:
        after = store.cold.search(terms("my quokka hiked the granite ridge"), 10)
        light = store.cold.search(terms("my quokka hiked the granite ridge"), 10, light=True)
        rows = store.cold.pages_by_seq([1, 2, 3], light=True)
        assert store.cold.rebuilds == 0  # upgraded in place, not rebuilt
        _fill(store)  # archived again: indexed once, ids and all
        store.cold.search(["violin"])
    stored = _stored_terms(path)
    assert set(stored) == {"p1", "p2", "p3"}
    assert all(ids == words and words for words, ids in stored.values())
    assert [i.item_id for i in after.items] == [i.item_id for i in before.items]
    # The narrow rows say what the full items say.
    assert [r.seq for r in light.items] == [i.seq for i in after.items]
    for item in after.items:
        row = rows[item.seq]
        assert (row.kind, row.timestamp, row.keywords, row.chars) == (
            item.kind,
            item.timestamp,
            item.keywords,
            len(item.text),
        )
        assert row.query_terms == len(terms(item.record["query"]))
        assert row.embedding is not None and item.embedding is not None
        assert row.embedding.tolist() == item.embedding.tolist()
    assert light.ids_of(["quokka"]) is not None and light.ids_of(["never-asked"]) is None


def test_narrow_rows_left_behind_by_a_version_without_them_are_made_again(tmp_path: Path) -> None:

    with _open(tmp_path) as store:
        _fill(store)
        store.cold.search(["violin"])
        path = store.dir / COLD_FILE
    # As a version that does not keep narrow rows leaves the index after indexing record 2
    # (the page about the violin): its item, but no narrow row, and "cand_at" behind.
    db = sqlite3.connect(path)
    db.execute("DELETE FROM cand WHERE id = (SELECT id FROM items WHERE item_id = 'p3')")
    db.execute("UPDATE meta SET value = '1:0' WHERE key = 'cand_at'")
    db.commit()
    db.close()
    with _open(tmp_path) as store:
        light = store.cold.search(terms("violin strings"), 10, light=True)
        assert [r.seq for r in light.items] == [3]
        assert set(store.cold.pages_by_seq([1, 2, 3], light=True)) == {1, 2, 3}
        assert store.cold.rebuilds == 0
    stored = _stored_terms(path)
    assert set(stored) == {"p1", "p2", "p3"}
    assert all(ids == words for words, ids in stored.values())


def _fact(n: int, text: str) -> dict[str, Any]:
    entry = {"entry_id": f"f{n}", "text": text, "timestamp": float(n), "source_segment": "s1"}
    return {"t": "fact", "entry": entry, "assistant": "default", "emb": emb_to_f16(_unit(n))}


def test_a_facts_search_runs_while_the_main_connection_is_busy(tmp_path: Path) -> None:
    """LPM's search for archived facts does not wait for MTM's page search (or a write) on
    the index's main connection: it reads on a second one."""
    with _open(tmp_path) as store:
        _fill(store)
        store.archive_append(_fact(7, "Alice is allergic to peanuts"))
        assert len(store.cold) == 4  # opened and caught up
        held, release = threading.Event(), threading.Event()

        def busy() -> None:
            # Stands for a long page search or an indexing batch: the main connection's lock.
            with store.cold._lock:
                held.set()
                release.wait(30)

        holder = threading.Thread(target=busy)
        holder.start()
        try:
            assert held.wait(10)
            result: list[Any] = []
            searcher = threading.Thread(
                target=lambda: result.append(
                    store.cold.search(terms("peanuts"), 5, kinds=("fact", "agent_trait"))
                )
            )
            searcher.start()
            searcher.join(20)
            assert not searcher.is_alive(), "the facts search waited for the main connection"
            assert [i.item_id for i in result[0].items] == ["fact:default:f7"]
        finally:
            release.set()
            holder.join()
            searcher.join()


def test_an_index_of_the_format_before_possessives_is_rebuilt_with_the_bare_words(
    tmp_path: Path,
) -> None:
    # Format 2 stored "kitchen's" as the term "kitchen'": such an index is made again from
    # the archive, so the archived page is found under the word it names.
    with _open(tmp_path) as store:
        _archive_texts(store, ["my kitchen's utensil holder", "the garage shelf"])
        path = store.dir / COLD_FILE
    db = sqlite3.connect(path)
    with db:
        db.execute("UPDATE meta SET value = 2 WHERE key = 'format'")
    db.close()
    with _open(tmp_path) as store:
        found = store.cold.search(terms("tips for my kitchen"), 10)
        assert [i.item_id for i in found.items] == ["p1"]
        assert store.cold.rebuilds == 1
