"""Terms and BM25: tokenising, stemming and Okapi BM25 scoring, beside :mod:`~memoryos_actors.text`.

A leaf module (it imports only :mod:`memoryos_actors.text`): the MTM tier's incremental
index over the pages it holds (:class:`LexIndex`) and the cold index over archived pages
(:mod:`memoryos_actors.store.cold`) share one notion of a term and one BM25. Pages come and
go (segments are evicted, full segments push out old pages), so :class:`LexIndex` keeps
postings per term and updates document frequencies and the average length as pages are
added and removed; scoring is exact over every page that shares a term with the query.
Terms are lower-case words minus stop words, lightly stemmed (:func:`stem`) so that
"hikes", "hiking" and "hiked" meet.
"""

from __future__ import annotations

import functools
import math
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, overload

from memoryos_actors.text import STOPWORDS, tokenize

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = [
    "BM25_B",
    "BM25_K1",
    "FIRST_PERSON",
    "TERM_ID_DTYPE",
    "CorpusStats",
    "LexIndex",
    "TermString",
    "asks_about_user",
    "bm25_idf",
    "bm25_score",
    "bm25_scorer",
    "bm25_scores",
    "stem",
    "term_counts",
    "term_id_counts",
    "terms",
]

BM25_K1 = 1.2
"""BM25 term-frequency saturation."""

BM25_B = 0.4
"""BM25 length normalisation (lower than the usual 0.75: pages are short turns; chosen on LoCoMo)."""

FIRST_PERSON: frozenset[str] = frozenset(
    {"i", "me", "my", "mine", "myself", "i'm", "i've", "i'd", "i'll"}
)
"""Words that make a query a question about the user ("what did I buy?", "my sister")."""

_SUFFIXES = ("ingly", "edly", "ings", "ing", "ies", "ied", "es", "ed", "ly", "s")


@functools.lru_cache(maxsize=32768)
def stem(word: str) -> str:
    """Strip one common English inflection and a final "e", keeping at least three letters.

    Deliberately small and predictable (no dictionary): "hiking", "hiked", "hikes" and
    "hike" all give "hik"; "stories" gives "story"; "running" gives "run"; "glass" stays.
    A possessive "'s" goes first: "kitchen's" and "colleague's" are the words "kitchen"
    and "colleague" (before, they kept an apostrophe, "kitchen'", and never matched the
    bare word; the pronoun contractions, "it's", "that's", are stop words and never get
    here). Non-ASCII words are left as they are (after the possessive).

    Memoised (the 32,768 words last used): a conversation's words repeat, and every page
    written or searched has its hundreds of words stemmed.
    """
    if word.endswith("'s") and len(word) > 2:
        word = word[:-2]
    if not word.isascii() or len(word) <= 3:
        return word
    base = word
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            base = word[: -len(suffix)]
            if suffix in ("ies", "ied"):
                base += "y"
            elif suffix == "s" and base.endswith(("s", "u", "i")):
                return word  # "glass", "virus", "analysis": not plurals to strip
            elif len(base) >= 4 and base[-1] == base[-2] and base[-1] not in "lsz":
                base = base[:-1]  # "running" -> "run", "stopped" -> "stop"
            break
    if base.endswith("e") and len(base) > 3:
        base = base[:-1]
    return base


def asks_about_user(query: str) -> bool:
    """Whether ``query`` is asked in the first person (:data:`FIRST_PERSON`): a question
    about the user, whose own words (the query side of a page) then count twice."""
    return not FIRST_PERSON.isdisjoint(tokenize(query))


def terms(text: str) -> list[str]:
    """Index terms of ``text``: tokens minus stop words and one-letter tokens, stemmed."""
    return [stem(t) for t in tokenize(text) if t not in STOPWORDS and len(t) > 1]


