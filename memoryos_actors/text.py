"""Pure text helpers shared by the gateway and the tiers: tokens, keywords, sentences.

Everything here is deterministic and language-light: tokens are Unicode word runs
lower-cased, keywords are the most frequent non-stop-word tokens. No I/O, no state.
"""

from __future__ import annotations

import re

__all__ = ["STOPWORDS", "keyword_counts", "keywords", "split_sentences", "tokenize", "top_keywords"]

# Unicode letters/digits, allowing inner apostrophes so "i'm" and "don't" stay one token.
_TOKEN_RE = re.compile(r"[^\W_]+(?:['\u2019][^\W_]+)*", re.UNICODE)
# A sentence ends at terminal punctuation (Latin or CJK) followed by space, or at a newline.
_SENTENCE_RE = re.compile(r"(?<=[.!?\u3002\uff01\uff1f])\s+|\n+")

STOPWORDS: frozenset[str] = frozenset(
    [
        "a",
        "about",
        "above",
        "after",
        "again",
        "against",
        "all",
        "also",
        "am",
        "an",
        "and",
        "any",
        "are",
        "aren't",
        "as",
        "at",
        "be",
        "because",
        "been",
        "before",
        "being",
        "below",
        "between",
        "both",
        "but",
        "by",
        "can",
        "can't",
        "cannot",
        "could",
        "couldn't",
        "did",
        "didn't",
        "do",
        "does",
        "doesn't",
        "doing",
        "don't",
        "down",
        "during",
        "each",
        "even",
        "ever",
        "every",
        "few",
        "for",
        "from",
        "further",
        "get",
        "gets",
        "got",
        "had",
        "hadn't",
        "has",
        "hasn't",
        "have",
        "haven't",
        "having",
        "he",
        "he'd",
        "he'll",
        "he's",
        "her",
        "here",
        "here's",
        "hers",
        "herself",
        "him",
        "himself",
        "his",
        "how",
        "how's",
        "however",
        "i",
        "i'd",
        "i'll",
        "i'm",
        "i've",
        "if",
        "in",
        "into",
        "is",
        "isn't",
        "it",
        "it's",
        "its",
        "itself",
        "just",
        "let's",
        "like",
        "likely",
        "made",
        "make",
        "many",
        "may",
        "me",
        "might",
        "more",
        "most",
        "much",
        "must",
        "mustn't",
        "my",
        "myself",
        "need",
        "no",
        "nor",
        "not",
        "now",
        "of",
        "off",
        "often",
        "on",
        "once",
        "one",
        "only",
        "or",
        "other",
        "ought",
        "our",
        "ours",
        "ourselves",
        "out",
        "over",
        "own",
        "really",
        "said",
        "same",
        "say",
        "says",
        "shall",
        "shan't",
        "she",
        "she'd",
        "she'll",
        "she's",
        "should",
        "shouldn't",
        "so",
        "some",
        "still",
        "such",
        "than",
        "that",
        "that's",
        "the",
        "their",
        "theirs",
        "them",
        "themselves",
        "then",
        "there",
        "there's",
        "these",
        "they",
        "they'd",
        "they'll",
        "they're",
        "they've",
        "this",
        "those",
        "though",
        "through",
        "to",
        "too",
        "under",
        "until",
        "up",
        "upon",
        "us",
        "very",
        "was",
        "wasn't",
        "we",
        "we'd",
        "we'll",
        "we're",
        "we've",
        "well",
        "were",
        "weren't",
        "what",
        "what's",
        "when",
        "when's",
        "where",
        "where's",
        "whether",
        "which",
        "while",
        "who",
        "who's",
        "whom",
        "why",
        "why's",
        "will",
        "with",
        "won't",
        "would",
        "wouldn't",
        "yes",
        "yet",
        "you",
        "you'd",
        "you'll",
        "you're",
        "you've",
        "your",
        "yours",
        "yourself",
        "yourselves",
        "ok",
        "okay",
        "oh",
        "yeah",
        "hi",
        "hello",
        "thanks",
        "thank",
        "please",
        "sure",
        "lot",
        "lots",
        "thing",
        "things",
        "something",
        "anything",
        "nothing",
        "want",
        "wants",
        "know",
        "think",
        "going",
        "go",
        "went",
        "gone",
        "come",
        "came",
        "take",
        "took",
        "see",
        "saw",
        "tell",
        "told",
        "way",
        "day",
        "days",
        "time",
    ]
)


def tokenize(text: str) -> list[str]:
    """Split ``text`` into lower-case word tokens (Unicode letters and digits).

    Typographic apostrophes are folded to ``'`` so "I’m" and "I'm" give the same token.
    """
    low = text.lower()
    found: list[str] = _TOKEN_RE.findall(low)  # the pattern has no group: whole matches
    if "\u2019" in low:
        return [tok.replace("\u2019", "'") for tok in found]
    return found


def keywords(text: str, limit: int = 12) -> frozenset[str]:
    """Return up to ``limit`` keywords of ``text``: its most frequent non-stop-word tokens.

    Ties are broken by first occurrence so the result is deterministic. Tokens of one
    character (except non-Latin scripts, where a character can be a word) and pure numbers
    of one or two digits are dropped as noise.
    """
    if limit <= 0:
        return frozenset()
    return top_keywords(keyword_counts(text), limit)


def keyword_counts(text: str) -> dict[str, int]:
    """How often each keyword candidate of ``text`` occurs, in first-occurrence order: the
    counts :func:`keywords` ranks. The counts of texts joined by spaces are the counts of
    each text merged in order (a token never spans a space)."""
    counts: dict[str, int] = {}
    for tok in tokenize(text):
        if tok in STOPWORDS:
            continue
        if tok.isdigit():
            if len(tok) <= 2:
                continue
        elif len(tok) == 1 and tok.isascii():
            continue
        counts[tok] = counts.get(tok, 0) + 1
    return counts


def top_keywords(counts: dict[str, int], limit: int = 12) -> frozenset[str]:
    """The ``limit`` most frequent of ``counts`` (:func:`keyword_counts`), ties broken by
    first occurrence."""
    if limit <= 0:
        return frozenset()
    if len(counts) <= limit:
        return frozenset(counts)
    # A stable sort (reverse keeps it stable) leaves equal counts in first-occurrence order.
    ranked = sorted(counts, key=counts.__getitem__, reverse=True)
    return frozenset(ranked[:limit])


def split_sentences(text: str) -> list[str]:
    """Split ``text`` into sentences (stripped, non-empty), keeping their punctuation."""
    return [s.strip() for s in _SENTENCE_RE.split(text) if s and s.strip()]
