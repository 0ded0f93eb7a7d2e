"""Time-aware ranking helpers: time windows named in a query, and superseded statements.

Pure functions (no clock, no I/O) used by hybrid retrieval:

* :func:`time_window` reads a time reference in a query ("yesterday", "last week",
  "3 months ago", "last Saturday", "the past two months", "on May 3, 2023", "in May 2023",
  "in February", "in 2022") as a ``[start, end)`` window of epoch seconds, relative to
  the time of the question. Pages written inside the window get a bonus.
* :func:`supersedes` decides whether a newer page states a change of something an older
  page stated ("I moved, now I live in Berlin" after "I live in Paris"): the older page
  must match at least half of the query's terms, the newer one all of those, and the newer
  one must carry a change cue in a sentence that holds one of them. The newer page is then
  ranked above the older one, unless the query asks about the past ("where did I live
  before?").
"""

from __future__ import annotations

import calendar
import datetime as _dt
import functools
import re
from collections.abc import Callable, Iterable, Mapping, Sequence

from memoryos_actors.lexicon import stem, terms
from memoryos_actors.text import split_sentences, tokenize

__all__ = [
    "CHANGE_CUES",
    "PAST_CUES",
    "asks_about_past",
    "changed_terms",
    "has_change_cue",
    "SUPERSEDE_LEXICAL_SHARE",
    "SUPERSEDE_MARGIN",
    "supersede_order",
    "supersedes",
    "time_window",
]

_DAY = 86_400.0

CHANGE_CUES: frozenset[str] = frozenset(
    {
        "moved",
        "move",
        "moving",
        "relocated",
        "now",
        "new",
        "newly",
        "changed",
        "switched",
        "started",
        "starting",
        "joined",
        "became",
        "anymore",
        "longer",
        "quit",
        "left",
        "promoted",
        "hired",
        "married",
        "divorced",
        "engaged",
        "renamed",
        "instead",
        "currently",
    }
)
"""Words that mark a statement as a change of an earlier state."""

PAST_CUES: frozenset[str] = frozenset(
    {
        "before",
        "previous",
        "previously",
        "used",
        "former",
        "formerly",
        "originally",
        "old",
        "first",
        "earlier",
        "past",
        "was",
        "were",
        "did",
    }
)
"""Words that make a query ask about an earlier state, so nothing is superseded."""

_MONTHS = {name.lower(): i for i, name in enumerate(calendar.month_name) if name}
_MONTHS.update({name.lower(): i for i, name in enumerate(calendar.month_abbr) if name})
_UNITS = {
    "day": 1.0,
    "days": 1.0,
    "week": 7.0,
    "weeks": 7.0,
    "month": 30.0,
    "months": 30.0,
    "year": 365.0,
    "years": 365.0,
}
_NUMBERS = {
    "a": 1,
    "an": 1,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "few": 3,
    "couple": 2,
}
_COUNT = r"(\d+|a|an|one|two|three|four|five|six|seven|eight|nine|ten|few|couple)"
_AGO = re.compile(r"\b" + _COUNT + r"(?: of)? (day|days|week|weeks|month|months|year|years) ago\b")
_LAST = re.compile(r"\b(?:last|past|previous) (day|week|weekend|month|year)\b")
_LAST_N = re.compile(
    r"\b(?:last|past|previous) " + _COUNT + r"(?: of)? (days|weeks|months|years)\b"
)
_WEEKDAYS = {name.lower(): i for i, name in enumerate(calendar.day_name)}
_LAST_WEEKDAY = re.compile(r"\b(?:last|previous|this past|past) (" + "|".join(_WEEKDAYS) + r")\b")
_MONTH_NAMES = "|".join(sorted(_MONTHS, key=len, reverse=True))
_MONTH_YEAR = re.compile(r"\b(" + _MONTH_NAMES + r")\.?,? (\d{4})\b")
# A month without a year needs a preposition before it ("in May", "during march"), so
# "may" the verb and "march" the verb are not read as months.
_MONTH = re.compile(
    r"\b(?:in|during|since|of|early|late|mid)[ -](?:the month of )?("
    + _MONTH_NAMES
    + r")\b(?!\.?,? \d)"
)
_YEAR = re.compile(r"\b(?:in|during|of) (\d{4})\b")
# A calendar day: "October 13, 2023", "May 3rd", "1 February, 2023", "the 5th of June".
_ORD = r"(?:st|nd|rd|th)?"
_MONTH_DAY = re.compile(
    r"(\w+ )?\b(" + _MONTH_NAMES + r")\.? (\d{1,2})(st|nd|rd|th)?" + r"(?!\d)(?!:)(?:,? (\d{4}))?\b"
)
# "may" and "march" followed by a number are verbs unless a preposition, an ordinal or a
# year says they are dates ("I may 3D print it", "we march 20 miles").
_VERB_MONTHS = frozenset({"may", "march"})
_DATE_PREPOSITIONS = frozenset(
    {"on", "of", "since", "by", "before", "after", "until", "till", "from", "in", "during"}
)
_DAY_MONTH = re.compile(
    r"\b(\d{1,2})" + _ORD + r" (?:of )?(" + _MONTH_NAMES + r")\b\.?(?:,? (\d{4}))?"
)
_BEFORE_AFTER = re.compile(r"\b(before|after|since|until|till|by)\s+(?:the\s+)?$")