class TermString(Sequence[str]):
    """A document's index terms (:func:`terms`) kept as the one string they are stored as,
    ``" ".join(terms)``, and read as the sequence of terms.

    The cold tier reads hundreds of candidates a query, each with hundreds of terms, and
    BM25 needs only each one's length and the counts of a few query terms: both come from
    the string (``str`` searches, in C) without making a Python string per term. The tuple
    of terms is made only when it is indexed or iterated. Terms never hold white space
    (tokens are runs of letters and digits), so the string splits back into exactly them.
    A slice from the start (``terms[:n]``, a page's query side) is a view of the same
    string that shares what was found in it.

    Args:
        text: the terms joined by single spaces (empty for no terms).
    """

    __slots__ = ("_found", "_len", "_limit", "_spaced", "_terms", "text")

    def __init__(self, text: str) -> None:
        self.text = text
        #: How many terms (-1: not counted yet; counted when first asked, as most cold
        #: candidates are scored in bulk by :func:`term_counts`, which counts them all).
        self._len = -1 if text else 0
        #: Only the first ``_limit`` terms of ``text`` belong to this sequence (None: all).
        self._limit: int | None = None
        self._spaced = ""
        #: term -> where it occurs in ``_spaced`` (offsets of its leading spaces), shared
        #: with the views of this string.
        self._found: dict[str, tuple[int, ...]] = {}
        self._terms: tuple[str, ...] | None = None

    def _tuple(self) -> tuple[str, ...]:
        if self._terms is None:
            split = self.text.split()
            self._terms = tuple(split if self._limit is None else split[: self._limit])
        return self._terms

    def __len__(self) -> int:
        if self._len < 0:
            self._len = self.text.count(" ") + 1
        return self._len

    @overload
    def __getitem__(self, index: int) -> str: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[str]: ...

    def __getitem__(self, index: int | slice) -> str | Sequence[str]:
        if (
            isinstance(index, slice)
            and index.start in (None, 0)
            and index.step is None
            and index.stop is not None
            and index.stop >= 0
        ):
            if index.stop >= len(self):
                return self
            view = TermString.__new__(TermString)
            view.text, view._len, view._limit = self.text, index.stop, index.stop
            view._spaced, view._found, view._terms = self._spaced, self._found, None
            return view
        return self._tuple()[index]

    def __iter__(self) -> Iterator[str]:
        return iter(self._tuple())

    def __contains__(self, term: object) -> bool:
        return isinstance(term, str) and self.count(term) > 0

    def _where(self, term: str) -> tuple[int, ...]:
        """Where ``term`` (a term: no space, not empty) occurs: the offset in
        ``" " + text + " "`` of each occurrence's leading space."""
        found = self._found.get(term)
        if found is not None:
            return found
        if term not in self.text:  # most (document, query term) pairs: one scan in C
            found = ()
        else:
            if not self._spaced:
                self._spaced = f" {self.text} "
            spaced, pattern = self._spaced, f" {term} "
            step = len(pattern) - 1  # equal neighbours share the space between them
            at: list[int] = []
            pos = spaced.find(pattern)
            while pos >= 0:
                at.append(pos)
                pos = spaced.find(pattern, pos + step)
            found = tuple(at)
        self._found[term] = found
        return found

    def count(self, term: object) -> int:
        """How many times ``term`` occurs (0 for anything that is not a term)."""
        if not isinstance(term, str) or not term or " " in term:
            return self._tuple().count(term)
        found = self._where(term)
        if self._limit is None or not found:
            return len(found)
        # In a view: the occurrences with fewer than ``_limit`` terms before them (one
        # space before each term's leading space).
        spaced, limit = self._spaced or f" {self.text} ", self._limit
        return sum(1 for pos in found if spaced.count(" ", 0, pos) < limit)

    def counts(self, terms_: Sequence[str]) -> list[int]:
        """:meth:`count` of each of ``terms_``, in order: one call for a query's terms,
        each looked up in the string at most once for this string and its views."""
        found, text, limit = self._found, self.text, self._limit
        out: list[int] = []
        for term in terms_:
            at = found.get(term)
            if at is None:
                if not isinstance(term, str) or not term or " " in term:
                    out.append(self.count(term))
                    continue
                at = self._where(term) if term in text else ()
                found[term] = at
            if limit is None or not at:
                out.append(len(at))
            else:  # a view: see count()
                spaced = self._spaced or f" {text} "
                out.append(sum(1 for pos in at if spaced.count(" ", 0, pos) < limit))
        return out

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (TermString, tuple, list)):
            return self._tuple() == tuple(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._tuple())

    def __repr__(self) -> str:
        return (
            f"TermString({self.text!r})"
            if self._limit is None
            else (f"TermString({self.text!r})[:{self._limit}]")
        )


@dataclass(frozen=True, slots=True)
class CorpusStats:
    """Size, total length and per-term document frequencies of a corpus (for BM25)."""

    n_docs: int
    total_len: int
    df: Mapping[str, int]


def bm25_idf(n_docs: int, df: int) -> float:
    """Okapi BM25 idf with the +1 inside the log (never negative)."""
    return math.log(1.0 + (n_docs - df + 0.5) / (df + 0.5))


