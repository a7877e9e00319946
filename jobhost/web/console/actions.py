"""Trigger, pause and resume from the dashboard: refused unless every guard passes, audited.

Guards, in order: the request comes from the dashboard's own origin; actions are on; the person
is signed in; the form's CSRF token is the session's; a reason is given; the job (run, module)
exists. Each refusal answers 403 (400 for a missing reason, 404 for an unknown job or run, 409
for a run that cannot be retried or cancelled) and is logged. What is done goes through the
one operator-action path (:mod:`jobhost.operations.jobs`), so it is in the change log
(``job_changes``) with the operator's name and the reason like any CLI or API action, and is
logged as one JSON line (with the client's address) by the ``jobhost.audit`` logger.

A backfill shows the occurrences it would run before it is confirmed (``backfilled.py``); cancelling
one is confirmed too (``backfill_cancel.py``). A
trigger is asked once more first: its form answers with a confirmation page (the reason to
check), whose form carries ``confirm=yes``; once queued, the answer leads to the request's page,
which leads to the run as soon as a host starts it (``triggered.py``).
"""

from __future__ import annotations

import hmac
import logging
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from jobhost.catalog import Catalog
from jobhost.clock import Clock, SystemClock
from jobhost.config import Settings
from jobhost.operations.changes import BadReason, checked_reason
from jobhost.operations.jobs import pause, request_trigger, resume
from jobhost.store import Store
from jobhost.store.runtime import acting_from
from jobhost.web.app import blocking
from jobhost.web.console.audit_log import audit
from jobhost.web.console.auth import (
    BadForm,
    SessionKeeper,
    client_of,
    read_form,
    same_origin,
)
from jobhost.web.console.backfill_cancel import cancel_backfill_action
from jobhost.web.console.backfilled import backfill_action


class ConsoleSite(Protocol):
    """What the actions need of the dashboard that serves them (its pages, the Console)."""

    settings: Settings
    catalog: Catalog
    store: Store
    clock: Clock | None
    sessions: SessionKeeper
    actions_on: bool

    def refuse(self, request: Request, why: str, status: int = 403) -> Response: ...

    def actions_off_reason(self) -> str: ...

    def page(
        self, request: Request, template: str, status: int = 200, **values: Any
    ) -> Response: ...


__all__ = ["ACTIONS", "NOTICES", "ActionHandler", "Checked", "ConsoleSite", "audit", "guarded"]

ACTIONS = ("trigger", "pause", "resume", "backfill", "cancel-backfill")
NOTICES = {
    "paused": "paused",
    "already-paused": "already paused",
    "resumed": "resumed",
    "was-not-paused": "was not paused",
    "triggered": "trigger queued: a host starts the run within seconds (see its runs below)",
    "backfill-started": "backfill recorded: the hosts run it in free slots (progress below)",
    "backfill-cancelled": "backfill cancelled: no new occurrence is claimed; runs in flight finish",
    "backfill-already-over": "that backfill had already ended; nothing was changed",
}
"""What the job page says after an action, by the code in ``?done=``; other codes say nothing."""
_audit = logging.getLogger("jobhost.audit")


class ActionHandler:
    def __init__(self, console: ConsoleSite) -> None:
        self._console = console

    async def act(self, request: Request) -> Response:
        console = self._console
        name = request.path_params["name"]
        action = request.path_params["action"]
        if action not in ACTIONS:
            return console.refuse(request, f"no action {action!r}: use {', '.join(ACTIONS)}", 404)
        checked = await guarded(console, request, f"{action} a job", f"{action} {name}")
        if isinstance(checked, Response):
            return checked
        if name not in console.catalog.jobs:
            return console.refuse(request, f"no declared job {name}", 404)
        who, reason, client = checked.who, checked.reason, checked.client
        if action == "trigger" and checked.form.get("confirm") != "yes":
            # A run is not undone: the first post asks again, with the reason to check.
            return console.page(request, "trigger.html", job=name, reason=reason)
        if action == "backfill":
            return await backfill_action(console, request, checked.form, name, reason)
        if action == "cancel-backfill":
            return await cancel_backfill_action(console, request, checked.form, name, reason)
        result, asked = await blocking(lambda: self._do(action, name, who, reason, client))
        if asked is not None:
            return RedirectResponse(f"/requests/{asked}", status_code=303)
        # A fixed code, never the text: a link cannot make the page say what it likes.
        target = f"/jobs/{quote(name, safe='')}?done={result.replace(' ', '-')}"
        return RedirectResponse(target, status_code=303)

    def _do(
        self, action: str, name: str, who: str, reason: str, client: str
    ) -> tuple[str, str | None]:
        """What was done, and for a trigger the request a host picks up."""
        console = self._console
        store = console.store
        clock = console.clock or SystemClock(console.settings.clock_offset)
        result = ""
        request_id = None
        if action == "pause":
            paused = pause(store, console.catalog, name, actor=who, reason=reason, clock=clock)
            result = "paused" if paused.changed else "already paused"
        elif action == "resume":
            resumed = resume(store, name, actor=who, reason=reason, clock=clock)
            result = "resumed" if resumed is not None and resumed.changed else "was not paused"
        else:
            request_id = request_trigger(store, name, actor=who, reason=reason, clock=clock)
            result = f"trigger queued (request {request_id})"
        audit(action=action, subject=name, who=who, reason=reason, client=client, result=result)
        return result, request_id


@dataclass(frozen=True)
class Checked:
    """A form that passed every guard: who sent it, why, from where."""

    who: str
    reason: str
    client: str
    form: dict[str, str]


async def guarded(
    console: ConsoleSite, request: Request, doing: str, this: str, *, confirm: bool = False
) -> Checked | Response:
    """Every guard of an action, in order; the refusal to answer, or what passed.

    ``doing`` says what the sign-in is for, ``this`` what the reason is for; ``confirm``
    requires the form's confirmation box (for actions on runs and on many jobs)."""
    if not same_origin(request):
        return console.refuse(request, "a request from another site is refused")
    if not console.actions_on:
        return console.refuse(request, console.actions_off_reason())
    session = request.state.session
    if session is None or session.role != "operator":
        return console.refuse(request, f"sign in with an operator token to {doing}")
    try:
        form = await read_form(request)
    except BadForm as error:
        return console.refuse(request, error.why, error.status)
    if not hmac.compare_digest(form.get("csrf", ""), session.csrf):
        return console.refuse(request, "the form is stale or forged (CSRF); reload the page")
    given = form.get("reason", "")
    if not given.strip():
        return console.refuse(request, f"say why you {this}: it is audited", 400)
    try:
        reason = checked_reason(given)
    except BadReason as error:
        return console.refuse(request, f"reason: {error}", 422)
    if confirm and form.get("confirm") != "yes":
        return console.refuse(request, f"tick the confirmation box to {this}", 400)
    acting_from("dashboard", client_of(request))
    return Checked(session.who, reason, client_of(request), form)
