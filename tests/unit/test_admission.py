"""The fair admission of writers (FairGate) and the fair placement permits (FairShare)."""

from __future__ import annotations

import threading
import time

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from memoryos_actors import Overloaded
from memoryos_actors.actors.admission import FairGate, FairShare
from memoryos_actors.fairness import FairQueue

# -- FairShare ---------------------------------------------------------------------------


def _never() -> bool:
    return False


def test_a_free_permit_is_granted_at_once_and_comes_back() -> None:
    share = FairShare(1)
    a = threading.Event()
    assert share.acquire("u", a, _never)
    share.release(a, 0.001)
    b = threading.Event()
    assert share.acquire("v", b, _never)
    share.release(b)
    share.release(b)  # idempotent
    assert share.waiting == 0


def test_an_idle_user_goes_before_users_that_have_had_their_share() -> None:
    q = FairQueue(1)
    assert q.request("b0", "busy")
    assert q.done("b0", 1.0) is None  # busy used a whole second of permit time
    assert q.request("h", "holder")
    assert not q.request("b1", "busy")
    assert not q.request("b2", "busy")
    assert not q.request("q1", "quiet")  # arrives last, has had nothing
    order = []
    nxt = q.done("h", 0.0)
    while nxt is not None:
        order.append(nxt)
        nxt = q.done(nxt, 0.01)
    assert order == ["q1", "b1", "b2"]


def test_a_cancelled_wait_gives_up_its_place() -> None:
    share = FairShare(1)
    holder = threading.Event()
    assert share.acquire("a", holder, _never)
    stop = threading.Event()
    ticket = threading.Event()
    got: list[bool] = []
    waiter = threading.Thread(target=lambda: got.append(share.acquire("b", ticket, stop.is_set)))
    waiter.start()
    while share.waiting == 0:
        time.sleep(0.001)
    stop.set()
    ticket.set()
    waiter.join(10)
    assert got == [False] and share.waiting == 0
    share.release(ticket)  # what a caller does in its finally: harmless
    share.release(holder)
    again = threading.Event()
    assert share.acquire("c", again, _never)  # the permit came back, not lost


def test_a_waiting_thread_is_woken_when_granted() -> None:
    share = FairShare(1)
    holder = threading.Event()
    assert share.acquire("a", holder, _never)
    ticket = threading.Event()
    got: list[bool] = []
    waiter = threading.Thread(target=lambda: got.append(share.acquire("b", ticket, _never)))
    waiter.start()
    while share.waiting == 0:
        time.sleep(0.001)
    share.release(holder, 0.001)
    waiter.join(10)
    assert got == [True] and share.grants == 2
    share.release(ticket)


@settings(max_examples=300, deadline=None)
@given(
    permits=st.integers(1, 3),
    steps=st.lists(
        st.tuples(
            st.sampled_from(["request", "urgent", "done", "withdraw"]),
            st.sampled_from("abcde"),
            st.floats(0.0, 0.05),
        ),
        min_size=1,
        max_size=80,
    ),
)
def test_fair_queueing_grants_the_smallest_start_and_never_loses_a_permit(
    permits: int, steps: list[tuple[str, str, float]]
) -> None:
    q = FairQueue(permits)
    keys = iter(range(10**6))
    holders: list[object] = []
    waiting: dict[object, str] = {}
    for op, user, used in steps:
        if op in ("request", "urgent"):
            key = next(keys)
            if q.request(key, user, urgent=op == "urgent"):
                holders.append(key)
            else:
                waiting[key] = user
        elif op == "done" and holders:
            starts = {k: q.waiting[k][1] for k in waiting}
            nxt = q.done(holders.pop(0), used)
            if waiting:
                # The permit went to a smallest start among the waiting.
                assert nxt is not None and starts[nxt] == min(starts.values())
                del waiting[nxt]
                holders.append(nxt)
            else:
                assert nxt is None
        elif op == "withdraw" and waiting:
            key = next(iter(waiting))
            assert q.withdraw(key)
            del waiting[key]
        # Permits are conserved and never over-granted; nobody waits beside a free one.
        assert len(holders) + q.free == permits
        assert not (q.free and waiting)
        assert set(q.holders) == set(holders) and set(q.waiting) == set(waiting)
    # Everyone waiting is served in the end.
    while holders:
        nxt = q.done(holders.pop(0), 0.0)
        if nxt is not None:
            holders.append(nxt)
            waiting.pop(nxt)
    assert waiting == {} and q.free == permits


