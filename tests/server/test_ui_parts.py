"""The memory page's parts without a server: its sessions and its pictures."""

from __future__ import annotations

import pytest

pytest.importorskip("jinja2")

from memoryos_actors.server.ui.charts import DAY_S, heat_chart, history_chart
from memoryos_actors.server.ui.sessions import SessionStore


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_session_ends_when_idle_too_long_or_too_old_or_its_key_is_dropped() -> None:
    clock = Clock()
    store = SessionStore(idle_s=60.0, max_age_s=300.0, clock=clock)
    sid, session = store.create("k1", "acme")
    assert store.get(sid) is session and session.check_csrf(session.csrf)
    assert not session.check_csrf("x") and not session.check_csrf(None)
    for _ in range(5):  # used every 59 s: alive until 300 s after login
        clock.now += 59.0
        assert store.get(sid) is session
    clock.now += 59.0
    assert store.get(sid) is None
    sid, _ = store.create("k1", "acme")
    clock.now += 61.0
    assert store.get(sid) is None
    a, _ = store.create("k1", "acme")
    b, _ = store.create("k2", "acme")
    assert store.drop_key("k1") == 1 and store.get(a) is None and store.get(b) is not None
    store.drop(b)
    assert store.get(b) is None and store.get("") is None and store.get("x" * 500) is None


def test_the_least_recently_used_session_goes_first_past_the_cap() -> None:
    store = SessionStore(max_sessions=2, clock=Clock())
    first, _ = store.create("k", "t")
    second, _ = store.create("k", "t")
    assert store.get(first) is not None  # used: the second is now the oldest
    third, _ = store.create("k", "t")
    assert len(store) == 2 and store.get(second) is None
    assert store.get(first) is not None and store.get(third) is not None


def test_the_heat_picture_marks_segments_past_tau_and_keeps_the_hottest() -> None:
    segments = [(f"s{i}", float(i), i, 2) for i in range(30)]
    chart = heat_chart(segments, tau=5.0, limit=20)
    assert chart.shown == 20 and chart.total == 30
    assert [b.label for b in chart.bars] == [f"s{i}" for i in range(29, 9, -1)]
    assert all(b.css == "bar-hot" for b in chart.bars)
    low = heat_chart([("s1", 4.0, 1, 1), ("s2", 6.0, 2, 3)], tau=5.0)
    assert [(b.label, b.css) for b in low.bars] == [("s2", "bar-hot"), ("s1", "bar-heat")]
    assert low.bars[0].x < low.tau_x < low.bars[0].x + low.bars[0].width


def test_the_history_picture_counts_every_turn_in_at_most_60_bars() -> None:
    t0 = 1_700_000_000.0
    stm = [t0 + 700 * DAY_S + i for i in range(7)]
    mtm = [t0 + d * DAY_S for d in range(0, 700, 7)]
    archive = [(t0 + d * DAY_S, 3) for d in range(0, 600, 2)]
    chart = history_chart(stm, mtm, archive)
    assert chart.total == 7 + len(mtm) + 3 * len(archive)
    assert chart.bucket_days == 12 and len(chart.rows) <= 60
    assert sum(a + m + s for _label, a, m, s in chart.rows) == chart.total
    one_day = history_chart([t0, t0 + 60.0], [], [])
    assert one_day.bucket_days == 1 and one_day.total == 2 and len(one_day.bars) == 1
    assert history_chart([], [], []).bars == ()
