"""``/api/v1`` operator actions on runs and on many jobs: ``POST /runs/{id}/retry``,
``/runs/{id}/cancel`` (scope trigger), ``POST /pause`` and ``/resume`` (scope write).

Each goes through the one operator-action path (:mod:`jobhost.operations.jobs`), with the
API token's name as the actor; refusals are 409 with the reason and the fix, an unknown run
404 without repeating its id.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from jobhost.config import ApiToken
from jobhost.operations.jobs import ActionRefused, jobs_matching, pause_jobs, resume_jobs
from jobhost.operations.runs import RUN_ID_LIMIT, cancel_run, retry_run
from jobhost.runtime.service import JobService
from jobhost.web.api.problems import problem
from jobhost.web.api.requests import read_reason, read_selection
from jobhost.web.app import blocking

__all__ = ["ActionEndpoints"]


class ActionEndpoints:
    """The handlers (rows ``actions.*`` of :data:`~jobhost.web.api.table.ENDPOINTS`), on the
    API's job service (catalog, store, clock)."""

    def __init__(self, service: JobService, limit: int) -> None:
        self._store = service.store
        self._service = service
        self._clock = service.clock
        self._limit = limit

    async def pause_many(self, request: Request, token: ApiToken) -> Response:
        return await self._pause_many(request, token, paused=True)

    async def resume_many(self, request: Request, token: ApiToken) -> Response:
        return await self._pause_many(request, token, paused=False)

    async def _pause_many(self, request: Request, token: ApiToken, *, paused: bool) -> Response:
        modules, patterns, reason = await read_selection(request, self._limit)

        def act() -> list[dict[str, Any]]:
            catalog = self._service.current()
            jobs = jobs_matching(catalog, modules, patterns)
            if not jobs:
                return []
            clock, who = self._clock, token.name
            if paused:
                done = pause_jobs(self._store, catalog, jobs, actor=who, reason=reason, clock=clock)
                changed = [d.changed for d in done]
            else:
                again = resume_jobs(self._store, jobs, actor=who, reason=reason, clock=clock)
                changed = [d is not None and d.changed for d in again]
            return [
                {"job": job, "paused": paused, "changed": did}
                for job, did in zip(jobs, changed, strict=True)
            ]

        acted = await blocking(act)
        if not acted:
            return problem(
                404,
                "Not found",
                "no job is of these modules or matches these patterns; GET /api/v1/jobs lists "
                "the jobs and their modules",
            )
        return JSONResponse({"jobs": acted})

    async def retry_run(self, request: Request, token: ApiToken) -> Response:
        run_id = request.path_params["run_id"]
        reason = await read_reason(request, self._limit)
        if len(run_id) > RUN_ID_LIMIT:
            return _no_run()
        try:
            queued = await blocking(
                lambda: retry_run(
                    self._store, run_id, actor=token.name, reason=reason, clock=self._clock
                )
            )
        except ActionRefused as refused:
            return _no_run() if refused.unknown else problem(409, "Conflict", str(refused))
        body = {
            "run_id": queued.run_id,
            "retry_of": queued.retry_of.id,
            "job": queued.retry_of.job_name,
            "attempt": queued.attempt,
            "outcome": "pending",
        }
        return JSONResponse(body, status_code=202)

    async def cancel_run(self, request: Request, token: ApiToken) -> Response:
        run_id = request.path_params["run_id"]
        reason = await read_reason(request, self._limit)
        if len(run_id) > RUN_ID_LIMIT:
            return _no_run()
        try:
            asked = await blocking(
                lambda: cancel_run(
                    self._store, run_id, actor=token.name, reason=reason, clock=self._clock
                )
            )
        except ActionRefused as refused:
            return _no_run() if refused.unknown else problem(409, "Conflict", str(refused))
        run = asked.run
        first = asked.state != "already"
        body = {
            "run_id": run.id,
            "job": run.job_name,
            "host": run.host_id,
            "requested": asked.state,
            "cancelled_by": token.name if first else run.cancel_requested_by,
            "reason": reason if first else run.cancel_reason,
        }
        return JSONResponse(body, status_code=202)


def _no_run() -> Response:
    # The id is not repeated: whatever arrives in a path is never echoed.
    return problem(
        404,
        "Not found",
        "no run with this id in the ledger; run ids are in GET /api/v1/jobs/{name}/runs",
    )