def bm25_score(
    doc_terms: Iterable[str],
    query_terms: Iterable[str],
    n_docs: int,
    avg_len: float,
    df: Mapping[str, int],
) -> float:
    """BM25 of one document given corpus statistics (same formula as :class:`LexIndex`)."""
    return bm25_scorer(query_terms, n_docs, avg_len, df)(doc_terms)


def bm25_scorer(
    query_terms: Iterable[str],
    n_docs: int,
    avg_len: float,
    df: Mapping[str, int],
    *,
    idf: Mapping[str, float] | None = None,
) -> Callable[[Iterable[str]], float]:
    """:func:`bm25_score` for one query and corpus, as a function of a document's terms:
    the idf of each query term is computed once, not once per document scored. ``idf``
    (query term -> weight) replaces the weights ``df`` would give."""
    weights = (
        idf
        if idf is not None
        else {term: bm25_idf(n_docs, max(df.get(term, 1), 1)) for term in set(query_terms)}
    )
    avg = avg_len or 1.0
    k1, b = BM25_K1, BM25_B
    plus = BM25_K1 + 1.0

    items = tuple(weights.items())
    keys = tuple(term for term, _ in items)

    def score(doc_terms: Iterable[str]) -> float:
        # Counting the few query terms in the term tuple (in C) costs less than building
        # a Counter of the whole document; retrieval scores hundreds of cold candidates.
        if type(doc_terms) is TermString:
            # A cold item's terms: counted in its stored string, never split.
            length = len(doc_terms)
            tfs: Iterable[int] = doc_terms.counts(keys)
        else:
            terms_ = doc_terms if isinstance(doc_terms, (tuple, list)) else tuple(doc_terms)
            length = len(terms_)
            tfs = [terms_.count(term) for term in keys]
        total = 0.0
        norm = k1 * (1.0 - b + b * length / avg)  # the same for every term of a document
        for (_, w), tf in zip(items, tfs, strict=True):
            if tf:
                total += w * tf * plus / (tf + norm)
        return total

    return score


def _terms_text(doc: Sequence[str]) -> str:
    """A document's terms as the one string ``" ".join(terms)`` (a TermString's own text;
    a view's text holds all the terms, so it is joined afresh)."""
    if type(doc) is TermString and doc._limit is None:
        return doc.text
    return " ".join(doc)


def term_counts(
    docs: Sequence[Sequence[str]],
    terms_: Sequence[str],
    limits: Sequence[int] | None = None,
) -> tuple[
    npt.NDArray[np.int64],
    npt.NDArray[np.int64],
    npt.NDArray[np.int64] | None,
    npt.NDArray[np.int64] | None,
]:
    """How often each of ``terms_`` occurs in each of ``docs`` (sequences of terms, such as
    :class:`TermString`), for many documents at once: ``(tf, lengths, head_tf,
    head_lengths)``, where ``tf[i, j]`` counts ``terms_[j]`` in ``docs[i]`` and
    ``lengths[i]`` is ``len(docs[i])``. With ``limits``, ``head_tf`` and ``head_lengths``
    are the same for the first ``limits[i]`` terms of each document (``docs[i][:limits[i]]``,
    a page's query side); else both are None.

    The same numbers as ``doc.count(term)`` and ``len(doc)`` for each pair, found with one
    scan of all documents per term (in C) rather than one per document and term: the cold
    tier's candidates are hundreds of documents of hundreds of terms, scored for the few
    terms of a query. A term that is empty or holds a space occurs nowhere (terms never
    hold white space).
    """
    import numpy as np

    n, t = len(docs), len(terms_)
    tf = np.zeros((n, t), dtype=np.int64)
    head = np.zeros((n, t), dtype=np.int64) if limits is not None else None
    if not n:
        empty = np.zeros(0, dtype=np.int64)
        return tf, empty, head, (empty if limits is not None else None)
    # Every document as " terms ", end to end, in UTF-8 (a space is one byte, so a match
    # of b" term " is exactly an occurrence of the term, and never spans two documents);
    # a term's index in its document is the number of spaces between the document's
    # start and the match.
    texts = [_terms_text(d).encode() for d in docs]
    joined = b"".join([b" " + x + b" " for x in texts])
    sizes = np.fromiter((len(x) + 2 for x in texts), dtype=np.int64, count=n)
    starts = np.zeros(n, dtype=np.int64)
    np.cumsum(sizes[:-1], out=starts[1:])
    # A document's " terms " holds one space more than it has terms (two for no terms).
    spaces = np.flatnonzero(np.frombuffer(joined, dtype=np.uint8) == 32)
    first_space = np.searchsorted(spaces, starts)
    counted = np.diff(np.append(first_space, len(spaces))) - 1
    counted[sizes == 2] = 0
    for i, d in enumerate(docs):
        if type(d) is TermString:
            if d._len < 0:
                d._len = int(counted[i])
        else:  # any sequence of terms: its own length
            counted[i] = len(d)
    lengths = counted
    heads = None
    if limits is not None:
        heads = np.minimum(np.asarray(limits, dtype=np.int64), lengths)
    find = joined.find
    for j, term in enumerate(terms_):
        if not isinstance(term, str) or not term or " " in term:
            continue
        pattern = f" {term} ".encode()
        step = len(pattern) - 1  # equal neighbours share the space between them
        found: list[int] = []
        pos = find(pattern)
        while pos >= 0:
            found.append(pos)
            pos = find(pattern, pos + step)
        if not found:
            continue
        at = np.array(found, dtype=np.int64)
        doc = np.searchsorted(starts, at, side="right") - 1
        tf[:, j] = np.bincount(doc, minlength=n)
        if heads is not None and head is not None:
            index = np.searchsorted(spaces, at) - first_space[doc]
            head[:, j] = np.bincount(doc[index < heads[doc]], minlength=n)
    return tf, lengths, head, heads