def test_an_urgent_request_goes_ahead_of_its_users_own_waiting_requests_only() -> None:
    # One permit, held. A user's page meta (urgent) asked for behind three summaries of
    # its own goes first among them; the summaries keep their order; another user's
    # request that starts earlier still goes before all of them.
    q = FairQueue(1)
    assert q.request("holder", "x")
    assert not q.request("other", "v")
    for name in ("s1", "s2", "s3"):
        assert not q.request(name, "u")
    assert not q.request("meta", "u", urgent=True)
    assert not q.request("meta2", "u", urgent=True)
    assert not q.request("s4", "u")
    order = []
    nxt = q.done("holder", 0.01)
    while nxt is not None:
        order.append(nxt)
        nxt = q.done(nxt, 0.01)
    assert order == ["other", "meta", "meta2", "s1", "s2", "s3", "s4"]
    assert q.free == 1 and not q.waiting


def test_an_urgent_request_leaves_other_users_places_alone() -> None:
    # The same arrivals with and without the urgent flag: the users' grants interleave
    # the same way; only the order of u's own requests differs.
    def users_order(urgent: bool) -> list[str]:
        q = FairQueue(1)
        assert q.request("h", "x")
        for i in range(3):
            q.request(("u", i), "u")
            q.request(("v", i), "v")
        q.request(("u", "meta"), "u", urgent=urgent)
        got: list[str] = []
        nxt = q.done("h", 0.01)
        while nxt is not None:
            assert isinstance(nxt, tuple)
            got.append(str(nxt[0]) + ("*" if nxt[1] == "meta" else ""))
            nxt = q.done(nxt, 0.01)
        return got

    plain, urgent = users_order(False), users_order(True)
    assert [u.rstrip("*") for u in plain] == [u.rstrip("*") for u in urgent]
    assert plain.index("u*") == len(plain) - 1 and urgent.index("u*") == 0


# -- FairGate ----------------------------------------------------------------------------


def test_the_gate_lets_writers_through_at_once_under_its_limit() -> None:
    gate = FairGate(0.5, floor=8, cap=16)  # the limit is the floor until a pace is known
    for n in range(1, 8):
        gate.update("u", n)
        gate.enter("u", timeout=0.01)
    assert gate.total == 7 and gate.waits == 0


def test_the_gate_limit_follows_the_measured_drain_pace() -> None:
    gate = FairGate(0.05, floor=4, cap=1000)
    gate.update("u", 100)
    for n in range(99, 50, -1):
        time.sleep(0.002)
        gate.update("u", n)
    assert gate.pace is not None and gate.pace >= 0.002
    # 50 ms of work at >= 2 ms a page is at most 25 pages (never below the floor).
    assert 4 <= gate.limit <= 25


def test_a_writer_waits_for_progress_and_is_refused_only_without_any() -> None:
    gate = FairGate(0.5, floor=2, cap=2)
    gate.update("flood", 5)
    with pytest.raises(Overloaded, match="none placed"):
        gate.enter("flood", timeout=0.05)  # nothing moves at all: refused
    assert gate.refused == 1

    # Progress keeps a waiter waiting rather than refused, however long the wait.
    done = threading.Event()
    err: list[BaseException] = []

    def writer() -> None:
        try:
            gate.enter("flood", timeout=0.2)
        except BaseException as exc:  # noqa: BLE001 - the finding
            err.append(exc)
        done.set()

    t = threading.Thread(target=writer)
    t.start()
    n = 5
    while not done.is_set() and n > 1:
        time.sleep(0.1)  # each gap is under the timeout; the whole wait is not
        n -= 1
        gate.update("flood", n)
    t.join(10)
    assert err == [] and done.is_set()


def test_a_user_below_its_fair_share_passes_a_full_gate() -> None:
    gate = FairGate(0.5, floor=8, cap=8)
    for u in ("a", "b"):
        gate.update(u, 6)  # 12 queued, limit 8: full; fair share is 8 // 2 = 4
    gate.enter("quiet", timeout=0.01)  # queued 0 < 4: through at once
    with pytest.raises(Overloaded):
        gate.enter("a", timeout=0.02)  # over its share, and nothing placed


