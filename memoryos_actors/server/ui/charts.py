"""The pictures of the memory page, as geometry for server-side SVG (no script, no CDN).

Pure functions: they turn a user's segments and page times into rectangles and labels in
SVG user units; the templates draw them (and escape every label). Times are UTC.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

__all__ = ["Bar", "HeatChart", "HistoryChart", "heat_chart", "history_chart"]

DAY_S = 86400.0
#: Most bars of the history picture; longer histories are drawn in buckets of several days.
MAX_HISTORY_BARS = 60
#: Most segments the heat picture shows (the hottest).
MAX_HEAT_BARS = 20

_WIDTH = 640.0
_LABEL_W = 70.0
_ROW_H = 22.0
_TOP = 24.0


@dataclass(frozen=True, slots=True)
class Bar:
    """One rectangle of a picture (SVG user units) and what it stands for."""

    x: float
    y: float
    width: float
    height: float
    css: str
    label: str
    value: str
    title: str


@dataclass(frozen=True, slots=True)
class HeatChart:
    """MTM segments by heat, hottest first, with the promotion threshold τ."""

    width: float
    height: float
    bars: tuple[Bar, ...]
    tau_x: float
    tau: float
    label_x: float
    shown: int
    total: int


@dataclass(frozen=True, slots=True)
class HistoryChart:
    """Stored turns per day (or per bucket of days), stacked by the tier they are in now."""

    width: float
    height: float
    bars: tuple[Bar, ...]
    bucket_days: int
    peak: int
    first_label: str
    last_label: str
    baseline: float
    total: int
    rows: tuple[tuple[str, int, int, int], ...]


def heat_chart(
    segments: Sequence[tuple[str, float, int, int]], tau: float, limit: int = MAX_HEAT_BARS
) -> HeatChart:
    """Horizontal bars of the hottest ``limit`` segments, each ``(segment id, heat,
    visits, pages)``, hottest first; a segment past ``tau`` is drawn as hot."""
    shown = sorted(segments, key=lambda s: -s[1])[:limit]
    top = max([tau * 1.15, *(s[1] for s in shown)]) or 1.0
    span = _WIDTH - _LABEL_W - 60.0
    bars = []
    for i, (sid, heat, visits, pages) in enumerate(shown):
        w = max(1.0, span * max(0.0, heat) / top)
        bars.append(
            Bar(
                _LABEL_W,
                _TOP + i * _ROW_H,
                round(w, 1),
                _ROW_H - 6,
                "bar-hot" if heat > tau else "bar-heat",
                sid,
                f"{heat:.2f}",
                f"segment {sid}: heat {heat:.2f}, {visits} visits, {pages} pages",
            )
        )
    height = _TOP + max(1, len(shown)) * _ROW_H + 10
    return HeatChart(
        _WIDTH,
        height,
        tuple(bars),
        round(_LABEL_W + span * tau / top, 1),
        tau,
        _LABEL_W - 6,
        len(shown),
        len(segments),
    )


def _day_label(day: int) -> str:
    return datetime.fromtimestamp(day * DAY_S, tz=UTC).strftime("%Y-%m-%d")


def history_chart(
    stm: Iterable[float],
    mtm: Iterable[float],
    archive_days: Iterable[tuple[float, int]],
    max_bars: int = MAX_HISTORY_BARS,
) -> HistoryChart:
    """Stacked bars of stored turns per day: ``stm`` and ``mtm`` are the timestamps of the
    pages in those tiers (seconds), ``archive_days`` ``(day start, pages)`` of the archive.
    Days without turns inside the span are empty bars; more than ``max_bars`` days are
    drawn in buckets of several days."""
    counts: dict[str, Counter[int]] = {"stm": Counter(), "mtm": Counter(), "archive": Counter()}
    for ts in stm:
        counts["stm"][int(ts // DAY_S)] += 1
    for ts in mtm:
        counts["mtm"][int(ts // DAY_S)] += 1
    for start, n in archive_days:
        counts["archive"][int(start // DAY_S)] += n
    days = sorted(set().union(*counts.values()))
    height, baseline = 180.0, 150.0
    if not days:
        return HistoryChart(_WIDTH, height, (), 1, 0, "", "", baseline, 0, ())
    first, last = days[0], days[-1]
    bucket = max(1, math.ceil((last - first + 1) / max_bars))
    n_buckets = (last - first) // bucket + 1
    per: list[dict[str, int]] = [{"stm": 0, "mtm": 0, "archive": 0} for _ in range(n_buckets)]
    for tier, counter in counts.items():
        for day, n in counter.items():
            per[(day - first) // bucket][tier] += n
    peak = max(sum(b.values()) for b in per) or 1
    left, span = 40.0, _WIDTH - 50.0
    step = span / n_buckets
    bar_w = max(1.0, step * 0.8)
    bars: list[Bar] = []
    rows = []
    for i, b in enumerate(per):
        day = first + i * bucket
        label = (
            _day_label(day)
            if bucket == 1
            else f"{_day_label(day)} to {_day_label(day + bucket - 1)}"
        )
        rows.append((label, b["archive"], b["mtm"], b["stm"]))
        y = baseline
        for tier in ("archive", "mtm", "stm"):
            n = b[tier]
            if not n:
                continue
            h = (baseline - 10.0) * n / peak
            y -= h
            bars.append(
                Bar(
                    round(left + i * step, 1),
                    round(y, 1),
                    round(bar_w, 1),
                    round(h, 1),
                    f"t-{tier}",
                    label,
                    str(n),
                    f"{label}: {n} turns now in {tier.upper()}",
                )
            )
    return HistoryChart(
        _WIDTH,
        height,
        tuple(bars),
        bucket,
        peak,
        _day_label(first),
        _day_label(first + (n_buckets - 1) * bucket),
        baseline,
        sum(sum(b.values()) for b in per),
        tuple(rows),
    )
