"""Runs by outcome over time, as stacked bars: where each bar and segment of the dashboard's
chart goes, for one job or the whole installation.

Pure: the counts of each slice of the window in, bars as numbers on a 1000 by 100 drawing out,
so the page draws it as SVG with no script. Failures stack at the bottom of a bar, so a red
foot shows at a glance even under many successes.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from jobhost.operations.timefmt import short_utc

__all__ = ["CHART_ORDER", "SLICES", "Bar", "Chart", "Segment", "outcome_chart"]

CHART_ORDER = (
    "failed",
    "timed_out",
    "abandoned",
    "cancelled",
    "missed",
    "skipped",
    "succeeded",
)
"""Bottom to top of each bar."""

SLICES = {"1h": 12, "24h": 24, "7d": 28, "30d": 30}
"""How many bars each range of the job page and the Failures page is cut into."""

_WIDTH = 1000.0
_HEIGHT = 100.0
_GAP = 0.15


@dataclass(frozen=True)
class Segment:
    outcome: str
    y: float
    height: float
    count: int


@dataclass(frozen=True)
class Bar:
    start: datetime
    x: float
    width: float
    total: int
    segments: list[Segment]
    label: str


@dataclass(frozen=True)
class Chart:
    start: datetime
    end: datetime
    bars: list[Bar]
    totals: dict[str, int]
    """Runs of each outcome in the whole window."""
    peak: int
    """The most runs in one slice: the chart's full height."""


def outcome_chart(counts: list[dict[str, int]], start: datetime, end: datetime) -> Chart:
    """The bars of ``counts`` (one mapping of outcome to runs per slice, oldest first) over
    [start, end)."""
    slices = max(len(counts), 1)
    step = (end - start) / slices
    pitch = _WIDTH / slices
    peak = max((sum(c.values()) for c in counts), default=0)
    totals: dict[str, int] = {}
    bars: list[Bar] = []
    for index, slice_counts in enumerate(counts):
        at = start + step * index
        segments: list[Segment] = []
        base = _HEIGHT
        for outcome in CHART_ORDER:
            count = slice_counts.get(outcome, 0)
            if not count:
                continue
            totals[outcome] = totals.get(outcome, 0) + count
            height = count / peak * _HEIGHT
            base -= height
            segments.append(Segment(outcome, round(base, 3), round(height, 3), count))
        total = sum(slice_counts.get(o, 0) for o in CHART_ORDER)
        bars.append(
            Bar(
                at,
                round(index * pitch + pitch * _GAP / 2, 3),
                round(pitch * (1 - _GAP), 3),
                total,
                segments,
                _label(at, step, slice_counts),
            )
        )
    return Chart(start, end, bars, totals, peak)


def _label(at: datetime, step: timedelta, counts: dict[str, int]) -> str:
    parts = [f"{counts[o]} {o}" for o in CHART_ORDER if counts.get(o)]
    runs = ", ".join(parts) if parts else "no runs"
    return f"{short_utc(at)} to {short_utc(at + step)}: {runs}"
