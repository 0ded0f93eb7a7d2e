"""Time references in queries and superseded statements (pure helpers)."""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memoryos_actors.lexicon import terms
from memoryos_actors.tiers.temporal import asks_about_past, supersedes, time_window

DAY = 86_400.0
NOW = dt.datetime(2023, 6, 15, 12, tzinfo=dt.UTC).timestamp()


def _utc(*args: int) -> float:
    return dt.datetime(*args, tzinfo=dt.UTC).timestamp()


def test_a_month_and_year_name_that_calendar_month() -> None:
    assert time_window("What did I cook in May 2023?", NOW) == (_utc(2023, 5, 1), _utc(2023, 6, 1))
    assert time_window("plans for december, 2022", NOW) == (_utc(2022, 12, 1), _utc(2023, 1, 1))


def test_a_year_names_that_calendar_year() -> None:
    assert time_window("Where did I travel in 2021?", NOW) == (_utc(2021, 1, 1), _utc(2022, 1, 1))


def test_relative_references_are_windows_before_the_question() -> None:
    start, end = time_window("what did I eat yesterday", NOW)
    assert start < NOW - DAY < end <= NOW
    start, end = time_window("what happened last week", NOW)
    assert (start, end) == (NOW - 7 * DAY, NOW + 1.0)
    start, end = time_window("the film I saw two weeks ago", NOW)
    assert start < NOW - 14 * DAY < end < NOW


def test_a_holiday_after_a_preposition_names_its_latest_day_before_the_question() -> None:
    # NOW is 2023-06-15: this year's Valentine's Day and Easter (April 9) have passed,
    # this year's Christmas and Thanksgiving have not.
    day = _utc(2023, 2, 14)
    assert time_window("Which airline did I fly with on Valentine’s Day?", NOW) == (
        day - DAY / 2,
        day + 1.5 * DAY,
    )
    assert time_window("what did we eat over Easter", NOW)[0] == _utc(2023, 4, 9) - DAY / 2
    assert time_window("who came for Thanksgiving?", NOW)[0] == _utc(2022, 11, 24) - DAY / 2
    assert time_window("gifts I got at Christmas 2021", NOW)[0] == _utc(2021, 12, 25) - DAY / 2
    assert time_window("my plans for Mother's Day", NOW)[0] == _utc(2023, 5, 14) - DAY / 2


def test_a_holiday_used_as_a_word_names_no_day() -> None:
    assert time_window("How many Christmas gifts did I wrap?", NOW) is None
    assert time_window("Where did I put the Easter eggs?", NOW) is None


def test_a_query_without_a_time_reference_has_no_window() -> None:
    assert time_window("what is my dog called", NOW) is None
    assert time_window("room 2023b", NOW) is None


@given(
    n=st.integers(min_value=1, max_value=500),
    unit=st.sampled_from(["days", "weeks", "months", "years"]),
)
def test_n_units_ago_always_contains_that_point_and_ends_before_now(n: int, unit: str) -> None:
    days = {"days": 1, "weeks": 7, "months": 30, "years": 365}[unit]
    start, end = time_window(f"what happened {n} {unit} ago", NOW)
    assert start < NOW - n * days * DAY < end <= NOW + DAY


def test_questions_about_earlier_states_are_recognised() -> None:
    assert asks_about_past("where did I live before?")
    assert asks_about_past("what was my previous job")
    assert not asks_about_past("where do I live now")


@pytest.mark.parametrize(
    ("newer", "older", "query", "expected"),
    [
        ("I moved to Berlin", "I live in Paris", "where do I live", False),  # no shared term
        ("I moved, now I live in Berlin", "I live in Paris", "where do I live", True),
        ("I live in Berlin too", "I live in Paris", "where do I live", False),  # no cue
        ("My new job is at the bakery", "My job is at the bank", "what is my job", True),
    ],
)
def test_supersedes_needs_the_same_query_terms_and_a_change_cue(
    newer: str, older: str, query: str, expected: bool
) -> None:
    assert supersedes(terms(newer), 2.0, newer, terms(older), 1.0, terms(query)) is expected


def test_an_older_page_never_supersedes_a_newer_one() -> None:
    text = "I moved, now I live in Berlin"
    assert not supersedes(terms(text), 1.0, text, terms("I live in Paris"), 2.0, terms("live"))
