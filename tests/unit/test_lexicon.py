"""LexIndex's weighted BM25 (memoryos_actors.lexicon) against the formula, page by page."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from memoryos_actors.lexicon import BM25_B, BM25_K1, LexIndex, stem, terms

_TERMS = [f"t{i}" for i in range(12)]


def _per_document(lex: LexIndex, docs: dict[int, list[str]], idf: dict[str, float], avg: float):
    """The BM25 of each document, one document and one term at a time, summed in the
    order of ``idf``: the definition the index must reproduce bit for bit, whatever form
    its postings take, keyed in the order documents first appear in the terms' postings
    (their order of indexing)."""
    avg = avg if avg > 0 else 1.0
    out: dict[int, float] = {}
    for term, w in idf.items():
        for key, words in docs.items():
            tf = words.count(term)
            if not tf:
                continue
            norm = tf + BM25_K1 * (1.0 - BM25_B + BM25_B * len(words) / avg)
            out[key] = out.get(key, 0.0) + w * tf * (BM25_K1 + 1.0) / norm
    return out


_OPS = st.lists(
    st.one_of(
        st.tuples(
            st.just("add"),
            st.integers(1, 25),
            st.lists(st.sampled_from(_TERMS), max_size=12),
        ),
        st.tuples(st.just("remove"), st.integers(1, 25), st.just([])),
        st.tuples(
            st.just("query"),
            st.sampled_from([0.0, 2.5, 7.0]),
            st.dictionaries(st.sampled_from(_TERMS), st.floats(0.0, 6.0), max_size=5),
        ),
    ),
    max_size=40,
)


@settings(max_examples=150, deadline=None)
@given(ops=_OPS)
def test_weighted_scores_equal_the_per_document_formula_as_documents_come_and_go(ops) -> None:
    """The postings must follow every add, re-add and remove: a stale one would score a
    removed page or miss a new one."""
    lex = LexIndex()
    docs: dict[int, list[str]] = {}  # in posting order: a re-added key moves to the end
    for op, a, b in ops:
        if op == "add":
            docs.pop(a, None)
            lex.add(a, b)
            if b:
                docs[a] = list(b)
        elif op == "remove":
            docs.pop(a, None)
            lex.remove(a)
        else:
            got = lex.weighted_scores(b, a)
            want = _per_document(lex, docs, b, a)
            # Exact floats (not approximately equal), in the same order.
            assert list(got.items()) == list(want.items())


def test_a_document_added_or_removed_after_a_query_changes_the_next_one() -> None:
    lex = LexIndex()
    lex.add(1, ["apple", "pear"])
    assert set(lex.weighted_scores({"apple": 1.0}, 2.0)) == {1}
    lex.add(2, ["apple"])
    assert set(lex.weighted_scores({"apple": 1.0}, 2.0)) == {1, 2}
    lex.remove(1)
    assert set(lex.weighted_scores({"apple": 1.0}, 2.0)) == {2}


def test_a_possessive_is_the_bare_word_so_it_matches_where_the_word_stands_alone() -> None:
    # "my kitchen's a mess" asks about the kitchen: its term must be the one a page that
    # says "my kitchen utensils" is indexed under (before: "kitchen'", matching nothing).
    assert stem("kitchen's") == stem("kitchen") == "kitchen"
    assert stem("colleague's") == stem("colleagues") == stem("colleague")
    assert stem("Emma's".lower()) == "emma"
    assert stem("café's") == "café"  # non-ASCII: only the possessive goes
    assert terms("My kitchen's a mess") == terms("my kitchen, a mess")


def test_pronoun_contractions_stay_stop_words_not_bare_pronouns() -> None:
    # Only a word's possessive is cut: "it's" and "that's" are stop words before stemming,
    # so no "it" or "that" term appears.
    assert terms("it's what's that's here's") == []


def test_a_possessive_query_scores_the_page_that_names_the_bare_word() -> None:
    lex = LexIndex()
    lex.add(1, terms("Tips on organizing my kitchen utensils and countertops"))
    lex.add(2, terms("Tips on organizing my closet before the holidays"))
    query = [stem(w) for w in ("kitchen's", "tips")]
    scores = lex.scores(query)
    assert scores[1] > scores.get(2, 0.0)