def _month_window(year: int, month: int) -> tuple[float, float]:
    start = _dt.datetime(year, month, 1, tzinfo=_dt.UTC)
    end = _dt.datetime(year + (month == 12), month % 12 + 1, 1, tzinfo=_dt.UTC)
    return start.timestamp(), end.timestamp()


def _day_start(moment: float) -> float:
    day = _dt.datetime.fromtimestamp(moment, _dt.UTC).date()
    return _dt.datetime(day.year, day.month, day.day, tzinfo=_dt.UTC).timestamp()


def _count(word: str) -> int:
    return int(word) if word.isdigit() else _NUMBERS[word]


def time_window(query: str, now: float) -> tuple[float, float] | None:
    """The ``[start, end)`` window (epoch seconds, UTC) a query's time reference names.

    ``now`` is when the question is asked (seconds). Recognised, first match wins:

    * "N units ago" (a window of one unit around that point, units day/week/month/year,
      with month = 30 days and year = 365 days, plus a day of slack each side);
    * "yesterday", "today", "tonight";
    * "last/past/previous <weekday>": that calendar day, the latest before today's, with
      half a day of slack each side (times are UTC; the user's day may be shifted);
    * "last/past N days|weeks|months|years" and "last/past week|weekend|month|year": the
      span up to now;
    * a calendar day, "October 13, 2023", "May 3rd", "1 February, 2023", "the 5th of June"
      (without a year: its latest occurrence that began before now): that day, with half a
      day of slack before and a day after (a turn is often stamped when its session began);
      after "before", "until" or "by", the week up to and including that day; after
      "after" or "since", the week from it. "may" and "march" followed by a number are
      read as dates only after a preposition, with an ordinal or with a year;
    * a holiday after a preposition of time, "on Valentine's Day", "at Christmas 2022",
      "for Thanksgiving", "over Easter" (fixed-date ones and the US movable ones; without
      a year, its latest occurrence that began before now; "a Christmas tree" names no
      day): that day, with the slack of a calendar day;
    * "<Month> <year>" and "in <year>": those calendar periods;
    * "in/during/since <Month>" without a year: that month's latest occurrence that began
      before now (this year's, or last year's when it has not begun yet).

    Returns ``None`` when the query names no time.
    """
    q = query.lower()
    m = _AGO.search(q)
    if m:
        unit = _UNITS[m.group(2)] * _DAY
        centre = now - _count(m.group(1)) * unit
        return centre - unit / 2 - _DAY, centre + unit / 2 + _DAY
    words = set(tokenize(q))
    if "yesterday" in words:
        return now - 2 * _DAY, now
    if "today" in words or "tonight" in words:
        return now - _DAY, now + 1.0
    m = _LAST_WEEKDAY.search(q)
    if m:
        today = _day_start(now)
        back = (_dt.datetime.fromtimestamp(today, _dt.UTC).weekday() - _WEEKDAYS[m.group(1)]) % 7
        day = today - (back or 7) * _DAY
        return day - _DAY / 2, day + 1.5 * _DAY
    m = _LAST_N.search(q)
    if m:
        return now - _count(m.group(1)) * _UNITS[m.group(2)] * _DAY, now + 1.0
    m = _LAST.search(q)
    if m:
        span = {"day": 1.0, "week": 7.0, "weekend": 7.0, "month": 31.0, "year": 366.0}[m.group(1)]
        return now - span * _DAY, now + 1.0
    named = _named_day(q, now)
    if named is not None:
        return named
    named = _holiday(q, now)
    if named is not None:
        return named
    m = _MONTH_YEAR.search(q)
    if m:
        year = int(m.group(2))
        if 1900 <= year <= 2200:
            return _month_window(year, _MONTHS[m.group(1)])
    m = _YEAR.search(q)
    if m:
        year = int(m.group(1))
        if 1900 <= year <= 2200:
            start = _dt.datetime(year, 1, 1, tzinfo=_dt.UTC).timestamp()
            end = _dt.datetime(year + 1, 1, 1, tzinfo=_dt.UTC).timestamp()
            return start, end
    m = _MONTH.search(q)
    if m:
        asked = _dt.datetime.fromtimestamp(now, _dt.UTC)
        month = _MONTHS[m.group(1)]
        return _month_window(asked.year - (month > asked.month), month)
    return None


