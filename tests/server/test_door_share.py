"""Request limits across front doors: each door allows its share of a key's budget.

Several ``memoryos serve`` processes over the same shards each hold a
:class:`~memoryos_actors.server.ratelimit.RateLimiter`; given the number of live doors
(an injected count, faked here), a key's budget over all doors is not multiplied by it.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from memoryos_actors.server.ratelimit import RateLimiter


class FakeDoors:
    """A door count the test sets, counting how often it is asked."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.asked = 0

    def __call__(self) -> int:
        self.asked += 1
        return self.n


def _allowed_at_once(lim: RateLimiter, key: str, now: float, tries: int = 100) -> int:
    return sum(1 for _ in range(tries) if lim.check(key, now) == 0)


def test_two_doors_allow_the_keys_burst_once_between_them() -> None:
    doors = FakeDoors(2)
    a = RateLimiter(1.0, 10, door_count=doors)
    b = RateLimiter(1.0, 10, door_count=doors)
    assert _allowed_at_once(a, "k", 0.0) == 5
    assert _allowed_at_once(b, "k", 0.0) == 5
    # A key's own limit from the key file is split the same way.
    assert sum(a.check("own", 0.0, rate=1.0, burst=4) == 0 for _ in range(10)) == 2
    # Without a door count, a server is the only door: the whole budget.
    assert _allowed_at_once(RateLimiter(1.0, 10), "k", 0.0) == 10


def test_each_door_allows_at_least_one_request_however_many_doors() -> None:
    lim = RateLimiter(1.0, 3, door_count=FakeDoors(100))
    assert _allowed_at_once(lim, "k", 0.0) == 1


def test_the_doors_are_counted_again_only_every_few_seconds() -> None:
    doors = FakeDoors(2)
    lim = RateLimiter(100.0, 10, door_count=doors, recount_seconds=5.0)
    for i in range(1000):
        lim.check(f"key-{i % 7}", i * 0.004)  # 4 s of requests
    assert doors.asked == 1  # no count per request
    lim.check("k", 5.0)
    assert doors.asked == 2


def test_a_door_leaving_raises_the_share_without_a_fresh_burst() -> None:
    doors = FakeDoors(2)
    lim = RateLimiter(0.1, 10, door_count=doors, recount_seconds=5.0)
    assert _allowed_at_once(lim, "k", 0.0) == 5
    doors.n = 1
    # 5 s at 0.05 tokens/s earned a quarter of a token: the new share (burst 10) starts
    # from what is left, not from a full bucket.
    assert lim.check("k", 5.0) > 0
    assert lim.doors(5.0) == 1
    # Then it refills at the whole rate, up to the whole burst.
    assert _allowed_at_once(lim, "k", 1000.0) == 10


def test_a_door_count_that_fails_keeps_the_last_count() -> None:
    state = {"fail": False}

    def count() -> int:
        if state["fail"]:
            raise OSError("the data directory is gone")
        return 3

    lim = RateLimiter(1.0, 9, door_count=count, recount_seconds=1.0)
    assert lim.doors(0.0) == 3
    state["fail"] = True
    assert lim.doors(10.0) == 3
    assert _allowed_at_once(lim, "k", 10.0) == 3


@given(
    st.integers(min_value=1, max_value=5),
    st.floats(min_value=0.1, max_value=50.0),
    st.integers(min_value=1, max_value=40),
    st.lists(
        st.tuples(st.integers(min_value=0, max_value=4), st.floats(min_value=0.0, max_value=2.0)),
        max_size=300,
    ),
)
def test_doors_together_never_exceed_the_keys_budget(
    n: int, rate: float, burst: int, requests: list[tuple[int, float]]
) -> None:
    doors = [RateLimiter(rate, burst, door_count=lambda: n) for _ in range(n)]
    now, allowed = 0.0, 0
    for door, gap in requests:
        now += gap
        if doors[door % n].check("k", now) == 0:
            allowed += 1
        # Each door's burst is at least 1: with more doors than burst, n at once.
        assert allowed <= max(burst, n) + rate * now + 1e-6