TERM_ID_DTYPE = "<u4"
"""How a document's term ids are stored (:func:`term_id_counts`): little-endian uint32, one
per term, in the document's order."""


def term_id_counts(
    docs: Sequence[bytes],
    ids: Sequence[int],
    limits: Sequence[int] | None = None,
) -> tuple[
    npt.NDArray[np.int64],
    npt.NDArray[np.int64],
    npt.NDArray[np.int64] | None,
    npt.NDArray[np.int64] | None,
]:
    """:func:`term_counts` of documents stored as term ids: ``docs[i]`` is document ``i``'s
    terms, in order, each replaced by its id in one vocabulary (:data:`TERM_ID_DTYPE`
    bytes), and ``ids[j]`` the id of query term ``j`` in that vocabulary (any negative
    number for a term the vocabulary lacks: it occurs nowhere). Returns ``(tf, lengths,
    head_tf, head_lengths)`` exactly as :func:`term_counts` gives them for the documents'
    terms and the query's terms: the same integers, so the same BM25 to the last bit.

    A document's length is its number of ids, and a query term's occurrences are found with
    one comparison of all documents' ids at once (numpy), not by searching text: the cold
    tier's candidates are hundreds of documents of hundreds of terms.
    """
    import numpy as np

    n, t = len(docs), len(ids)
    width = np.dtype(TERM_ID_DTYPE).itemsize
    tf = np.zeros((n, t), dtype=np.int64)
    head = np.zeros((n, t), dtype=np.int64) if limits is not None else None
    lengths = np.fromiter((len(d) // width for d in docs), dtype=np.int64, count=n)
    heads = np.minimum(np.asarray(limits, dtype=np.int64), lengths) if limits is not None else None
    if not n:
        return tf, lengths, head, heads
    flat = np.frombuffer(b"".join(docs), dtype=TERM_ID_DTYPE)
    # Document i's ids are flat[starts[i]:starts[i] + lengths[i]]; an empty document
    # shares its start with the next, so "the last start at or before a position" is
    # always the document holding it.
    starts = np.zeros(n, dtype=np.int64)
    np.cumsum(lengths[:-1], out=starts[1:])
    for j, tid in enumerate(ids):
        if tid < 0:
            continue
        at = np.flatnonzero(flat == tid)
        if not len(at):
            continue
        doc = np.searchsorted(starts, at, side="right") - 1
        tf[:, j] = np.bincount(doc, minlength=n)
        if heads is not None and head is not None:
            head[:, j] = np.bincount(doc[(at - starts[doc]) < heads[doc]], minlength=n)
    return tf, lengths, head, heads


def bm25_scores(
    tf: npt.NDArray[np.int64],
    lengths: npt.NDArray[np.int64],
    weights: Sequence[float],
    avg_len: float,
) -> npt.NDArray[np.float64]:
    """BM25 of many documents at once from their counts (:func:`term_counts`): ``tf[i, j]``
    occurrences of query term ``j`` (weight ``weights[j]``, its idf) in document ``i`` of
    ``lengths[i]`` terms. Bit for bit what :func:`bm25_scorer` gives each document with
    the same weights in the same order: the same operations, term by term, in its order."""
    import numpy as np

    avg = avg_len or 1.0
    k1, b = BM25_K1, BM25_B
    plus = BM25_K1 + 1.0
    norm = k1 * (1.0 - b + b * lengths / avg)
    total = np.zeros(len(lengths), dtype=np.float64)
    if not len(weights) or not len(lengths):
        return total
    # Every (document, term) share at once, with bm25_scorer's operations in its order; a
    # term a document lacks adds exactly 0.0. The shares are then summed term by term.
    counts = tf.astype(np.float64)
    shares = np.asarray(weights, dtype=np.float64) * counts * plus / (counts + norm[:, None])
    for j in range(len(weights)):
        total += shares[:, j]
    return total


class LexIndex:
    """BM25 over a changing set of documents keyed by int (page seq)."""

    __slots__ = ("_doc_len", "_doc_terms", "_postings", "_total_len")

    def __init__(self) -> None:
        self._postings: dict[str, dict[int, int]] = {}
        self._doc_len: dict[int, int] = {}
        self._doc_terms: dict[int, tuple[str, ...]] = {}
        self._total_len = 0

    def __len__(self) -> int:
        return len(self._doc_len)

    def __contains__(self, key: object) -> bool:
        return key in self._doc_len

    def add(self, key: int, doc_terms: Iterable[str]) -> None:
        """Index document ``key`` (replacing it if present)."""
        if key in self._doc_len:
            self.remove(key)
        counts = Counter(doc_terms)
        for term, tf in counts.items():
            self._postings.setdefault(term, {})[key] = tf
        n = sum(counts.values())
        self._doc_len[key] = n
        self._doc_terms[key] = tuple(counts)
        self._total_len += n

    def doc_terms(self, key: int) -> tuple[str, ...]:
        """The distinct terms of document ``key`` (empty if it is not indexed)."""
        return self._doc_terms.get(key, ())

    def remove(self, key: int) -> None:
        """Forget document ``key`` (no error if absent)."""
        n = self._doc_len.pop(key, None)
        if n is None:
            return
        self._total_len -= n
        for term in self._doc_terms.pop(key):
            posting = self._postings[term]
            del posting[key]
            if not posting:
                del self._postings[term]

    @property
    def total_len(self) -> int:
        """Sum of the indexed documents' lengths (terms)."""
        return self._total_len

    def df(self, term: str) -> int:
        """Number of indexed documents containing ``term``."""
        return len(self._postings.get(term, ()))

    def weighted_scores(self, idf: Mapping[str, float], avg_len: float) -> dict[int, float]:
        """BM25 of every document sharing a term of ``idf`` (query term -> weight), its
        length normalised by ``avg_len`` (terms) instead of this index's own average."""
        avg = avg_len if avg_len > 0 else 1.0
        out: dict[int, float] = {}
        for term, w in idf.items():
            posting = self._postings.get(term)
            if not posting:
                continue
            for key, tf in posting.items():
                norm = tf + BM25_K1 * (1.0 - BM25_B + BM25_B * self._doc_len[key] / avg)
                out[key] = out.get(key, 0.0) + w * tf * (BM25_K1 + 1.0) / norm
        return out

    def scores(
        self, query_terms: Iterable[str], extra: CorpusStats | None = None
    ) -> dict[int, float]:
        """BM25 score of every document sharing a term with the query (others score 0).

        With ``extra`` (documents held elsewhere, e.g. the cold tier), idf and the average
        length are those of the union of both corpora, so scores from both sides compare.
        """
        n_docs = len(self._doc_len) + (extra.n_docs if extra else 0)
        if not self._doc_len:
            return {}
        total = self._total_len + (extra.total_len if extra else 0)
        avg = total / n_docs if total else 1.0
        out: dict[int, float] = {}
        for term in set(query_terms):
            posting = self._postings.get(term)
            if not posting:
                continue
            idf = bm25_idf(n_docs, len(posting) + (extra.df.get(term, 0) if extra else 0))
            for key, tf in posting.items():
                norm = tf + BM25_K1 * (1.0 - BM25_B + BM25_B * self._doc_len[key] / avg)
                out[key] = out.get(key, 0.0) + idf * tf * (BM25_K1 + 1.0) / norm
        return out
