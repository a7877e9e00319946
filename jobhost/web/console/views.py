"""What each dashboard page shows, read from the store: plain data for the templates.

A page's query string is its whole state, so a link to a search is the search. Values a page
does not know fall back to the defaults rather than fail: an old bookmark should still open.

Runs laid out in time, the timeline of a job and its chart of runs by outcome, are pure, in
percentages of the window's width (:func:`timeline`) or on a 1000 by 100 drawing
(:func:`outcome_chart`), so the page draws them with no script. A run is placed at its
occurrence (else its start, else its queueing) and is as wide as it ran, never narrower than a
sliver. Failures stack at the bottom of a bar: a red foot shows even under many successes.
"""

from __future__ import annotations

import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any, Generic, TypeVar
from urllib.parse import urlencode

from jobhost.catalog import Catalog
from jobhost.config import Settings
from jobhost.errors import UnknownJobError
from jobhost.operations.failures import (
    SEARCH_LIMIT,
    BadFailureQuery,
    Failure,
    FailureGroup,
    FailureQuery,
    decode_cursor,
    group_failures,
    one_per_work,
    parse_since,
    read_failures,
)
from jobhost.operations.jobs import JobStateView, read_state, require_known_job
from jobhost.operations.report import JobReport, Report, build_report
from jobhost.operations.runs import OUTCOMES
from jobhost.operations.timefmt import duration_text, short_utc
from jobhost.records import (
    FAILED,
    STREAK_LIMIT,
    ChangeSearch,
    Dropped,
    JobChange,
    LogLine,
    RunRecord,
)
from jobhost.store import Store
from jobhost.store.snapshot import JobPage, JobRead
from jobhost.triggers import UnknownTimezoneError, load_zone

__all__ = [
    "CHANGES_PAGE",
    "CHART_ORDER",
    "CHART_SECONDS",
    "FAILURES_PAGE",
    "OUTCOME_ORDER",
    "RANGES",
    "RANGE_NAMES",
    "Chart",
    "ShortCache",
    "changes_view",
    "failures_view",
    "job_query",
    "job_view",
    "number",
    "outcome_chart",
    "query_link",
    "run_view",
    "timeline",
]

_HISTORY_PAGE = 25
_HISTORY_PAGES = 400
"""The deepest page of a job's history the page offers (older runs: `jobhost history`)."""
_PAGE_LOG_LINES = 5000
"""Lines of a run's log the page shows (the settings keep 1,000 by default)."""
CHANGES_PAGE = 50
FAILURES_PAGE = 50
CHART_SECONDS = 60.0
"""How long the installation's chart of one range is kept before it is counted again."""
_FIELD = 200
_CHANGE_FILTERS = ("actor", "action", "job", "module", "since")


@dataclass(frozen=True)
class JobView:
    job: JobReport
    report: Report
    timeline: Timeline
    fires: list[datetime]
    rows: JobPage
    runs: list[RunRecord]
    """One page of the job's ledger, newest first, of the chosen outcome."""
    more: bool
    """Whether an older page follows."""
    chart: Chart
    state: JobStateView


@dataclass(frozen=True)
class RunView:
    run: RunRecord
    attempts: list[RunRecord]
    zone: str
    log: list[LogLine | Dropped]
    after: int
    """The lines shown are those numbered above this (0: from the first)."""
    retry_of: RunRecord | None

    @property
    def running(self) -> bool:
        return self.run.outcome in {"running", "pending"}


def job_view(
    settings: Settings, catalog: Catalog, store: Store, name: str, query: JobQuery
) -> JobView | None:
    report = build_report(settings, catalog, store, job=name)
    if not report.jobs:
        return None
    span, page = RANGES[query.span], query.page
    job = report.jobs[0]
    now = report.generated_at
    rows = store.job_page(
        JobRead(
            name,
            history=_HISTORY_PAGE + 1,
            outcome=query.outcome,
            offset=(page - 1) * _HISTORY_PAGE,
            window=(now - span, now),
            slices=_SLICES[query.span],
            streak=job.status == "failing",
        )
    )
    return JobView(
        job=job,
        report=report,
        timeline=timeline(rows.window, now=now, span=span, zone=job.effective_trigger.timezone),
        fires=_next_fires(catalog, job, now),
        rows=rows,
        runs=rows.history[:_HISTORY_PAGE],
        more=len(rows.history) > _HISTORY_PAGE and page < _HISTORY_PAGES,
        chart=outcome_chart(rows.counts, now - span, now),
        state=read_state(store, name),
    )


