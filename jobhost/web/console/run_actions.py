"""Retry or cancel one run, and pause or resume a whole module, from the dashboard.

The same guards as the job buttons (:func:`guarded`), plus the form's confirmation box; the
same operator-action path as ``jobhost retry|cancel|pause|resume``, so each is in the change
log with the operator's name and the reason.
"""

from __future__ import annotations

from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from jobhost.clock import SystemClock
from jobhost.operations.jobs import ActionRefused, pause_jobs, resume_jobs
from jobhost.operations.runs import RUN_ID_LIMIT, cancel_run, retry_run
from jobhost.web.app import blocking
from jobhost.web.console.actions import Checked, ConsoleSite, audit, guarded

__all__ = ["BULK_NOTICES", "RUN_NOTICES", "RunActionHandler"]

RUN_NOTICES = {
    "retried": "retry queued: this is the new attempt; a host starts it within seconds",
    "cancel-requested": "cancel asked: the run's host cancels it within seconds",
    "cancel-already": "a cancel was asked for already; it stands",
    "cancelled": "cancelled before it started",
}
"""What the run page says after an action, by the code in ``?done=``."""
BULK_NOTICES = {
    "module-paused": "module paused: every job of it, one change-log entry each",
    "module-resumed": "module resumed: every job of it, one change-log entry each",
}
"""What the overview says after a module action, by the code in ``?done=``."""
_RUN_ACTIONS = ("retry", "cancel")
_BULK_ACTIONS = ("pause", "resume")


class RunActionHandler:
    def __init__(self, console: ConsoleSite) -> None:
        self._console = console

    async def act(self, request: Request) -> Response:
        """``POST /runs/{run_id}/retry|cancel``."""
        console = self._console
        run_id = request.path_params["run_id"]
        action = request.path_params["action"]
        if action not in _RUN_ACTIONS:
            return console.refuse(request, "no such action: use retry or cancel", 404)
        if len(run_id) > RUN_ID_LIMIT:
            return console.refuse(request, "no run with this id", 404)
        checked = await guarded(
            console, request, f"{action} a run", f"{action} this run", confirm=True
        )
        if isinstance(checked, Response):
            return checked
        try:
            target = await blocking(lambda: self._run_action(action, run_id, checked))
        except ActionRefused as refused:
            if refused.unknown:
                return console.refuse(request, "no run with this id", 404)
            return console.refuse(request, str(refused), 409)
        return RedirectResponse(target, status_code=303)

    async def bulk(self, request: Request) -> Response:
        """``POST /modules/{module}/pause|resume``: every job the module declares."""
        console = self._console
        module = request.path_params["module"]
        action = request.path_params["action"]
        if action not in _BULK_ACTIONS:
            return console.refuse(request, "no such action: use pause or resume", 404)
        checked = await guarded(
            console, request, f"{action} a module", f"{action} a module", confirm=True
        )
        if isinstance(checked, Response):
            return checked
        jobs = sorted(n for n, s in console.catalog.jobs.items() if s.module == module)
        if not jobs:
            return console.refuse(request, "no declared job has this module", 404)
        await blocking(lambda: self._bulk_action(action, module, jobs, checked))
        return RedirectResponse(
            f"/?module={quote(module, safe='')}&done=module-{action}d", status_code=303
        )

    def _run_action(self, action: str, run_id: str, checked: Checked) -> str:
        console = self._console
        clock = console.clock or SystemClock(console.settings.clock_offset)
        who, reason = checked.who, checked.reason
        if action == "retry":
            queued = retry_run(console.store, run_id, actor=who, reason=reason, clock=clock)
            audit(
                action="retry",
                subject=queued.retry_of.job_name,
                who=who,
                reason=reason,
                client=checked.client,
                result=f"retry of run {run_id} queued as run {queued.run_id}",
            )
            # To the new attempt: the operator watches it start there.
            return f"/runs/{queued.run_id}?done=retried"
        asked = cancel_run(console.store, run_id, actor=who, reason=reason, clock=clock)
        audit(
            action="cancel",
            subject=asked.run.job_name,
            who=who,
            reason=reason,
            client=checked.client,
            result=f"cancel of run {run_id}: {asked.state}",
        )
        code = {"requested": "cancel-requested", "already": "cancel-already"}.get(
            asked.state, "cancelled"
        )
        return f"/runs/{run_id}?done={code}"

    def _bulk_action(self, action: str, module: str, jobs: list[str], checked: Checked) -> None:
        console = self._console
        clock = console.clock or SystemClock(console.settings.clock_offset)
        who, reason = checked.who, checked.reason
        if action == "pause":
            done = pause_jobs(
                console.store, console.catalog, jobs, actor=who, reason=reason, clock=clock
            )
            changed = sum(1 for d in done if d.changed)
        else:
            again = resume_jobs(console.store, jobs, actor=who, reason=reason, clock=clock)
            changed = sum(1 for d in again if d is not None and d.changed)
        audit(
            action=action,
            subject=f"module {module}",
            who=who,
            reason=reason,
            client=checked.client,
            result=f"{action}d {changed} of {len(jobs)} jobs",
        )
