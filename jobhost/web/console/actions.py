"""What people do from the dashboard: refused (and logged) unless every guard passes, done
through the one operator-action path (:mod:`jobhost.operations`), so in the change log like any
CLI or API action, and logged with the client's address by the ``jobhost.audit`` logger. What
is not undone is asked once more first (a page whose form carries ``confirm=yes``, or for a run
or a whole module the form's confirmation box).
"""

from __future__ import annotations

import hmac
import json
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from jobhost.catalog import Catalog
from jobhost.config import Settings
from jobhost.operations.backfills import (
    BackfillInputError,
    cancel_backfill,
    find_backfill,
    plan_and_start,
)
from jobhost.operations.changes import BadReason, checked_reason
from jobhost.operations.jobs import ActionRefused, request_trigger, set_paused
from jobhost.operations.runs import RUN_ID_LIMIT, cancel_run, retry_run
from jobhost.operations.timefmt import iso_utc
from jobhost.records import RunRecord
from jobhost.store import Store
from jobhost.store.runtime import acting_from
from jobhost.web.access import client_address
from jobhost.web.console.auth import BadForm, SessionKeeper, read_form, same_origin
from jobhost.web.console.views import FAILURES_PAGE
from jobhost.web.middleware import blocking, loggable

__all__ = ["BULK_NOTICES", "NOTICES", "RUN_NOTICES", "ConsoleActions", "retry_notice"]

# What the job, run and overview pages say after an action, by the code in ``?done=``.
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
RUN_NOTICES = {
    "retried": "retry queued: this is the new attempt; a host starts it within seconds",
    "cancel-requested": "cancel asked: the run's host cancels it within seconds",
    "cancel-already": "a cancel was asked for already; it stands",
    "cancelled": "cancelled before it started",
}
BULK_NOTICES = {
    "module-paused": "module paused: every job of it, one change-log entry each",
    "module-resumed": "module resumed: every job of it, one change-log entry each",
}
_REQUEST_ID_CHARS = frozenset("0123456789abcdef")

_JOB_ACTIONS = ("trigger", "pause", "resume", "backfill", "cancel-backfill")
_SHOWN = 200
"""Occurrences listed on a backfill's preview; the count says the rest."""
_RUN_ID = re.compile(r"[A-Za-z0-9_.:-]{1,64}")
_COUNT = re.compile(r"\d{1,3}")
_WAIT_SECONDS = 2
_audit = logging.getLogger("jobhost.audit")
_log = logging.getLogger("jobhost.console")


@dataclass(frozen=True)
class _Checked:
    who: str
    reason: str
    client: str
    form: dict[str, str]


