"""What a job page's address asks for: the time range, the history's outcome filter and page.

Values the page does not know fall back to the defaults (the last 24 hours, every outcome, the
first page) rather than fail: the address is a bookmark, and an old one should still open.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from jobhost.operations.runs import OUTCOMES
from jobhost.web.console.chart import CHART_ORDER
from jobhost.web.console.timeline import RANGE_NAMES, RANGES
from jobhost.web.console.views import HISTORY_PAGES

__all__ = ["JobQuery", "job_query"]


@dataclass(frozen=True)
class JobQuery:
    span: str
    outcome: str | None
    page: int

    def link(self, **change: Any) -> str:
        """This query with ``change`` applied (None drops a parameter)."""
        query = {"range": self.span, "outcome": self.outcome, "page": self.page, **change}
        if query["range"] == "24h":
            query["range"] = None
        if query["page"] == 1:
            query["page"] = None
        return "?" + urlencode({key: value for key, value in query.items() if value})

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
    try:
        page = int(params.get("page", "1")[:8])
    except ValueError:
        page = 1
    return JobQuery(
        span=span if span in RANGES else "24h",
        outcome=outcome if outcome in OUTCOMES else None,
        page=min(max(page, 1), HISTORY_PAGES),
    )
