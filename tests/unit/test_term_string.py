"""A cold candidate's terms read from their stored string (``TermString``) are the same
sequence as the split tuple, and BM25 scores them bit for bit the same."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from memoryos_actors.lexicon import TermString, bm25_scorer, terms

# Few distinct terms, some prefixes of others ("b", "bb", "bbb") and one with an
# apostrophe, so lists are full of repeats, neighbouring equal terms and near matches.
VOCAB = ["b", "bb", "bbb", "ab", "ba", "o'neil", "neil", "ünï", "42"]
term_lists = st.lists(st.sampled_from(VOCAB), max_size=25)
probes = st.sampled_from([*VOCAB, "zz", "b b", "", " b", "o"])


@settings(max_examples=300, deadline=None)
@given(term_lists, st.integers(min_value=0, max_value=30), st.lists(probes, max_size=8))
def test_a_term_string_reads_as_the_tuple_of_its_terms(
    words: list[str], cut: int, asked: list[str]
) -> None:
    ts = TermString(" ".join(words))
    head = ts[:cut]
    # Counting in the view first or in the whole first must not matter (they share
    # what they found in the string).
    for probe in asked:
        assert head.count(probe) == words[:cut].count(probe)
        assert ts.count(probe) == words.count(probe)
        assert (probe in ts) == (probe in words)
    assert len(ts) == len(words) and len(head) == len(words[:cut])
    assert list(ts) == words and list(head) == words[:cut]
    assert ts == tuple(words) and head == tuple(words[:cut])
    assert ts[:cut] == tuple(words[:cut])
    if words:
        assert ts[len(words) - 1] == words[-1]
    assert ts.counts(asked) == [words.count(p) for p in asked]


@settings(max_examples=300, deadline=None)
@given(
    term_lists,
    st.integers(min_value=0, max_value=30),
    st.lists(st.sampled_from(VOCAB), min_size=1, max_size=5),
    st.floats(min_value=0.5, max_value=50.0),
)
def test_bm25_of_a_term_string_equals_bm25_of_the_tuple_exactly(
    words: list[str], cut: int, query: list[str], avg_len: float
) -> None:
    df = {t: 1 + i for i, t in enumerate(VOCAB)}
    score = bm25_scorer(query, 100, avg_len, df)
    ts = TermString(" ".join(words))
    assert score(ts) == score(tuple(words))
    assert score(ts[:cut]) == score(tuple(words[:cut]))


def test_terms_of_real_text_survive_the_round_trip_through_their_string() -> None:
    text = (
        "I'm moving to O’Neil Street — no, no, no: Köln first! Hiking, hikes and "
        "hiked; 42 km, twice twice."
    )
    words = terms(text)
    ts = TermString(" ".join(words))
    assert list(ts) == words
    for word in set(words):
        assert ts.count(word) == words.count(word)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(term_lists, st.integers(min_value=0, max_value=30)), max_size=8),
    st.lists(probes, max_size=6),
    st.booleans(),
)
def test_counts_of_many_documents_at_once_are_each_documents_own(
    docs: list[tuple[list[str], int]], asked: list[str], as_strings: bool
) -> None:
    from memoryos_actors.lexicon import term_counts

    # Stored strings, or plain tuples (a document need not come from the cold index).
    seqs = [TermString(" ".join(w)) if as_strings else tuple(w) for w, _ in docs]
    cuts = [cut for _, cut in docs]
    tf, lengths, head, heads = term_counts(seqs, asked, cuts)
    assert head is not None and heads is not None
    for i, (words, cut) in enumerate(docs):
        assert lengths[i] == len(words) and heads[i] == len(words[:cut])
        assert tf[i].tolist() == [words.count(p) for p in asked]
        assert head[i].tolist() == [words[:cut].count(p) for p in asked]
    tf2, lengths2, none, none2 = term_counts(seqs, asked)
    assert none is None and none2 is None
    assert tf2.tolist() == tf.tolist() and lengths2.tolist() == lengths.tolist()


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(term_lists, st.integers(min_value=0, max_value=30)), max_size=8),
    st.lists(st.sampled_from(VOCAB), min_size=1, max_size=5),
    st.floats(min_value=0.5, max_value=50.0),
    st.floats(min_value=0.5, max_value=50.0),
)
def test_bm25_of_many_documents_at_once_equals_each_ones_bm25_exactly(
    docs: list[tuple[list[str], int]], query: list[str], avg_len: float, avg_head: float
) -> None:
    from memoryos_actors.lexicon import bm25_idf, bm25_scores, term_counts

    idf = {t: bm25_idf(100, 1 + VOCAB.index(t)) for t in dict.fromkeys(query)}
    score = bm25_scorer(query, 100, avg_len, {}, idf=idf)
    score_head = bm25_scorer(query, 100, avg_head, {}, idf=idf)
    seqs = [TermString(" ".join(w)) for w, _ in docs]
    tf, lengths, head, heads = term_counts(seqs, list(idf), [cut for _, cut in docs])
    assert head is not None and heads is not None
    full = bm25_scores(tf, lengths, list(idf.values()), avg_len).tolist()
    part = bm25_scores(head, heads, list(idf.values()), avg_head).tolist()
    for i, (words, cut) in enumerate(docs):
        assert full[i] == score(tuple(words))
        assert part[i] == score_head(tuple(words[:cut]))


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(term_lists, st.integers(min_value=0, max_value=30)), max_size=8),
    st.lists(probes, max_size=6),
    st.booleans(),
    st.randoms(use_true_random=False),
)
def test_counts_from_term_ids_are_the_counts_from_the_terms(
    docs: list[tuple[list[str], int]], asked: list[str], with_limits: bool, rnd: object
) -> None:
    import numpy as np

    from memoryos_actors.lexicon import TERM_ID_DTYPE, term_counts, term_id_counts

    # A vocabulary with ids in any order (an index numbers terms as it first meets them).
    ids = list(range(len(VOCAB)))
    rnd.shuffle(ids)  # type: ignore[attr-defined]
    id_of = dict(zip(VOCAB, ids, strict=True))
    stored = [
        np.array([id_of[w] for w in words], dtype=TERM_ID_DTYPE).tobytes() for words, _ in docs
    ]
    cuts = [cut for _, cut in docs] if with_limits else None
    got = term_id_counts(stored, [id_of.get(p, -1) for p in asked], cuts)
    want = term_counts([TermString(" ".join(words)) for words, _ in docs], asked, cuts)
    for a, b in zip(got, want, strict=True):
        assert (a is None) == (b is None)
        if a is not None:
            assert a.dtype == b.dtype and a.tolist() == b.tolist()
