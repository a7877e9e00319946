"""What each dashboard page shows, read from the store: plain data for the templates.

A page's query string is its whole state, so a link to a search is the search. Values a page
does not know fall back to the defaults rather than fail: the address is a bookmark, and an old
one should still open. Pages share what they read for a few seconds (:class:`ShortCache`).
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
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
    parse_since,
    read_failures,
)
from jobhost.operations.jobs import JobStateView, read_state, require_known_job
from jobhost.operations.report import JobReport, Report, build_report
from jobhost.operations.runs import OUTCOMES
from jobhost.records import (
    FAILED,
    STREAK_LIMIT,
    ChangeSearch,
    Dropped,
    JobChange,
    LogLine,
    RunRecord,
    work_key,
)
from jobhost.store import Store
from jobhost.store.snapshot import JobPage, JobRead
from jobhost.web.console.timeline import (
    CHART_ORDER,
    RANGE_NAMES,
    RANGES,
    SLICES,
    Chart,
    Timeline,
    outcome_chart,
    timeline,
)

__all__ = [
    "CHANGES_PAGE",
    "CHART_SECONDS",
    "FAILURES_PAGE",
    "ShortCache",
    "changes_view",
    "failures_view",
    "job_query",
    "job_view",
    "number",
    "query_link",
    "run_view",
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
    """Its failures, newest changes from every surface, backfills and a failing job's streak."""
    runs: list[RunRecord]
    """One page of the job's ledger, newest first, of the chosen outcome."""
    more: bool
    """Whether an older page follows."""
    chart: Chart
    state: JobStateView
    """What the job keeps between runs (``context.state``), by key."""


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
        """Still writing: the page's script tails the log (without script, it reloads)."""
        return self.run.outcome in {"running", "pending"}


def job_view(
    settings: Settings, catalog: Catalog, store: Store, name: str, query: JobQuery
) -> JobView | None:
    """The job page: timeline and chart over the query's range before now, and the page it
    asks for of its history, of its outcome when it names one."""
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
            slices=SLICES[query.span],
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
    """The run, its attempts and its log lines numbered above ``after`` (the page's script
    asks for the lines after the last one it shows, to tail a running run)."""
    page = store.run_pages([run_id], after=after, lines=_PAGE_LOG_LINES, attempts=True).get(run_id)
    if page is None:
        return None
    spec = catalog.jobs.get(page.run.job_name)
    zone = spec.trigger.timezone if spec is not None else "UTC"
    return RunView(page.run, page.attempts, zone, page.lines, after, page.retry_of)


def _next_fires(catalog: Catalog, job: JobReport, now: datetime) -> list[datetime]:
    """An interval job's from its stored next fire (its phase), a cron job's from its
    expression."""
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
    """What a job page's address asks for: the time range, the history's outcome and page."""

    span: str
    outcome: str | None
    page: int

    def link(self, **change: Any) -> str:
        """This query with ``change`` applied (None drops a parameter)."""
        query = {"range": self.span, "outcome": self.outcome, "page": self.page, **change}
        defaults = {"range": "24h", "page": 1}
        return query_link({key: v for key, v in query.items() if v != defaults.get(key)})

    def template_values(self) -> dict[str, Any]:
        """What job.html reads of the query."""
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
    """A page's whole-number parameter, ``default`` when it is none, held within bounds: an old
    or edited address still opens."""
    try:
        value = int(text) if text is not None else default
    except ValueError:
        value = default
    return min(max(value, low), high)


def query_link(values: Mapping[str, Any], prefix: str = "?") -> str:
    """A page's address with ``values`` as its query, those without a value left out (a list
    is a repeated parameter)."""
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
    """Resolved failures are listed too (``all=true``)."""

    @property
    def groups(self) -> list[FailureGroup]:
        return group_failures(self.rows)

    @property
    def retry_ids(self) -> list[str]:
        """The open finished failures shown, one per piece of work: what "retry the N shown"
        retries."""
        found: dict[tuple[str, str], str] = {}
        for row in self.rows:
            if row.outcome in FAILED and row.resolution is None:
                found.setdefault((row.run.job_name, work_key(row.run)), row.run.id)
        return list(found.values())

    def link(self, **change: str | None) -> str:
        """This page's query with ``change`` applied (None drops a parameter)."""
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
    """The page for ``params``; the installation's chart from ``charts`` when it holds a fresh
    one for the range (counting a busy installation's day reads every run of it)."""
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
        at, rows = store.health_rows(chart=(RANGES[span], SLICES[span]))
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
    """The search's text by name: actor, action, job, module and since."""
    now: datetime
    changes: list[JobChange] = field(default_factory=list)
    older: str | None = None
    """The link to the next page, older changes, when there are any."""
    problem: str | None = None
    """Why the filters could not be read (the list is then empty and the answer 400)."""
    paged: bool = False
    """Whether this is an older page than the newest."""

    @property
    def filtered(self) -> bool:
        return any(self.filters.values())

    @property
    def newest(self) -> str:
        """The link to the newest page of the same search."""
        return query_link(self.filters, "/changes?")


def changes_view(store: Store, params: Mapping[str, str]) -> ChangesView:
    values = {name: params.get(name, "").strip()[:_FIELD] for name in _CHANGE_FILTERS}
    before = _positive(params.get("before"))
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


def _positive(value: str | None) -> int | None:
    try:
        number = int(value) if value else None
    except ValueError:
        return None
    return number if number is not None and 0 < number < 2**62 else None


SLOWER = 10
"""A value that took ``t`` seconds to make is kept at least ``SLOWER * t`` seconds."""

_V = TypeVar("_V")


class ShortCache(Generic[_V]):
    """Values kept ``seconds`` (none with 0) after they were made, or :data:`SLOWER` times as
    long as making one took if that is longer (so making them costs at most a tenth of a CPU
    however many read them); at most ``entries`` of them (the oldest made is dropped first)."""

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
        """How many values were made (what the cache saves is visible in tests)."""

    def get(self, key: Hashable, make: Callable[[], _V]) -> _V:
        """The value kept under ``key`` if fresh; else ``make()``'s, kept. While another
        thread makes a fresh one, a stale value is answered at once rather than waited for."""
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
        """Forget everything: the next read sees the store as it is (after an action)."""
        with self._lock:
            self._items.clear()
