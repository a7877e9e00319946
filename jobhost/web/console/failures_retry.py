""" "Retry the N shown" on the Failures page: one retry of each open failure the page listed.

The page's form posts the run ids it shows; the first post answers with a confirmation page
that lists them (job, outcome, finish, error) with the reason to check, whose form carries
``confirm=yes``, as a trigger is confirmed. Each retry then goes through the one
operator-action path (:func:`retry_run`, one change-log entry per run, the operator's name and
reason), queued for the hosts; a run that cannot be retried any more (retried meanwhile,
succeeded) is counted, not an error for the others.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from jobhost.clock import SystemClock
from jobhost.operations.jobs import ActionRefused
from jobhost.operations.runs import retry_run
from jobhost.records import RunRecord
from jobhost.web.app import blocking
from jobhost.web.console.actions import Checked, ConsoleSite, audit, guarded
from jobhost.web.console.failures_page import FAILURES_PAGE

__all__ = ["RETRY_NOTICE", "retry_notice", "retry_shown"]

RETRY_NOTICE = "retries queued: {queued} (one change-log entry each); not retried: {refused}"
"""What the Failures page says after a bulk retry (``?done=retried&n=..&r=..``)."""

_RUN_ID = re.compile(r"[A-Za-z0-9_.:-]{1,64}")
_COUNT = re.compile(r"\d{1,3}")


def retry_notice(params: Mapping[str, str]) -> str | None:
    """The notice for ``?done=retried&n=..&r=..``; only counts reach the text."""
    queued, refused = params.get("n", ""), params.get("r", "")
    if params.get("done") != "retried" or not (
        _COUNT.fullmatch(queued) and _COUNT.fullmatch(refused)
    ):
        return None
    return RETRY_NOTICE.format(queued=int(queued), refused=int(refused))


async def retry_shown(console: ConsoleSite, request: Request) -> Response:
    """``POST /failures/retry``: confirm, then retry each run of the form's ``runs``."""
    checked = await guarded(console, request, "retry failures", "retry these failures")
    if isinstance(checked, Response):
        return checked
    ids = [i for i in checked.form.get("runs", "").split(",") if i]
    if not ids or len(ids) > FAILURES_PAGE or not all(_RUN_ID.fullmatch(i) for i in ids):
        return console.refuse(request, f"name 1 to {FAILURES_PAGE} failed runs to retry", 400)
    if checked.form.get("confirm") != "yes":
        found = await blocking(lambda: console.store.runs_by_id(ids))
        return console.page(
            request,
            "failures_retry.html",
            runs=found,
            ids=",".join(run.id for run in found),
            reason=checked.reason,
        )
    queued, refused = await blocking(lambda: _retry(console, ids, checked))
    return RedirectResponse(f"/failures?done=retried&n={queued}&r={refused}", status_code=303)


def _retry(console: ConsoleSite, ids: list[str], checked: Checked) -> tuple[int, int]:
    clock = console.clock or SystemClock(console.settings.clock_offset)
    queued: list[RunRecord] = []
    for run_id in ids:
        try:
            done = retry_run(
                console.store, run_id, actor=checked.who, reason=checked.reason, clock=clock
            )
        except ActionRefused:
            continue
        queued.append(done.retry_of)
    audit(
        action="retry",
        subject=", ".join(sorted({run.job_name for run in queued})) or "no job",
        who=checked.who,
        reason=checked.reason,
        client=checked.client,
        result=f"{len(queued)} of {len(ids)} failed runs retried",
    )
    return len(queued), len(ids) - len(queued)
