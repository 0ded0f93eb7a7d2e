"""keywords(): the most frequent non-stop-word tokens, ties by first occurrence."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from memoryos_actors.text import STOPWORDS, keywords, tokenize

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