def _named_day(q: str, now: float) -> tuple[float, float] | None:
    """The window of a calendar day the (lower-case) query names, see :func:`time_window`."""
    m = _MONTH_DAY.search(q)
    if (
        m
        and m.group(2) in _VERB_MONTHS
        and not (m.group(4) or m.group(5))
        and ((m.group(1) or "").strip() not in _DATE_PREPOSITIONS)
    ):
        m = None
    if m:
        month, day, year = _MONTHS[m.group(2)], int(m.group(3)), m.group(5)
    else:
        m = _DAY_MONTH.search(q)
        if m is None:
            return None
        day, month, year = int(m.group(1)), _MONTHS[m.group(2)], m.group(3)
    asked = _dt.datetime.fromtimestamp(now, _dt.UTC)
    try:
        if year is not None:
            date = _dt.datetime(int(year), month, day, tzinfo=_dt.UTC)
        else:
            # No year: that day's latest occurrence that began before the question.
            date = _dt.datetime(asked.year, month, day, tzinfo=_dt.UTC)
            if date.timestamp() > now:
                date = _dt.datetime(asked.year - 1, month, day, tzinfo=_dt.UTC)
    except ValueError:
        return None  # "February 30", "the 45th of May": no such day
    start = date.timestamp()
    cue = _BEFORE_AFTER.search(q[: m.start(2) if m.re is _MONTH_DAY else m.start()])
    if cue is not None and cue.group(1) in ("before", "until", "till", "by"):
        # "the week before May 3": what happened then, often told on that day itself.
        return start - 8 * _DAY, start + 1.5 * _DAY
    if cue is not None:
        return start - _DAY / 2, start + 8 * _DAY
    return start - _DAY / 2, start + 1.5 * _DAY


def _nth_weekday(year: int, month: int, weekday: int, n: int) -> _dt.date:
    """The ``n``-th ``weekday`` (0 = Monday) of a month; ``n`` = -1 for the last one."""
    if n > 0:
        first = _dt.date(year, month, 1)
        return first + _dt.timedelta(days=(weekday - first.weekday()) % 7 + 7 * (n - 1))
    last = _dt.date(year + (month == 12), month % 12 + 1, 1) - _dt.timedelta(days=1)
    return last - _dt.timedelta(days=(last.weekday() - weekday) % 7)


