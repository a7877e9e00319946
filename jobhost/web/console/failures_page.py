"""The dashboard's Failures page: failed, timed-out, abandoned and stuck runs of every job, a
page at a time, searchable by error text, under the installation's runs-by-outcome chart.

The query string is the page's whole state (``q``, ``job``, ``since``, ``range``, ``all``,
``cursor``), so a link to a search is the search. What the list shows is what ``jobhost
failures`` prints: open failures (``all=true``: resolved ones too), repeats of one job and
error as one row with their count.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from urllib.parse import urlencode

from jobhost.clock import Clock
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
from jobhost.operations.jobs import require_known_job
from jobhost.records import FAILED, STREAK_LIMIT, work_key
from jobhost.store import Store
from jobhost.web.console.cache import ShortCache
from jobhost.web.console.chart import SLICES, Chart, outcome_chart
from jobhost.web.console.timeline import RANGES

__all__ = ["CHART_SECONDS", "FAILURES_PAGE", "FailuresView", "failures_view"]

FAILURES_PAGE = 50
"""Runs on one page of the list."""
CHART_SECONDS = 60.0
"""How long the installation's chart of one range is kept before it is counted again."""


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
        seen: set[tuple[str, str]] = set()
        found: list[str] = []
        for row in self.rows:
            key = (row.run.job_name, work_key(row.run))
            if row.outcome in FAILED and row.resolution is None and key not in seen:
                seen.add(key)
                found.append(row.run.id)
        return found

    def link(self, **change: str | None) -> str:
        """This page's query with ``change`` applied (None drops a parameter)."""
        values: dict[str, str | None] = {
            "q": self.search,
            "job": self.job,
            "since": self.since,
            "range": self.span if self.span != "24h" else None,
            "all": "true" if self.everything else None,
        }
        values.update(change)
        return "?" + urlencode({key: value for key, value in values.items() if value})


def failures_view(
    store: Store,
    params: Mapping[str, str],
    clock: Clock | None = None,
    charts: ShortCache[Chart] | None = None,
) -> FailuresView:
    """The page for ``params``; the installation's chart from ``charts`` when it holds a fresh
    one for the range (counting a busy installation's day reads every run of it)."""
    span = params.get("range", "24h")
    span = span if span in RANGES else "24h"
    view = FailuresView(
        search=params.get("q", "").strip()[:SEARCH_LIMIT],
        job=params.get("job", "").strip()[:200],
        since=params.get("since", "").strip()[:64],
        span=span,
        cursor=params.get("cursor", "")[:200],
        everything=params.get("all") == "true",
    )
    now = store.now()

    def count() -> Chart:
        at, counts = store.counts_before(RANGES[span], SLICES[span])
        return outcome_chart(counts, at - RANGES[span], at)

    chart = charts.get(span, count) if charts is not None else count()
    try:
        query = FailureQuery(
            since=parse_since(view.since, now) if view.since else None,
            job=view.job or None,
            text=view.search or None,
            limit=FAILURES_PAGE,
            cursor=decode_cursor(view.cursor) if view.cursor else None,
            include_resolved=view.everything,
        )
        if query.job is not None:
            require_known_job(None, store, query.job)
    except BadFailureQuery as error:
        return _refused(view, chart, f"{error.field}: {error.detail}")
    except UnknownJobError as error:
        return _refused(view, chart, f"job: {error}")
    found = read_failures(store, query)
    return FailuresView(
        search=view.search,
        job=view.job,
        since=view.since,
        span=view.span,
        cursor=view.cursor,
        rows=found.failures,
        next_cursor=found.next_cursor,
        searched_to=found.searched_to,
        chart=chart,
        everything=view.everything,
    )


def _refused(view: FailuresView, chart: Chart, problem: str) -> FailuresView:
    return FailuresView(
        search=view.search,
        job=view.job,
        since=view.since,
        span=view.span,
        cursor="",
        chart=chart,
        problem=problem,
        everything=view.everything,
    )