def test_waiting_writers_are_let_through_fewest_queued_user_first() -> None:
    gate = FairGate(0.5, floor=4, cap=4)
    gate.update("big", 3)
    gate.update("mid", 2)  # total 5 >= 4; shares 4 // 2 = 2: both at or over theirs
    gate.update("small", 1)  # total 6; share 4 // 3 = 1: small (1) is not under it
    order: list[str] = []
    lock = threading.Lock()

    def writer(user: str) -> None:
        gate.enter(user, timeout=10)
        with lock:
            order.append(user)

    threads = []
    for user in ("big", "mid", "small"):
        t = threading.Thread(target=writer, args=(user,))
        t.start()
        threads.append(t)
        while gate.waiting < len(threads):
            time.sleep(0.001)
    # One page placed lets exactly one writer through: the one with the fewest queued.
    gate.update("big", 2)  # big now has 2, mid 2, small 1
    while len(order) < 1:
        time.sleep(0.001)
    time.sleep(0.02)
    assert order == ["small"]
    gate.update("big", 1)
    while len(order) < 2:
        time.sleep(0.001)
    time.sleep(0.02)
    assert order == ["small", "big"]  # big (1) now has fewer than mid (2)
    gate.update("mid", 0)
    for t in threads:
        t.join(10)
    assert order == ["small", "big", "mid"]


@settings(max_examples=200, deadline=None)
@given(
    ops=st.lists(
        st.tuples(st.sampled_from(["w1", "w2", "w3", "w4", "w5"]), st.integers(-3, 3)),
        min_size=1,
        max_size=200,
    )
)
# Found by hypothesis: newcomers one after another, each let in on its own fair share
# (at least one page), took the total to 13 with a limit of 6.
@example(ops=[("w3", 3), ("w3", 3), ("w4", 3), ("w1", 2), ("w2", 1), ("w5", 1)])
def test_the_gate_total_stays_bounded_by_three_times_its_limit_and_a_page_a_user(
    ops: list[tuple[str, int]],
) -> None:
    """Writers add a page only after the gate let them in at once; placements take pages
    away. The total never exceeds three times the limit (the limit itself, each user's fair
    share of it up to twice it, a band for users with few pages queued up to three times
    it) plus one page per user with pages queued (let in with nothing queued), and it
    always equals the sum of what the users reported."""
    gate = FairGate(10.0, floor=6, cap=6)
    queued: dict[str, int] = {}
    for user, delta in ops:
        if delta > 0:
            for _ in range(delta):
                try:
                    gate.enter(user, timeout=0.0)
                except Overloaded:
                    break
                queued[user] = queued.get(user, 0) + 1
                gate.update(user, queued[user])
        elif delta < 0 and queued.get(user):
            queued[user] = max(0, queued[user] + delta)
            gate.update(user, queued[user])
        assert gate.total == sum(queued.values())
        assert gate.total <= 3 * gate.limit + sum(1 for n in queued.values() if n)


def test_past_twice_the_limit_a_user_with_few_pages_queued_still_passes_a_flooder_waits() -> None:
    gate = FairGate(10.0, floor=10, cap=10)  # limit 10
    gate.update("f1", 10)
    gate.update("f2", 10)  # two flooders hold the total at twice the limit
    with pytest.raises(Overloaded):
        gate.enter("f1", timeout=0.0)  # a flooder waits (here: no wait allowed)
    for n in range(4):  # a quiet user: in at once while under half the mean queue
        gate.enter("quiet", timeout=0.0)
        gate.update("quiet", n + 1)
    with pytest.raises(Overloaded):
        gate.enter("quiet", timeout=0.0)  # 4 of 24 / 3 users: no longer under half of it
    gate.update("f2", 16)  # 30 in all: three times the limit, the band is full
    with pytest.raises(Overloaded):
        gate.enter("quiet", timeout=0.0)
    gate.update("quiet", 0)  # its pages placed
    gate.update("f2", 20)  # still 30 in all
    gate.enter("quiet", timeout=0.0)  # nothing queued: in, even past three times the limit
    gate.update("quiet", 1)
    gate.enter("newcomer", timeout=0.0)
    gate.update("newcomer", 1)
    for user in ("quiet", "newcomer"):  # one page each, then they wait like the others
        with pytest.raises(Overloaded):
            gate.enter(user, timeout=0.0)