def _easter(year: int) -> _dt.date:
    """Western Easter Sunday (the anonymous Gregorian computus)."""
    a, b, c = year % 19, year // 100, year % 100
    d, e = divmod(b, 4)
    g = (8 * b + 13) // 25
    h = (19 * a + b - d - g + 15) % 30
    i, k = divmod(c, 4)
    x = (32 + 2 * e + 2 * i - h - k) % 7
    m = (a + 11 * h + 22 * x) // 451
    month, day = divmod(h + x - 7 * m + 114, 31)
    return _dt.date(year, month, day + 1)


# Holidays a question names instead of a date: the day of a given year. Longer names
# first ("christmas eve" before "christmas"); US dates for the movable ones.
_HOLIDAYS: tuple[tuple[str, Callable[[int], _dt.date]], ...] = (
    (r"christmas eve", lambda y: _dt.date(y, 12, 24)),
    (r"(?:christmas|xmas)(?: day)?", lambda y: _dt.date(y, 12, 25)),
    (r"new years? eve", lambda y: _dt.date(y, 12, 31)),
    (r"new years? day", lambda y: _dt.date(y, 1, 1)),
    (r"valentines?(?: day)?", lambda y: _dt.date(y, 2, 14)),
    (r"halloween", lambda y: _dt.date(y, 10, 31)),
    (r"(?:st\.? |saint )?patricks day", lambda y: _dt.date(y, 3, 17)),
    (r"independence day", lambda y: _dt.date(y, 7, 4)),
    (r"thanksgiving(?: day)?", lambda y: _nth_weekday(y, 11, 3, 4)),
    (r"easter(?: sunday)?", _easter),
    (r"mothers day", lambda y: _nth_weekday(y, 5, 6, 2)),
    (r"fathers day", lambda y: _nth_weekday(y, 6, 6, 3)),
    (r"memorial day", lambda y: _nth_weekday(y, 5, 0, -1)),
    (r"labou?r day", lambda y: _nth_weekday(y, 9, 0, 1)),
)
# Only after a preposition of time ("on Valentine's Day", "at Christmas", "for
# Thanksgiving"): "a Christmas tree" or "Easter eggs" name no day.
_HOLIDAY_RES = tuple(
    (
        re.compile(
            r"\b(?:on|at|for|over|during|around|last|this|past)(?: the)? "
            + name
            + r"\b(?:,? (?:of )?(\d{4})\b)?"
        ),
        day,
    )
    for name, day in _HOLIDAYS
)


def _holiday(q: str, now: float) -> tuple[float, float] | None:
    """The window of a holiday the (lower-case) query names after a preposition of time
    ("on Valentine's Day", "at Christmas 2022", "for Thanksgiving"): that day, with half a day of slack before and a day after, as a
    calendar day; without a year, its latest occurrence that began before the question."""
    text = q.replace("\u2019", "'").replace("'", "")
    for pattern, day_of in _HOLIDAY_RES:
        m = pattern.search(text)
        if m is None:
            continue
        asked = _dt.datetime.fromtimestamp(now, _dt.UTC)
        if m.group(1) is not None:
            year = int(m.group(1))
            if not 1900 <= year <= 2200:
                return None
            date = day_of(year)
        else:
            date = day_of(asked.year)
            if _dt.datetime(date.year, date.month, date.day, tzinfo=_dt.UTC).timestamp() > now:
                date = day_of(asked.year - 1)
        start = _dt.datetime(date.year, date.month, date.day, tzinfo=_dt.UTC).timestamp()
        return start - _DAY / 2, start + 1.5 * _DAY
    return None


def asks_about_past(query: str) -> bool:
    """Whether the query asks about an earlier state ("where did I live before?")."""
    return not PAST_CUES.isdisjoint(tokenize(query.lower()))


@functools.lru_cache(maxsize=1024)
def has_change_cue(text: str) -> bool:
    """Whether a statement reads as a change ("I moved to Berlin", "my new job")."""
    return not CHANGE_CUES.isdisjoint(tokenize(text.lower()))


