"""A backfill from the job page: the form's range is planned and shown, then confirmed.

The first post (no ``confirm``) answers a preview: the occurrences the backfill would run, as
``jobhost backfill --dry-run`` lists them, with a confirmation form carrying the same fields.
The confirmed post records the backfill for the hosts (audited like every dashboard action) and
leads back to the job page, whose backfills section shows its progress. Bad input (a bound
without a zone, a range in the future, too many occurrences) answers 400 with the reason.
"""

from __future__ import annotations

import logging
from typing import Any, Protocol

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from jobhost.catalog import Catalog
from jobhost.clock import Clock, SystemClock
from jobhost.config import Settings
from jobhost.operations.backfills import (
    BackfillInputError,
    BackfillPlan,
    ensure_scheduled,
    plan_backfill,
    start_backfill,
)
from jobhost.operations.timefmt import iso_utc
from jobhost.store import Store
from jobhost.web.app import blocking
from jobhost.web.console.audit_log import audit
from jobhost.web.console.auth import client_of

__all__ = ["backfill_action"]

_SHOWN = 200
"""At most this many occurrences are listed on the preview; the count says the rest."""
_audit = logging.getLogger("jobhost.audit")


class ConsoleSite(Protocol):
    """What a backfill needs of the dashboard (the actions' site, seen from here)."""

    settings: Settings
    catalog: Catalog
    store: Store
    clock: Clock | None

    def refuse(self, request: Request, why: str, status: int = 403) -> Response: ...

    def page(
        self, request: Request, template: str, status: int = 200, **values: Any
    ) -> Response: ...


async def backfill_action(
    console: ConsoleSite, request: Request, form: dict[str, str], name: str, reason: str
) -> Response:
    """Preview the backfill the form asks for, or (``confirm=yes``) record it."""
    start, end = form.get("from", "").strip()[:40], form.get("to", "").strip()[:40]
    mode = form.get("mode", "missing")
    text = form.get("concurrency", "1").strip() or "1"
    if not text.isdigit() or not 1 <= int(text) <= 1000:
        return console.refuse(request, "concurrency must be a whole number from 1 to 1000", 400)
    concurrency = int(text)
    try:
        plan = await blocking(lambda: _plan(console, name, start, end, mode))
    except BackfillInputError as error:
        return console.refuse(request, str(error), 400)
    if form.get("confirm") != "yes" or not plan.occurrences:
        return console.page(
            request,
            "backfill.html",
            job=name,
            reason=reason,
            plan=plan,
            shown=[iso_utc(o) for o in plan.occurrences[:_SHOWN]],
            start=start,
            end=end,
            concurrency=concurrency,
        )
    who, client = request.state.session.who, client_of(request)
    await blocking(
        lambda: _start(
            console, plan, concurrency=concurrency, who=who, reason=reason, client=client
        )
    )
    return RedirectResponse(f"/jobs/{name}?done=backfill-started", status_code=303)


def _plan(console: ConsoleSite, name: str, start: str, end: str, mode: str) -> BackfillPlan:
    now = console.store.now()
    return plan_backfill(
        console.catalog.jobs[name],
        console.store,
        start=start,
        end=end,
        mode=mode,
        limit=console.settings.backfill_limit,
        now=now,
    )


def _start(
    console: ConsoleSite,
    plan: BackfillPlan,
    *,
    concurrency: int,
    who: str,
    reason: str,
    client: str,
) -> None:
    store = console.store
    clock = console.clock or SystemClock(console.settings.clock_offset)
    ensure_scheduled(store, console.catalog.jobs[plan.job], clock)
    backfill_id = start_backfill(
        store,
        plan.job,
        start=plan.start,
        end=plan.end,
        mode=plan.mode,
        occurrences=plan.occurrences,
        concurrency=concurrency,
        actor=who,
        reason=reason,
        clock=clock,
    )
    result = f"backfill {backfill_id}: {len(plan.occurrences)} occurrence(s)"
    audit(action="backfill", subject=plan.job, who=who, reason=reason, client=client, result=result)
