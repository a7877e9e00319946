"""Trigger, pause and resume from the dashboard: refused unless every guard passes, audited.

Guards, in order: the request comes from the dashboard's own origin; actions are on; the person
is signed in; the form's CSRF token is the session's; a reason is given; the job exists. Each
refusal answers 403 (400 for a missing reason, 404 for an unknown job) and is logged. What is
done is written to ``console_actions`` (who, what, which job, why, from where, and the result)
and logged as one JSON line by the ``jobhost.audit`` logger.

A backfill shows the occurrences it would run before it is confirmed (``backfilled.py``). A
trigger is asked once more first: its form answers with a confirmation page (the reason to
check), whose form carries ``confirm=yes``; once queued, the answer leads to the request's page,
which leads to the run as soon as a host starts it (``triggered.py``).
"""

from __future__ import annotations

import hmac
import json
import logging
from typing import Any, Protocol
from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from jobhost.catalog import Catalog
from jobhost.config import Settings
from jobhost.operations.actions import pause, request_trigger, resume
from jobhost.operations.timefmt import iso_utc
from jobhost.store import Clock, Engine, SystemClock
from jobhost.store.console import log_action
from jobhost.web.app import blocking
from jobhost.web.console.auth import (
    BadForm,
    SessionKeeper,
    client_of,
    read_form,
    same_origin,
)
from jobhost.web.console.backfilled import backfill_action


class ConsoleSite(Protocol):
    """What the actions need of the dashboard that serves them (its pages, the Console)."""

    settings: Settings
    catalog: Catalog
    engine: Engine
    clock: Clock | None
    sessions: SessionKeeper
    actions_on: bool

    def refuse(self, request: Request, why: str, status: int = 403) -> Response: ...

    def actions_off_reason(self) -> str: ...

    def page(
        self, request: Request, template: str, status: int = 200, **values: Any
    ) -> Response: ...


__all__ = ["ACTIONS", "NOTICES", "ActionHandler", "ConsoleSite"]

ACTIONS = ("trigger", "pause", "resume", "backfill")
NOTICES = {
    "paused": "paused",
    "already-paused": "already paused",
    "resumed": "resumed",
    "was-not-paused": "was not paused",
    "triggered": "trigger queued: a host starts the run within seconds (see its runs below)",
    "backfill-started": "backfill recorded: the hosts run it in free slots (progress below)",
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
        if not same_origin(request):
            return console.refuse(request, "a request from another site is refused")
        if not console.actions_on:
            return console.refuse(request, console.actions_off_reason())
        session = request.state.session
        if session is None or session.role != "operator":
            return console.refuse(request, f"sign in with an operator token to {action} a job")
        try:
            form = await read_form(request)
        except BadForm as error:
            return console.refuse(request, error.why, error.status)
        if not hmac.compare_digest(form.get("csrf", ""), session.csrf):
            return console.refuse(request, "the form is stale or forged (CSRF); reload the page")
        reason = " ".join(form.get("reason", "").split())[:500]
        if not reason:
            return console.refuse(request, f"say why you {action} {name}: it is audited", 400)
        if name not in console.catalog.jobs:
            return console.refuse(request, f"no declared job {name}", 404)
        if action == "trigger" and form.get("confirm") != "yes":
            # A run is not undone: the first post asks again, with the reason to check.
            return console.page(request, "trigger.html", job=name, reason=reason)
        if action == "backfill":
            return await backfill_action(console, request, form, name, reason)
        client = client_of(request)
        result, asked = await blocking(lambda: self._do(action, name, session.who, reason, client))
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
        engine = console.engine
        clock = console.clock or SystemClock(console.settings.clock_offset)
        result = ""
        request_id = None
        if action == "pause":
            paused = pause(engine, console.catalog, name, actor=who, reason=reason, clock=clock)
            result = "paused" if paused.changed else "already paused"
        elif action == "resume":
            resumed = resume(engine, name, actor=who, reason=reason, clock=clock)
            result = "resumed" if resumed is not None and resumed.changed else "was not paused"
        else:
            request_id = request_trigger(engine, name, actor=who, reason=reason, clock=clock)
            result = f"trigger queued (request {request_id})"
        done = log_action(
            engine,
            clock=clock,
            actor=who,
            action=action,
            job_name=name,
            reason=reason,
            client=client,
            result=result,
        )
        _audit.info(
            "%s",
            json.dumps(
                {
                    "event": "console.action",
                    "id": done.id,
                    "at": iso_utc(done.at),
                    "actor": who,
                    "action": action,
                    "job_name": name,
                    "reason": reason,
                    "client": client,
                    "result": result,
                },
                sort_keys=True,
            ),
        )
        return result, request_id
