"""Whether a derived memory quotes a deleted page: the test a deletion runs over the facts,
agent traits and trait evidence that persona updates distilled from the user's pages.

What the LLM learns from a promoted segment carries the segment's id (``source_segment``
of a fact, the source of a trait's change; ``"s3+s4"`` when one update read several
segments). A derived text *quotes* a deleted page when

* it came from a segment that held the page, and says something that, of the pages of
  its segments, only the deleted ones said: a content word (stemmed, stop words and the
  persona's own words such as "user" left out) no page left in those segments holds; or
* whatever its source, it repeats a run of :data:`RUN` content words of a deleted page
  (a quote carried on by a later update, or one of unknown source).

So a fact the other pages of the segment support as well stays, and one that names what
only the deleted page said goes. Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from memoryos_actors.lexicon import terms

__all__ = ["RUN", "Deletion", "content_terms", "source_segments"]

#: Consecutive content words shared with a deleted page that make a quote whatever the
#: source (texts of fewer words: all of them, when there are at least three).
RUN = 4

#: The persona's own words ("User loves ...", "Assistant: ..."): never evidence of a quote.
_PERSONA_WORDS = frozenset(terms("user user's users assistant assistant's assistants"))


def _content(text: str) -> list[str]:
    return [t for t in terms(text) if t not in _PERSONA_WORDS]


def content_terms(text: str) -> frozenset[str]:
    """The content words of ``text``, stemmed: what the quote test compares."""
    return frozenset(_content(text))


def _runs(words: list[str], n: int) -> set[tuple[str, ...]]:
    return {tuple(words[i : i + n]) for i in range(len(words) - n + 1)}


def source_segments(source: str | None) -> frozenset[str]:
    """The segment ids a derived memory's source names (``"s3+s4"``: both; empty for an
    unknown source, an edit, or another user's segment ``"<user>/s3"``)."""
    if not source or source == "edit":
        return frozenset()
    return frozenset(s for s in source.split("+") if s and "/" not in s)


class Deletion:
    """The pages a deletion removes, as the quote test reads them.

    Args:
        pages: ``(segment id, text)`` of each deleted page (``""``: in no segment yet).
        kept: the texts of the pages a segment keeps after the deletion (called once per
            segment a candidate's source names, and only then).
    """

    def __init__(
        self, pages: Iterable[tuple[str, str]], kept: Callable[[str], Iterable[str]]
    ) -> None:
        self._kept_of = kept
        self._kept: dict[str, frozenset[str]] = {}
        self._terms: dict[str, set[str]] = {}
        self._runs: dict[int, set[tuple[str, ...]]] = {}
        self._words: list[list[str]] = []
        for segment_id, text in pages:
            words = _content(text)
            self._words.append(words)
            if segment_id:
                self._terms.setdefault(segment_id, set()).update(words)

    @property
    def segments(self) -> frozenset[str]:
        """The segments that held a deleted page."""
        return frozenset(self._terms)

    def _kept_terms(self, segment_id: str) -> frozenset[str]:
        got = self._kept.get(segment_id)
        if got is None:
            got = self._kept[segment_id] = frozenset(
                t for text in self._kept_of(segment_id) for t in _content(text)
            )
        return got

    def _deleted_runs(self, n: int) -> set[tuple[str, ...]]:
        got = self._runs.get(n)
        if got is None:
            got = self._runs[n] = set().union(*(_runs(w, n) for w in self._words))
        return got

    def quotes(self, text: str, source: str | None) -> bool:
        """Whether ``text``, distilled from ``source`` (see :func:`source_segments`),
        quotes a deleted page (see the module docstring)."""
        words = _content(text)
        if not words:
            return False
        sources = source_segments(source)
        if sources & self.segments:
            said = set().union(*(self._terms.get(s, ()) for s in sources))
            left = frozenset().union(*(self._kept_terms(s) for s in sorted(sources)))
            if (set(words) & said) - left:
                return True
        n = min(RUN, len(words))
        return n >= 3 and bool(_runs(words, n) & self._deleted_runs(n))
