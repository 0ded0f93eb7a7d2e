"""Hybrid retrieval on small hand-made histories: the rules that keep strong signals as a
history grows (time windows, changed facts, the user's own words, long turns, lexical
matches that fusion must not bury)."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import basis_vector

from memoryos_actors.clock import ManualClock
from memoryos_actors.config import MemoryConfig
from memoryos_actors.lexicon import LexIndex, stem, terms
from memoryos_actors.messages import Page
from memoryos_actors.tiers.mtm import MTMCore
from memoryos_actors.tiers.temporal import time_window

DIM = 8
DAY = 86_400.0
# A Thursday, noon UTC: "last Saturday" is 2023-06-10.
NOW = dt.datetime(2023, 6, 15, 12, tzinfo=dt.UTC).timestamp()
SATURDAY = dt.datetime(2023, 6, 10, 18, tzinfo=dt.UTC).timestamp()


def _core() -> MTMCore:
    return MTMCore(MemoryConfig(), DIM, ManualClock(NOW))


def e(i: int) -> np.ndarray:
    return basis_vector(DIM, i)


def _says(seq: int, query: str, t: float, response: str = "I see.") -> Page:
    return Page.create("u", seq, query, response, t)


def _ids(hits) -> list[str]:
    return [h.page.page_id for h in hits.pages]


# ----------------------------------------------------------------- time windows


def test_a_question_about_last_saturday_finds_the_page_of_that_day() -> None:
    mtm = _core()
    # A month of concerts; the one of last Saturday is no closer to the query otherwise.
    for seq in range(1, 31):
        day = NOW - (seq + 6) * DAY
        mtm.insert(_says(seq, f"The concert number {seq} was loud", day), e(seq % DIM))
    mtm.insert(_says(40, "The concert with Anna, we danced all night", SATURDAY), e(3))
    hits = mtm.search(
        e(0),
        frozenset({"concert"}),
        top_k=5,
        mode="hybrid",
        query_text="Who did I go to the concert with last Saturday?",
        now=NOW,
    )
    assert _ids(hits)[0] == "p40"
    assert "time window" in hits.pages[0].why


def test_an_archived_page_of_the_day_a_question_names_is_a_candidate() -> None:
    from memoryos_actors.cold_items import ColdItem

    mtm = _core()
    for seq in range(10, 20):
        mtm.insert(_says(seq, f"The concert number {seq} was loud", NOW - seq * DAY), e(seq % DIM))
    page = _says(3, "The concert with Anna, we danced all night", SATURDAY)
    item = ColdItem(
        "p3",
        "page",
        3,
        "s1",
        SATURDAY,
        1,
        f"{page.query} {page.response}",
        frozenset(),
        tuple(terms(f"{page.query} {page.response}")),
        e(3),
        page.to_dict(),
        query_terms=len(terms(page.query)),
    )
    asked: list[tuple[float, float]] = []

    def cold_window(start: float, end: float, limit: int):
        asked.append((start, end))
        return (1, {3: item}) if start <= SATURDAY < end else (0, {})

    hits = mtm.search(
        e(0),
        frozenset({"concert"}),
        top_k=5,
        mode="hybrid",
        query_text="Who did I go to the concert with last Saturday?",
        now=NOW,
        cold_window=cold_window,
    )
    assert asked and _ids(hits)[0] == "p3" and hits.pages[0].tier == "archive"


@given(
    weekday=st.sampled_from(
        ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
    ),
    days=st.integers(min_value=0, max_value=3650),
    second=st.integers(0, 86_399),
)
def test_last_weekday_is_that_day_of_the_week_within_the_past_seven_days(
    weekday: str, days: int, second: int
) -> None:
    now = dt.datetime(2020, 1, 1, tzinfo=dt.UTC).timestamp() + days * DAY + second
    start, end = time_window(f"what did I do last {weekday}?", now)
    middle = dt.datetime.fromtimestamp((start + end) / 2, dt.UTC)
    assert middle.strftime("%A").lower() == weekday
    assert now - 8.5 * DAY <= start and end <= now + DAY  # half a day of slack each side
    assert middle.date() < dt.datetime.fromtimestamp(now, dt.UTC).date()


def test_a_month_without_a_year_is_its_latest_occurrence_before_the_question() -> None:
    start, end = time_window("How many museums did I visit in February?", NOW)
    assert (start, end) == (
        dt.datetime(2023, 2, 1, tzinfo=dt.UTC).timestamp(),
        dt.datetime(2023, 3, 1, tzinfo=dt.UTC).timestamp(),
    )
    start, _ = time_window("What did I plant during September?", NOW)
    assert start == dt.datetime(2022, 9, 1, tzinfo=dt.UTC).timestamp()
    assert time_window("I may go there", NOW) is None  # "may" the verb is not May
    start, end = time_window("what did I buy in the past three months", NOW)
    assert (start, end) == (NOW - 90 * DAY, NOW + 1.0)


def test_a_question_naming_a_calendar_day_finds_the_page_of_that_day() -> None:
    mtm = _core()
    # Dinners every third day; the one of May 3 is no closer to the query otherwise.
    may3 = dt.datetime(2023, 5, 3, 19, tzinfo=dt.UTC).timestamp()
    for seq in range(20, 41):
        day = may3 + (seq - 30) * 3 * DAY
        if seq == 30:
            mtm.insert(_says(seq, "Dinner with my aunt Rosa, she cooked", day), e(3))
        else:
            mtm.insert(_says(seq, f"Dinner number {seq} with a friend was fun", day), e(0))
    hits = mtm.search(
        e(0),
        frozenset({"dinner"}),
        top_k=5,
        mode="hybrid",
        query_text="Who did I have dinner with on May 3, 2023?",
        now=NOW,
    )
    assert _ids(hits)[0] == "p30"
    assert "time window" in hits.pages[0].why


def test_calendar_days_in_questions() -> None:
    def day(q: str) -> tuple[str, str] | None:
        w = time_window(q, NOW)
        if w is None:
            return None
        return tuple(dt.datetime.fromtimestamp(t, dt.UTC).strftime("%Y-%m-%d %H") for t in w)  # type: ignore[return-value]

    assert day("What did Gina find on 1 February, 2023?") == ("2023-01-31 12", "2023-02-02 12")
    assert day("what painting did she show on October 13, 2022") == (
        "2022-10-12 12",
        "2022-10-14 12",
    )
    # No year: the latest such day before the question (asked on 2023-06-15).
    assert day("what did I read on the 20th of June?") == ("2022-06-19 12", "2022-06-21 12")
    assert day("what did I cook on May 3rd") == ("2023-05-02 12", "2023-05-04 12")
    # "the week before <day>": the week up to and including that day.
    assert day("what did John do the week before August 3, 2022") == (
        "2022-07-26 00",
        "2022-08-04 12",
    )
    assert day("I may 3D print it") is None and day("we march 20 miles") is None
    assert day("on February 30, 2023") is None  # no such day
    assert day("what happened in May 2023") == ("2023-05-01 00", "2023-06-01 00")


# ----------------------------------------------------------------- changed facts


def test_a_changed_fact_returns_the_newer_page_first() -> None:
    mtm = _core()
    mtm.insert(_says(1, "I work as a nurse at the city hospital", NOW - 90 * DAY), e(0))
    mtm.insert(_says(2, "The weather was grey all week", NOW - 60 * DAY), e(1))
    mtm.insert(_says(3, "I quit the hospital and now I work as a teacher", NOW - 10 * DAY), e(2))
    hits = mtm.search(
        e(0), frozenset({"work"}), mode="hybrid", query_text="where do I work", now=NOW
    )
    ids = _ids(hits)
    assert ids.index("p3") < ids.index("p1")
    assert "supersedes p1" in hits.pages[ids.index("p3")].why


def test_a_change_cue_in_another_sentence_supersedes_nothing() -> None:
    mtm = _core()
    mtm.insert(_says(1, "I live in Paris near the old canal", NOW - 90 * DAY), e(0))
    # Newer, matches "live", and says "now"; but not about where the user lives.
    mtm.insert(
        _says(3, "I live for summer. Now, any pasta recipes with basil?", NOW - 10 * DAY), e(2)
    )
    hits = mtm.search(
        e(0), frozenset({"live"}), mode="hybrid", query_text="where do I live", now=NOW
    )
    assert _ids(hits)[0] == "p1"
    assert all("supersedes" not in h.why for h in hits.pages)


# ----------------------------------------------------------------- the user's own words


def test_a_first_person_question_prefers_the_page_where_the_user_said_it() -> None:
    mtm = _core()
    long_answer = (
        "Sisters often live far apart. " * 3 + "Many sisters live abroad. "
        "A sister who lives nearby can help. Sisters live their own lives."
    )
    mtm.insert(_says(1, "Tell me about siblings", NOW - 5 * DAY, long_answer), e(1))
    mtm.insert(_says(2, "My sister lives in Denver", NOW - 40 * DAY, "Nice city."), e(2))
    for seq in range(3, 12):
        mtm.insert(_says(seq, f"Random chatter {seq}", NOW - seq * DAY), e(3))
    hits = mtm.search(
        e(0),
        frozenset({"sister", "live"}),
        top_k=3,
        mode="hybrid",
        query_text="Where does my sister live?",
        now=NOW,
    )
    assert _ids(hits)[0] == "p2"
    assert "user's words" in hits.pages[0].why


# ----------------------------------------------------------------- long turns


def test_the_turn_next_to_a_long_hit_is_not_pulled_into_the_answer_by_it() -> None:
    mtm = _core()
    filler = " ".join(f"word{i}" for i in range(300))
    # A long turn that answers, and the long, unrelated turn right after it.
    mtm.insert(_says(1, f"My kayak trip on the fjord. {filler}", NOW - 9 * DAY, filler), e(1))
    mtm.insert(_says(2, f"Unrelated planning. {filler}", NOW - 9 * DAY + 30, filler), e(2))
    chat = " ".join(f"chat{i}" for i in range(60))
    mtm.insert(_says(7, f"The kayak rental shop. {chat}", NOW - 3 * DAY), e(3))
    for seq in range(8, 14):
        mtm.insert(_says(seq, f"Random chatter {seq}", NOW - seq, "ok"), e(4))
    hits = mtm.search(
        e(0),
        frozenset({"kayak", "fjord"}),
        top_k=3,
        mode="hybrid",
        query_text="Tell us about the kayak fjord trip",
        now=NOW,
    )
    ids = _ids(hits)
    assert ids[:2] == ["p1", "p7"]
    assert "p2" not in ids  # beside a turn of ~4,000 characters, a neighbour counts little


# ----------------------------------------------------------------- fusion


def test_a_strong_exact_match_survives_fusion() -> None:
    mtm = _core()
    # Twenty short turns in a row that all mention the question's common word, with the
    # query's own embedding: each is helped by its neighbours and its cosine.
    for seq in range(1, 21):
        mtm.insert(_says(seq, "Our garden looked nice today", NOW - 100 + seq), e(0))
    # One turn, far from the query in embedding space, holding its rare word.
    mtm.insert(_says(30, "The garden gnome is named Bartholomew", NOW - 50 * DAY), e(5))
    hits = mtm.search(
        e(0),
        frozenset({"garden", "bartholomew"}),
        top_k=5,
        mode="hybrid",
        query_text="which garden gnome is bartholomew",
        now=NOW,
    )
    assert "p30" in _ids(hits)


def test_a_page_written_after_the_moment_of_the_question_is_not_returned(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import memoryos_actors.tiers.hybrid as hybrid

    monkeypatch.setattr(hybrid, "AS_OF_SLACK_SECONDS", 2 * DAY)
    mtm = _core()
    mtm.insert(_says(1, "I adopted a cat named Miso", NOW - 30 * DAY), e(1))
    # The same words, stamped later on the question's day and a week after it.
    mtm.insert(_says(2, "My cat Miso chased a moth", NOW + DAY / 2), e(1))
    mtm.insert(_says(3, "My cat Miso is named after soup, a cat named Miso", NOW + 7 * DAY), e(1))
    hits = mtm.search(
        e(1), frozenset({"cat", "miso"}), top_k=5, mode="hybrid", query_text="my cat Miso", now=NOW
    )
    assert sorted(_ids(hits)) == ["p1", "p2"]
    # Asked a week later, every page is a memory.
    later = mtm.search(
        e(1),
        frozenset({"cat", "miso"}),
        top_k=5,
        mode="hybrid",
        query_text="my cat Miso",
        now=NOW + 7 * DAY,
    )
    assert sorted(_ids(later)) == ["p1", "p2", "p3"]


_WORDS = ["apple", "river", "tiger", "violin", "garden", "rocket", "pepper", "silver"]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    pages=st.lists(
        st.lists(st.sampled_from(_WORDS), min_size=1, max_size=8), min_size=1, max_size=30
    ),
    embs=st.lists(st.integers(0, DIM - 1), min_size=30, max_size=30),
    query=st.lists(st.sampled_from(_WORDS), min_size=1, max_size=3, unique=True),
    q_emb=st.integers(0, DIM - 1),
    top_k=st.integers(1, 5),
)
def test_the_best_lexical_match_is_always_in_the_answer(
    pages: list[list[str]], embs: list[int], query: list[str], q_emb: int, top_k: int
) -> None:
    mtm = _core()
    lex = LexIndex()
    for seq, words in enumerate(pages, 1):
        text = " ".join(words)
        mtm.insert(_says(seq, text, NOW - DAY + seq, "ok"), e(embs[seq - 1]))
        lex.add(seq, terms(f"{text} ok"))
    scores = lex.scores([stem(w) for w in query])
    hits = mtm.search(
        e(q_emb), frozenset(query), top_k=top_k, mode="hybrid", query_text=" ".join(query), now=NOW
    )
    if scores:
        best = max(scores.values())
        returned = {int(pid[1:]) for pid in _ids(hits)}
        assert any(abs(scores[s] - best) < 1e-9 for s in returned if s in scores)


_PARTS = st.fixed_dictionaries(
    {
        "lexical": st.floats(0.0, 1.0),
        "cosine": st.floats(-1.0, 1.0),
        "keywords": st.floats(0.0, 1.0),
        "segment": st.floats(-1.0, 2.0),
        "chars": st.integers(1, 5_000),
    }
)


def _rank(final: dict[int, float], seq: int) -> int:
    """Candidates ranked above ``seq`` (best first; equal scores, newer first, as search)."""
    return sum(1 for x in final if (final[x], x) > (final[seq], seq))


@settings(max_examples=300, deadline=None)
@given(
    seqs=st.lists(st.integers(1, 40), min_size=2, max_size=15, unique=True),
    data=st.data(),
    source=st.sampled_from(["lexical", "cosine", "keywords", "segment"]),
    rise=st.floats(1e-6, 2.0),
)
def test_fusion_is_monotone_in_each_source(seqs, data, source, rise) -> None:
    from memoryos_actors.tiers.fusion import base_score, fused_scores

    parts = {seq: data.draw(_PARTS) for seq in seqs}
    target = data.draw(st.sampled_from(seqs))
    chars = {seq: p["chars"] for seq, p in parts.items()}

    def final() -> dict[int, float]:
        base = {
            seq: base_score(p["lexical"], p["cosine"], p["keywords"], p["segment"])
            for seq, p in parts.items()
        }
        return fused_scores(base, chars)

    before = _rank(final(), target)
    limit = {"lexical": 1.0, "cosine": 1.0, "keywords": 1.0, "segment": 2.0}[source]
    parts[target] = {**parts[target], source: min(parts[target][source] + rise, limit)}
    assert _rank(final(), target) <= before


@settings(max_examples=300, deadline=None)
@given(seqs=st.lists(st.integers(1, 60), max_size=25, unique=True), data=st.data())
def test_fusion_over_arrays_equals_the_pure_functions_exactly(seqs, data) -> None:
    """The arrays search ranks with give every candidate the pure functions' score, bit
    for bit (so the ranking, ties included, is theirs)."""
    import numpy as np

    from memoryos_actors.tiers.fusion import (
        base_score,
        base_scores,
        fused_score_array,
        fused_scores,
    )

    seqs = sorted(seqs)
    parts = [data.draw(_PARTS) for _ in seqs]
    base = {
        seq: base_score(p["lexical"], p["cosine"], p["keywords"], p["segment"])
        for seq, p in zip(seqs, parts, strict=True)
    }
    chars = {seq: p["chars"] for seq, p in zip(seqs, parts, strict=True)}
    column = {
        name: np.array([p[name] for p in parts], dtype=np.float64)
        for name in ("lexical", "cosine", "keywords", "segment")
    }
    fast_base = base_scores(
        column["lexical"], column["cosine"], column["keywords"], column["segment"]
    )
    assert fast_base.tolist() == [base[s] for s in seqs]
    fast = fused_score_array(
        np.array(seqs, dtype=np.int64),
        fast_base,
        np.array([chars[s] for s in seqs], dtype=np.int64),
    )
    assert fast.tolist() == [fused_scores(base, chars)[s] for s in seqs]
