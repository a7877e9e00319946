"""Cancelling a running backfill from the job page: confirmed first, then audited.

The first post (no ``confirm``) answers a confirmation page naming the backfill and its progress,
with the reason to check; the confirmed post stops it through the one operator-action path (as
``DELETE /api/v1/backfills/{id}`` and ``jobhost backfill --cancel`` do), so the change log holds
the operator's name and reason. Its runs in flight finish; no new occurrence is claimed. An id
that is not one of this job's backfills answers 404.
"""

from __future__ import annotations

import re
from typing import Any, Protocol
from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from jobhost.clock import Clock, SystemClock
from jobhost.config import Settings
from jobhost.operations.backfills import cancel_backfill
from jobhost.store import Store
from jobhost.web.app import blocking
from jobhost.web.console.audit_log import audit
from jobhost.web.console.auth import client_of

__all__ = ["cancel_backfill_action"]

_ID = re.compile(r"[0-9a-f]{32}")


class ConsoleSite(Protocol):
    """What a cancel needs of the dashboard (the actions' site, seen from here)."""

    settings: Settings
    store: Store
    clock: Clock | None

    def refuse(self, request: Request, why: str, status: int = 403) -> Response: ...

    def page(
        self, request: Request, template: str, status: int = 200, **values: Any
    ) -> Response: ...


async def cancel_backfill_action(
    console: ConsoleSite, request: Request, form: dict[str, str], name: str, reason: str
) -> Response:
    """Ask to confirm cancelling the form's backfill of job ``name``, or (``confirm=yes``) do."""
    backfill_id = form.get("backfill", "").strip()
    record = None
    if _ID.fullmatch(backfill_id):
        record = await blocking(lambda: console.store.get_backfill(backfill_id))
    if record is None or record.job_name != name:
        return console.refuse(request, f"job {name} has no such backfill", 404)
    if form.get("confirm") != "yes":
        return console.page(request, "backfill_cancel.html", job=name, reason=reason, b=record)
    who, client = request.state.session.who, client_of(request)
    clock = console.clock or SystemClock(console.settings.clock_offset)
    after = await blocking(
        lambda: cancel_backfill(console.store, backfill_id, actor=who, reason=reason, clock=clock)
    )
    cancelled = after is not None and record.state == "running" and after.state == "cancelled"
    result = f"backfill {backfill_id} " + ("cancelled" if cancelled else "already over")
    audit(
        action="backfill-cancel", subject=name, who=who, reason=reason, client=client, result=result
    )
    done = "backfill-cancelled" if cancelled else "backfill-already-over"
    return RedirectResponse(f"/jobs/{quote(name, safe='')}?done={done}", status_code=303)