def run_view(store: Store, catalog: Catalog, run_id: str, *, after: int = 0) -> RunView | None:
    page = store.run_pages([run_id], after=after, lines=_PAGE_LOG_LINES, attempts=True).get(run_id)
    if page is None:
        return None
    spec = catalog.jobs.get(page.run.job_name)
    zone = spec.trigger.timezone if spec is not None else "UTC"
    return RunView(page.run, page.attempts, zone, page.lines, after, page.retry_of)


def _next_fires(catalog: Catalog, job: JobReport, now: datetime) -> list[datetime]:
    """An interval job's from its stored next fire (its phase), a cron job's from its cron."""
    spec = catalog.jobs.get(job.name)
    if spec is None or not spec.enabled or job.paused:
        return []
    interval = spec.trigger.interval if spec.trigger.kind == "interval" else None
    if interval is not None and job.next_fire is not None:
        return [job.next_fire + index * interval for index in range(10)]
    schedule = spec.schedule(now)
    return schedule.iter_after(now, 10) if schedule is not None else []


@dataclass(frozen=True)
class JobQuery:
    span: str
    outcome: str | None
    page: int

    def link(self, **change: Any) -> str:
        query = {"range": self.span, "outcome": self.outcome, "page": self.page, **change}
        defaults = {"range": "24h", "page": 1}
        return query_link({key: v for key, v in query.items() if v != defaults.get(key)})

    def template_values(self) -> dict[str, Any]:
        return {
            "span": self.span,
            "span_name": RANGE_NAMES[self.span],
            "ranges": list(RANGES),
            "chart_outcomes": CHART_ORDER,
            "ledger_outcomes": OUTCOMES,
            "outcome": self.outcome,
            "page_number": self.page,
            "history_link": self.link,
        }


def job_query(params: Mapping[str, str]) -> JobQuery:
    span = params.get("range", "24h")
    outcome = params.get("outcome")
    return JobQuery(
        span=span if span in RANGES else "24h",
        outcome=outcome if outcome in OUTCOMES else None,
        page=number(params.get("page", "1")[:8], 1, 1, _HISTORY_PAGES),
    )


def number(text: str | None, default: int, low: int, high: int) -> int:
    try:
        value = int(text) if text is not None else default
    except ValueError:
        value = default
    return min(max(value, low), high)


def query_link(values: Mapping[str, Any], prefix: str = "?") -> str:
    return prefix + urlencode({key: value for key, value in values.items() if value}, doseq=True)


@dataclass(frozen=True)
class FailuresView:
    search: str
    job: str
    since: str
    span: str
    cursor: str
    rows: list[Failure] = field(default_factory=list)
    next_cursor: str | None = None
    searched_to: datetime | None = None
    chart: Chart | None = None
    problem: str | None = None
    """Why the filters could not be read (the list is then empty and the answer 400)."""
    streak_limit: int = STREAK_LIMIT
    everything: bool = False

    @property
    def groups(self) -> list[FailureGroup]:
        return group_failures(self.rows)

    @property
    def retry_ids(self) -> list[str]:
        """What "retry the N shown" retries: an open finished failure per piece of work."""
        open_runs = (r.run for r in self.rows if r.outcome in FAILED and r.resolution is None)
        return [run.id for run in one_per_work(open_runs)]

    def link(self, **change: str | None) -> str:
        values = {
            "q": self.search,
            "job": self.job,
            "since": self.since,
            "range": self.span if self.span != "24h" else None,
            "all": "true" if self.everything else None,
        }
        return query_link({**values, **change})