def _cue_terms() -> frozenset[str]:
    return frozenset(stem(cue) for cue in CHANGE_CUES)


@functools.lru_cache(maxsize=1024)
def changed_terms(text: str, query_terms: frozenset[str]) -> frozenset[str]:
    """The ``query_terms`` (stemmed index terms) that share a sentence of ``text`` with a
    change cue: what the text says has changed ("I moved, now I live in Berlin": live)."""
    found: set[str] = set()
    for sentence in split_sentences(text):
        if CHANGE_CUES.isdisjoint(tokenize(sentence.lower())):
            continue
        found.update(query_terms.intersection(terms(sentence)))
    return frozenset(found)


def supersedes(
    newer_terms: Iterable[str],
    newer_time: float,
    newer_text: str,
    older_terms: Iterable[str],
    older_time: float,
    query_terms: Iterable[str],
) -> bool:
    """Whether the newer page states a change of what the older page stated.

    True when the newer page is strictly later; the older page matches at least half of
    the query's terms other than change cues (it is about what is asked, not about one
    word of it); the newer page
    matches every one of those; and a sentence of the newer page holds one of them and a
    change cue (:func:`changed_terms`). Terms are the stemmed index terms of
    :func:`~memoryos_actors.lexicon.terms`.
    """
    if newer_time <= older_time:
        return False
    # A cue word the query itself holds ("where do I live now?") says nothing about what.
    q = frozenset(query_terms) - _CUE_TERMS
    old_hit = q.intersection(older_terms)
    if not old_hit or 2 * len(old_hit) < len(q):
        return False
    if not old_hit <= q.intersection(newer_terms):
        return False
    return not old_hit.isdisjoint(changed_terms(newer_text, q))


_CUE_TERMS = _cue_terms()


SUPERSEDE_MARGIN = 1e-3
"""Hybrid mode: how far above a superseded page the newer page that changes it is put."""

SUPERSEDE_LEXICAL_SHARE = 0.75
"""Hybrid mode: a newer page supersedes an older one only if its BM25 score is at least
this share of the older page's: it answers the question about as well."""


def supersede_order(
    order: list[int],
    final: dict[int, float],
    facts: Sequence[tuple[str, float, str, Iterable[str]]],
    qt: list[str],
    notes: dict[int, str],
    lexical: Mapping[int, float],
) -> list[int]:
    """Rank a newer page that states a change right above the older page it supersedes.

    ``order`` is the answer (page seqs), best first (``top_k`` pages: pairs cost
    O(top_k²)); ``facts`` holds each one's ``(page id, time, text, index terms)``. The
    pass changes their order, never which pages they are. Best first, each page is
    superseded by at most one page ranked below it: the newest that :func:`supersedes` it
    and matches the query (stemmed terms ``qt``) at least
    :data:`SUPERSEDE_LEXICAL_SHARE` as well (``lexical``: BM25 by seq); that page's score
    in ``final`` is raised to just above it, once (no chains of lifts), and ``notes`` says
    why. Returns the new order.
    """
    lifted: set[int] = set()
    for i, (old_id, old_time, _old_text, old_terms) in enumerate(facts):
        old = order[i]
        if old in lifted:
            continue
        floor = SUPERSEDE_LEXICAL_SHARE * lexical.get(old, 0.0)
        best: tuple[float, int] | None = None
        for k, (_new_id, new_time, new_text, new_terms) in enumerate(facts):
            new = order[k]
            if k == i or new in lifted or final[new] > final[old] or lexical.get(new, 0.0) < floor:
                continue
            if supersedes(new_terms, new_time, new_text, old_terms, old_time, qt) and (
                best is None or new_time > best[0]
            ):
                best = (new_time, new)
        if best is not None:
            new = best[1]
            final[new] = final[old] + SUPERSEDE_MARGIN
            lifted.add(new)
            notes[new] = (
                notes.get(new, "")
                + f"; supersedes {old_id} (newer, states a change), ranked above it"
            )
    if not lifted:
        return order
    return sorted(order, key=lambda x: (-final[x], -x))
