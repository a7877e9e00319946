"""Runs laid out in time: the dashboard's timeline of a job, and its chart of runs by outcome.

Pure, both, in percentages of the window's width (:func:`timeline`) or on a 1000 by 100 drawing
(:func:`outcome_chart`), so the page draws them with no script. A run is placed at its
occurrence (else its start, else its queueing) and is as wide as it ran, never narrower than a
sliver. Failures stack at the bottom of a bar: a red foot shows even under many successes.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from jobhost.operations.timefmt import duration_text, short_utc
from jobhost.records import RunRecord
from jobhost.triggers import UnknownTimezoneError, load_zone

__all__ = [
    "CHART_ORDER",
    "OUTCOME_ORDER",
    "RANGES",
    "RANGE_NAMES",
    "SLICES",
    "Chart",
    "Timeline",
    "outcome_chart",
    "timeline",
]

RANGES = {
    "1h": timedelta(hours=1),
    "24h": timedelta(hours=24),
    "7d": timedelta(days=7),
    "30d": timedelta(days=30),
}
RANGE_NAMES = {"1h": "hour", "24h": "24 hours", "7d": "7 days", "30d": "30 days"}
OUTCOME_ORDER = (
    "succeeded",
    "failed",
    "timed_out",
    "missed",
    "skipped",
    "abandoned",
    "cancelled",
    "running",
)
_MIN_WIDTH = 0.4
_TICK_STEPS = (
    (timedelta(hours=1), timedelta(minutes=10)),
    (timedelta(days=1), timedelta(hours=3)),
    (timedelta(days=7), timedelta(days=1)),
)
"""The step between ticks of a window up to so long (longer: 5 days)."""


@dataclass(frozen=True)
class Mark:
    run_id: str
    outcome: str
    at: datetime
    x: float
    width: float
    label: str


@dataclass(frozen=True)
class Tick:
    x: float
    label: str


@dataclass(frozen=True)
class Timeline:
    start: datetime
    end: datetime
    marks: list[Mark]
    ticks: list[Tick]
    counts: dict[str, int]


def timeline(runs: Sequence[RunRecord], *, now: datetime, span: timedelta, zone: str) -> Timeline:
    start = now - span
    total = span.total_seconds()
    marks: list[Mark] = []
    for run in sorted(runs, key=lambda r: (_placed_at(r), r.attempt)):
        at = _placed_at(run)
        if at < start or at > now:
            continue
        end = run.finished_at or (now if run.outcome == "running" else None)
        ran = (end - run.started_at).total_seconds() if end and run.started_at else 0.0
        x = (at - start).total_seconds() / total * 100
        width = min(max(ran / total * 100, _MIN_WIDTH), 100.0)
        x = min(x, 100 - width)  # a run just now stays visible at the right edge
        marks.append(Mark(run.id, run.outcome, at, round(x, 3), round(width, 3), _label(run, at)))
    counts = Counter(mark.outcome for mark in marks)
    return Timeline(start, now, marks, _ticks(start, span, zone), dict(counts))


def _placed_at(run: RunRecord) -> datetime:
    return run.occurrence or run.started_at or run.queued_at


def _label(run: RunRecord, at: datetime) -> str:
    took = duration_text(run.duration_ms / 1000) if run.duration_ms is not None else None
    parts = [f"{run.outcome} {short_utc(at)}"]
    if run.attempt > 1:
        parts.append(f"attempt {run.attempt}")
    if took:
        parts.append(f"in {took}")
    if run.host_id:
        parts.append(f"on {run.host_id}")
    error = run.error_message or run.error_type
    if error and run.outcome != "succeeded":
        parts.append(f"- {error[:200]}")
    return " ".join(parts)


def _ticks(start: datetime, span: timedelta, zone: str) -> list[Tick]:
    try:
        tz = load_zone(zone)
    except UnknownTimezoneError:
        tz = load_zone("UTC")
    step = next((step for most, step in _TICK_STEPS if span <= most), timedelta(days=5))
    local = start.astimezone(tz)
    midnight = local.replace(hour=0, minute=0, second=0, microsecond=0)
    if step >= timedelta(days=1):
        first = midnight + timedelta(days=1)
        fmt = "%a %d %b" if span <= timedelta(days=7) else "%d %b"
    else:
        # The first wall-clock multiple of the step after the window's start (3 h: 00, 03, ...).
        into_day = local.replace(tzinfo=None) - midnight.replace(tzinfo=None)
        first = midnight + (into_day // step + 1) * step
        fmt = "%H:%M"
    ticks: list[Tick] = []
    at = first
    while at < start + span:
        # Wall-clock steps in the zone, placed by the real instant (daylight saving included).
        instant = at.replace(tzinfo=None).replace(tzinfo=tz)
        x = (instant - start).total_seconds() / span.total_seconds() * 100
        if 0 <= x <= 100:
            ticks.append(Tick(round(x, 3), instant.strftime(fmt)))
        at = (at.replace(tzinfo=None) + step).replace(tzinfo=tz)
    return ticks


CHART_ORDER = ("failed", "timed_out", "abandoned", "cancelled", "missed", "skipped", "succeeded")
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
    peak: int
    """The most runs in one slice: the chart's full height."""


def outcome_chart(counts: list[dict[str, int]], start: datetime, end: datetime) -> Chart:
    """The bars of ``counts`` (outcome to runs, a slice each, oldest first) over [start, end)."""
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
                _bar_label(at, step, slice_counts),
            )
        )
    return Chart(start, end, bars, totals, peak)


def _bar_label(at: datetime, step: timedelta, counts: dict[str, int]) -> str:
    parts = [f"{counts[o]} {o}" for o in CHART_ORDER if counts.get(o)]
    runs = ", ".join(parts) if parts else "no runs"
    return f"{short_utc(at)} to {short_utc(at + step)}: {runs}"