def failures_view(
    store: Store, params: Mapping[str, str], charts: ShortCache[Chart] | None = None
) -> FailuresView:
    """The chart from ``charts`` while fresh: counting a busy day reads every run of it."""
    span = params.get("range", "24h")
    span = span if span in RANGES else "24h"
    asked = FailuresView(
        search=params.get("q", "").strip()[:SEARCH_LIMIT],
        job=params.get("job", "").strip()[:200],
        since=params.get("since", "").strip()[:64],
        span=span,
        cursor=params.get("cursor", "")[:200],
        everything=params.get("all") == "true",
    )
    now = store.now()

    def count() -> Chart:
        at, rows = store.health_rows(chart=(RANGES[span], _SLICES[span]))
        return outcome_chart(rows.counts, at - RANGES[span], at)

    chart = charts.get(span, count) if charts is not None else count()
    try:
        query = FailureQuery(
            since=parse_since(asked.since, now) if asked.since else None,
            job=asked.job or None,
            text=asked.search or None,
            limit=FAILURES_PAGE,
            cursor=decode_cursor(asked.cursor) if asked.cursor else None,
            include_resolved=asked.everything,
        )
        if query.job is not None:
            require_known_job(None, store, query.job)
    except (BadFailureQuery, UnknownJobError) as error:
        problem = str(error) if isinstance(error, BadFailureQuery) else f"job: {error}"
        return replace(asked, cursor="", chart=chart, problem=problem)
    found = read_failures(store, query)
    return replace(
        asked,
        rows=found.failures,
        next_cursor=found.next_cursor,
        searched_to=found.searched_to,
        chart=chart,
    )


@dataclass(frozen=True)
class ChangesView:
    filters: dict[str, str]
    now: datetime
    changes: list[JobChange] = field(default_factory=list)
    older: str | None = None
    """The link to the next page, older changes, when there are any."""
    problem: str | None = None
    paged: bool = False
    """Whether this is an older page than the newest."""

    @property
    def filtered(self) -> bool:
        return any(self.filters.values())

    @property
    def newest(self) -> str:
        return query_link(self.filters, "/changes?")


def changes_view(store: Store, params: Mapping[str, str]) -> ChangesView:
    values = {name: params.get(name, "").strip()[:_FIELD] for name in _CHANGE_FILTERS}
    asked_before = number(params.get("before"), 0, 0, 2**62)
    before = asked_before if 0 < asked_before < 2**62 else None
    now = store.now()
    asked = ChangesView(values, now, paged=before is not None)
    since = None
    if values["since"]:
        try:
            since = parse_since(values["since"], now)
        except BadFailureQuery as problem:
            return replace(asked, problem=str(problem))
    search = ChangeSearch(
        actor=values["actor"],
        action=values["action"],
        job=values["job"] or None,
        module=values["module"],
        since=since,
        before_id=before,
    )
    # One more than a page: whether an older page exists, without counting the log.
    found = store.search_changes(search, CHANGES_PAGE + 1)
    shown = found[:CHANGES_PAGE]
    older = None
    if len(found) > CHANGES_PAGE:
        older = query_link({**values, "before": shown[-1].id}, "/changes?")
    return replace(asked, changes=shown, older=older)


SLOWER = 10
"""A value that took ``t`` seconds to make is kept at least ``SLOWER * t`` seconds."""

_V = TypeVar("_V")


class ShortCache(Generic[_V]):
    """Values kept ``seconds`` (none with 0), or :data:`SLOWER` times as long as making one took
    (so making them costs at most a tenth of a CPU); at most ``entries``, the oldest dropped."""

    def __init__(
        self, seconds: float, entries: int = 32, monotonic: Callable[[], float] = time.monotonic
    ) -> None:
        self._seconds = seconds
        self._entries = entries
        self._monotonic = monotonic
        self._items: OrderedDict[Hashable, tuple[float, _V, float]] = OrderedDict()
        # One maker at a time: ten viewers arriving just after an expiry cost one read, not ten,
        # and while it reads they are answered the value it replaces.
        self._lock = threading.Lock()
        self.made = 0

    def get(self, key: Hashable, make: Callable[[], _V]) -> _V:
        """Fresh, else made; a stale one while another thread makes it."""
        kept = self._items.get(key)
        if kept is not None and self._monotonic() - kept[0] < kept[2]:
            return kept[1]
        if not self._lock.acquire(blocking=kept is None) and kept is not None:
            return kept[1]  # another thread makes a fresh one
        try:
            kept = self._items.get(key)
            if kept is not None and self._monotonic() - kept[0] < kept[2]:
                return kept[1]
            started = self._monotonic()
            value = make()
            self.made += 1
            done = self._monotonic()
            if self._seconds > 0:  # 0: nothing is kept (a benchmark's every read)
                keep = max(self._seconds, SLOWER * (done - started))
                self._items[key] = (done, value, keep)
                self._items.move_to_end(key)
                while len(self._items) > self._entries:
                    self._items.popitem(last=False)
            return value
        finally:
            self._lock.release()

    def clear(self) -> None:
        with self._lock:
            self._items.clear()


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

_SLICES = {"1h": 12, "24h": 24, "7d": 28, "30d": 30}
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
