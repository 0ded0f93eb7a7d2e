from __future__ import annotations

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memoryos_actors.errors import InvalidInput
from memoryos_actors.messages import Page
from memoryos_actors.tiers.stm import STMCore


def _page(seq: int, user: str = "u") -> Page:
    return Page.create(user, seq, f"q{seq}", f"r{seq}", float(seq))


def test_full_stm_evicts_oldest_page_first() -> None:
    stm = STMCore(7)
    evicted = [stm.push(_page(i)) for i in range(1, 11)]
    assert evicted[:7] == [None] * 7
    assert [p.page_id for p in evicted[7:]] == ["p1", "p2", "p3"]
    assert [p.page_id for p in stm.pages()] == [f"p{i}" for i in range(4, 11)]
    assert len(stm) == 7 and stm.last() == _page(10)


@settings(max_examples=40)
@given(st.integers(1, 10), st.integers(0, 40))
def test_stm_keeps_the_newest_capacity_pages_and_evicts_the_rest_in_order(cap, n) -> None:
    stm = STMCore(cap)
    evicted = [e for i in range(1, n + 1) if (e := stm.push(_page(i))) is not None]
    assert [p.seq for p in stm.pages()] == list(range(max(1, n - cap + 1), n + 1))
    assert [p.seq for p in evicted] == list(range(1, max(0, n - cap) + 1))


def test_pushing_an_already_seen_seq_is_ignored() -> None:
    stm = STMCore(3)
    for i in (1, 2):
        stm.push(_page(i))
    assert stm.push(_page(2)) is None and stm.push(_page(1)) is None
    assert [p.seq for p in stm.pages()] == [1, 2] and stm.max_seq == 2


def test_empty_stm_has_no_last_page() -> None:
    stm = STMCore(2)
    assert stm.last() is None and stm.pages() == ()


def test_set_meta_fills_in_a_page_still_in_stm_and_reports_a_gone_page() -> None:
    stm = STMCore(2)
    for i in (1, 2, 3):
        stm.push(_page(i))
    assert stm.set_meta("p3", "talking about Rome", "c1", ["Rome", "trip"]) is True
    page = stm.get("p3")
    assert page is not None
    assert (page.meta_chain, page.chain_id, page.keywords) == (
        "talking about Rome",
        "c1",
        frozenset({"rome", "trip"}),
    )
    assert page.query == "q3" and stm.pages()[-1] == page
    assert stm.set_meta("p1", "gone", "c1", []) is False


def test_previous_gives_the_page_before_one_still_in_stm() -> None:
    stm = STMCore(3)
    for i in range(1, 6):
        stm.push(_page(i))
    assert stm.previous("p5") == _page(4)
    assert stm.previous("p3") is None  # the oldest page held
    assert stm.previous("p1") is None  # gone


def test_stm_rejects_non_pages_other_users_and_bad_capacity() -> None:
    stm = STMCore(2)
    stm.push(_page(1))
    with pytest.raises(InvalidInput):
        stm.push("p2")  # type: ignore[arg-type]
    with pytest.raises(InvalidInput, match="user"):
        stm.push(_page(2, user="someone else"))
    for bad in (0, -1, True, 2.0):
        with pytest.raises(InvalidInput):
            STMCore(bad)  # type: ignore[arg-type]


def test_state_round_trips_through_msgpack() -> None:
    stm = STMCore(3)
    for i in range(1, 6):
        stm.push(_page(i))
    stm.set_meta("p5", "m", "c", ["k"])
    state = msgpack.unpackb(msgpack.packb(stm.to_state()))
    back = STMCore.from_state(state)
    assert back.pages() == stm.pages() and back.max_seq == 5 and back.capacity == 3
    assert back.push(_page(5)) is None  # still idempotent after restore
    assert back.push(_page(6)) == _page(3)


def test_restoring_into_a_smaller_capacity_hands_out_the_surplus_oldest_first() -> None:
    stm = STMCore(5)
    for i in range(1, 6):
        stm.push(_page(i))
    small = STMCore.from_state(stm.to_state(), capacity=2)
    assert [p.seq for p in small.trim()] == [1, 2, 3]
    assert [p.seq for p in small.pages()] == [4, 5] and small.trim() == ()


def test_malformed_state_is_invalid_input() -> None:
    with pytest.raises(InvalidInput):
        STMCore.from_state({"version": 1})
