"""keywords(): the most frequent non-stop-word tokens, ties by first occurrence."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from memoryos_actors.text import STOPWORDS, keyword_counts, keywords, tokenize, top_keywords

_WORDS = ["the", "a", "I", "x", "7", "42", "123", "\u00e9", "\u65e5", "tea", "Tea", "dog", "why"]


def _reference(text: str, limit: int) -> frozenset[str]:
    """The rule written plainly: drop stop words, one-letter Latin tokens and numbers of one
    or two digits; rank by count, then by first occurrence; keep ``limit``."""
    toks = tokenize(text)
    kept = [
        t
        for t in toks
        if t not in STOPWORDS
        and not (t.isdigit() and len(t) <= 2)
        and not (not t.isdigit() and len(t) == 1 and t.isascii())
    ]
    ranked = sorted(set(kept), key=lambda t: (-kept.count(t), kept.index(t)))
    return frozenset(ranked[: max(limit, 0)])


@settings(max_examples=150, deadline=None)
@given(st.lists(st.sampled_from(_WORDS), max_size=40).map(" ".join), st.integers(-1, 14))
def test_keywords_are_the_most_frequent_tokens_ties_by_first_occurrence(
    text: str, limit: int
) -> None:
    assert keywords(text, limit) == _reference(text, limit)


def test_keywords_keep_the_first_seen_of_equally_frequent_tokens() -> None:
    assert keywords("zebra apple mango zebra apple mango kiwi", 2) == {"zebra", "apple"}


_TEXT = st.text(alphabet=st.sampled_from(list("ab cd’'I.9 ZéŁ\n日本")), min_size=0, max_size=40)


@settings(max_examples=200, deadline=None)
@given(st.lists(_TEXT, max_size=6), st.integers(min_value=0, max_value=14))
def test_the_keywords_of_texts_joined_by_spaces_are_their_counts_merged(
    texts: list[str], limit: int
) -> None:
    merged: dict[str, int] = {}
    for text in texts:
        for tok, n in keyword_counts(text).items():
            merged[tok] = merged.get(tok, 0) + n
    assert top_keywords(merged, limit) == keywords(" ".join(texts), limit)