class ConsoleActions:
    settings: Settings
    catalog: Catalog
    store: Store
    sessions: SessionKeeper
    actions_on: bool

    def page(self, request: Request, template: str, status: int = 200, **values: Any) -> Response:
        raise NotImplementedError

    def actions_off_reason(self) -> str:
        if not self.settings.console_actions:
            return "actions are off: this dashboard is read-only (console_actions = false)"
        if not self.sessions.enabled:
            return "actions are off: no operator_tokens are configured"
        return "actions are off here: `jobhost serve` is read-only; use a host's dashboard"

    def refuse(self, request: Request, why: str, status: int = 403) -> Response:
        _log.warning(
            "dashboard refused %s %s from %s: %s",
            request.method,
            loggable(request.url.path),
            client_address(request),
            loggable(why, 500),
        )
        return self.page(request, "refused.html", status=status, why=why)

    async def job_action(self, request: Request) -> Response:
        """``POST /jobs/{name}/trigger|pause|resume|backfill|cancel-backfill``."""
        name = request.path_params["name"]
        action = request.path_params["action"]
        if action not in _JOB_ACTIONS:
            return self.refuse(request, f"no action {action!r}: use {', '.join(_JOB_ACTIONS)}", 404)
        checked = await self._guarded(request, f"{action} a job", f"{action} {name}")
        if isinstance(checked, Response):
            return checked
        if name not in self.catalog.jobs:
            return self.refuse(request, f"no declared job {name}", 404)
        if action == "trigger" and checked.form.get("confirm") != "yes":
            # A run is not undone: the first post asks again, with the reason to check.
            return self.page(request, "trigger.html", job=name, reason=checked.reason)
        if action == "backfill":
            return await self._backfill(request, checked, name)
        if action == "cancel-backfill":
            return await self._cancel_backfill(request, checked, name)
        return _see(await blocking(lambda: self._act_on_job(action, name, checked)))

    async def run_action(self, request: Request) -> Response:
        """``POST /runs/{run_id}/retry|cancel``."""
        run_id = request.path_params["run_id"]
        action = request.path_params["action"]
        if action not in ("retry", "cancel"):
            return self.refuse(request, "no such action: use retry or cancel", 404)
        if len(run_id) > RUN_ID_LIMIT:
            return self.refuse(request, "no run with this id", 404)
        checked = await self._guarded(
            request, f"{action} a run", f"{action} this run", confirm=True
        )
        if isinstance(checked, Response):
            return checked
        try:
            target = await blocking(lambda: self._act_on_run(action, run_id, checked))
        except ActionRefused as refused:
            if refused.unknown:
                return self.refuse(request, "no run with this id", 404)
            return self.refuse(request, str(refused), 409)
        return _see(target)

    async def module_action(self, request: Request) -> Response:
        """``POST /modules/{module}/pause|resume``: every job the module declares."""
        module = request.path_params["module"]
        action = request.path_params["action"]
        if action not in ("pause", "resume"):
            return self.refuse(request, "no such action: use pause or resume", 404)
        checked = await self._guarded(
            request, f"{action} a module", f"{action} a module", confirm=True
        )
        if isinstance(checked, Response):
            return checked
        jobs = sorted(n for n, s in self.catalog.jobs.items() if s.module == module)
        if not jobs:
            return self.refuse(request, "no declared job has this module", 404)
        changed = await blocking(lambda: self._pause_or_resume(action, jobs, checked))
        _audit_line(checked, action, f"module {module}", f"{action}d {changed} of {len(jobs)} jobs")
        return _see(f"/?module={quote(module, safe='')}&done=module-{action}d")

    async def retry_failures(self, request: Request) -> Response:
        """``POST /failures/retry``: confirm, then retry each run of the form's ``runs``."""
        checked = await self._guarded(request, "retry failures", "retry these failures")
        if isinstance(checked, Response):
            return checked
        ids = [i for i in checked.form.get("runs", "").split(",") if i]
        if not ids or len(ids) > FAILURES_PAGE or not all(_RUN_ID.fullmatch(i) for i in ids):
            return self.refuse(request, f"name 1 to {FAILURES_PAGE} failed runs to retry", 400)
        if checked.form.get("confirm") != "yes":
            pages = await blocking(lambda: self.store.run_pages(ids))
            found = [page.run for page in pages.values()]
            return self.page(
                request,
                "failures_retry.html",
                runs=found,
                ids=",".join(run.id for run in found),
                reason=checked.reason,
            )
        queued, refused = await blocking(lambda: self._retry_each(ids, checked))
        return _see(f"/failures?done=retried&n={queued}&r={refused}")

    async def request_page(self, request: Request) -> Response:
        """Where a trigger's request stands until a host starts (303 to its run) or refuses it."""
        request_id = request.path_params["request_id"]
        found: RunRecord | None = None
        if 0 < len(request_id) <= 64 and set(request_id) <= _REQUEST_ID_CHARS:
            page = await blocking(lambda: self.store.run_pages([request_id]).get(request_id))
            found = page.run if page is not None else None
        if found is None:
            return self.page(request, "missing.html", status=404, what="such trigger request")
        if found.request_status in {"started", "queued"}:
            return _see(f"/runs/{found.id}")
        waiting = found.request_status != "refused"
        live = _WAIT_SECONDS if waiting else 0
        return self.page(request, "request.html", asked=found, waiting=waiting, live=live)

    async def _guarded(
        self, request: Request, doing: str, this: str, *, confirm: bool = False
    ) -> _Checked | Response:
        """Every guard of an action, in order: the dashboard's own origin, actions on, an
        operator signed in, the session's CSRF token, a reason (for ``this``), and with
        ``confirm`` the form's confirmation box. The refusal, or what passed."""
        if not same_origin(request):
            return self.refuse(request, "a request from another site is refused")
        if not self.actions_on:
            return self.refuse(request, self.actions_off_reason())
        session = request.state.session
        if session is None or session.role != "operator":
            return self.refuse(request, f"sign in with an operator token to {doing}")
        try:
            form = await read_form(request)
        except BadForm as error:
            return self.refuse(request, str(error), error.status)
        if not hmac.compare_digest(form.get("csrf", ""), session.csrf):
            return self.refuse(request, "the form is stale or forged (CSRF); reload the page")
        given = form.get("reason", "")
        if not given.strip():
            return self.refuse(request, f"say why you {this}: it is audited", 400)
        try:
            reason = checked_reason(given)
        except BadReason as error:
            return self.refuse(request, f"reason: {error}", 422)
        if confirm and form.get("confirm") != "yes":
            return self.refuse(request, f"tick the confirmation box to {this}", 400)
        acting_from("dashboard", client_address(request))
        return _Checked(session.who, reason, client_address(request), form)

    def _act_on_job(self, action: str, name: str, checked: _Checked) -> str:
        """Where to go once done: for a trigger, the request a host picks up."""
        if action == "trigger":
            request_id = request_trigger(self.store, name, actor=checked.who, reason=checked.reason)
            _audit_line(checked, action, name, f"trigger queued (request {request_id})")
            return f"/requests/{request_id}"
        if self._pause_or_resume(action, [name], checked):
            result = "paused" if action == "pause" else "resumed"
        else:
            result = "already paused" if action == "pause" else "was not paused"
        _audit_line(checked, action, name, result)
        # A fixed code, never the text: a link cannot make the page say what it likes.
        return f"/jobs/{quote(name, safe='')}?done={result.replace(' ', '-')}"

    def _act_on_run(self, action: str, run_id: str, checked: _Checked) -> str:
        """Where to go once done."""
        store, who, reason = self.store, checked.who, checked.reason
        if action == "retry":
            queued = retry_run(store, run_id, actor=who, reason=reason)
            result = f"retry of run {run_id} queued as run {queued.run_id}"
            _audit_line(checked, "retry", queued.retry_of.job_name, result)
            # To the new attempt: the operator watches it start there.
            return f"/runs/{queued.run_id}?done=retried"
        asked = cancel_run(store, run_id, actor=who, reason=reason)
        _audit_line(checked, "cancel", asked.run.job_name, f"cancel of run {run_id}: {asked.state}")
        code = {"requested": "cancel-requested", "already": "cancel-already"}.get(
            asked.state, "cancelled"
        )
        return f"/runs/{run_id}?done={code}"

    def _pause_or_resume(self, action: str, jobs: list[str], checked: _Checked) -> int:
        """How many of ``jobs`` it changed."""
        paused, who, reason = action == "pause", checked.who, checked.reason
        return sum(
            set_paused(self.store, self.catalog, jobs, paused=paused, actor=who, reason=reason)
        )

    def _retry_each(self, ids: list[str], checked: _Checked) -> tuple[int, int]:
        """How many runs were queued again, and how many could not be."""
        store = self.store
        queued: list[RunRecord] = []
        for run_id in ids:
            try:
                done = retry_run(store, run_id, actor=checked.who, reason=checked.reason)
            except ActionRefused:
                continue
            queued.append(done.retry_of)
        subject = ", ".join(sorted({run.job_name for run in queued})) or "no job"
        _audit_line(checked, "retry", subject, f"{len(queued)} of {len(ids)} failed runs retried")
        return len(queued), len(ids) - len(queued)

    async def _backfill(self, request: Request, checked: _Checked, name: str) -> Response:
        form = checked.form
        start, end = form.get("from", "").strip()[:40], form.get("to", "").strip()[:40]
        mode = form.get("mode", "missing")
        text = form.get("concurrency", "1").strip() or "1"
        if not text.isdigit() or not 1 <= int(text) <= 1000:
            return self.refuse(request, "concurrency must be a whole number from 1 to 1000", 400)
        concurrency = int(text)
        spec, limit = self.catalog.jobs[name], self.settings.backfill_limit
        try:
            planned, backfill_id = await blocking(
                lambda: plan_and_start(
                    self.store,
                    spec,
                    start=start,
                    end=end,
                    mode=mode,
                    limit=limit,
                    concurrency=concurrency,
                    actor=checked.who,
                    reason=checked.reason,
                    dry_run=form.get("confirm") != "yes",
                )
            )
        except BackfillInputError as error:
            return self.refuse(request, str(error), 400)
        if backfill_id is None:
            return self.page(
                request,
                "backfill.html",
                job=name,
                reason=checked.reason,
                plan=planned,
                shown=[iso_utc(o) for o in planned.occurrences[:_SHOWN]],
                start=start,
                end=end,
                concurrency=concurrency,
            )
        result = f"backfill {backfill_id}: {len(planned.occurrences)} occurrence(s)"
        _audit_line(checked, "backfill", name, result)
        return _see(f"/jobs/{name}?done=backfill-started")

    async def _cancel_backfill(self, request: Request, checked: _Checked, name: str) -> Response:
        store = self.store
        backfill_id = checked.form.get("backfill", "").strip()
        record = await blocking(lambda: find_backfill(store, backfill_id))
        if record is None or record.job_name != name:
            return self.refuse(request, f"job {name} has no such backfill", 404)
        if checked.form.get("confirm") != "yes":
            return self.page(
                request, "backfill_cancel.html", job=name, reason=checked.reason, b=record
            )
        after = await blocking(
            lambda: cancel_backfill(store, backfill_id, actor=checked.who, reason=checked.reason)
        )
        cancelled = after is not None and record.state == "running" and after.state == "cancelled"
        result = f"backfill {backfill_id} " + ("cancelled" if cancelled else "already over")
        _audit_line(checked, "backfill-cancel", name, result)
        done = "backfill-cancelled" if cancelled else "backfill-already-over"
        return _see(f"/jobs/{quote(name, safe='')}?done={done}")


def retry_notice(params: Mapping[str, str]) -> str | None:
    """The notice for ``?done=retried&n=..&r=..``: only counts reach the text."""
    queued, refused = params.get("n", ""), params.get("r", "")
    if params.get("done") != "retried" or not (
        _COUNT.fullmatch(queued) and _COUNT.fullmatch(refused)
    ):
        return None
    return f"retries queued: {int(queued)} (one change-log entry each); not retried: {int(refused)}"


def _audit_line(checked: _Checked, action: str, subject: str, result: str) -> None:
    """The change log holds the action itself; this line adds the client's address."""
    line = {
        "event": "console.action",
        "at": iso_utc(datetime.now(UTC)),
        "actor": checked.who,
        "action": action,
        "job_name": subject,
        "reason": checked.reason,
        "client": checked.client,
        "result": result,
    }
    _audit.info("%s", json.dumps(line, sort_keys=True))


def _see(target: str) -> Response:
    return RedirectResponse(target, status_code=303)
