"""``/api/v1`` actions on runs, on many jobs, on a job's state and its backfills, each through
the one operator-action path (:mod:`jobhost.operations`) with the token's name as the actor.
Refusals are 409 with the reason and the fix; an unknown run or backfill is 404 without
repeating its id."""

from __future__ import annotations

from collections.abc import Callable
from functools import partialmethod
from typing import Any, TypeVar

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from jobhost.catalog import Catalog
from jobhost.config import ApiToken
from jobhost.operations.backfills import (
    BACKFILL_ID,
    BackfillInputError,
    backfill_json,
    cancel_backfill,
    find_backfill,
    plan_and_start,
)
from jobhost.operations.jobs import (
    KEY_LIMIT,
    ActionRefused,
    BadStateInput,
    change_state,
    jobs_matching,
    read_state,
    set_paused,
    state_json,
)
from jobhost.operations.runs import RUN_ID_LIMIT, cancel_run, retry_run
from jobhost.runtime.service import ChangeRefused, JobService, not_found
from jobhost.store import Store
from jobhost.web.api.models import BackfillRequest
from jobhost.web.api.requests import (
    field_error,
    problem,
    read_model,
    read_reason,
    read_selection,
    read_state_value,
    unknown,
)
from jobhost.web.middleware import blocking

__all__ = [
    "ActionEndpoints",
    "BackfillEndpoints",
    "ServiceEndpoints",
    "StateEndpoints",
    "require_known",
]

_T = TypeVar("_T")


class ServiceEndpoints:
    def __init__(self, service: JobService, limit: int) -> None:
        self._store = service.store
        self._service = service
        self._limit = limit


class ActionEndpoints(ServiceEndpoints):
    async def _pause_many(self, request: Request, token: ApiToken, *, paused: bool) -> Response:
        modules, patterns, reason = await read_selection(request, self._limit)

        def act() -> list[dict[str, Any]]:
            catalog = self._service.current()
            jobs = jobs_matching(catalog, modules, patterns)
            if not jobs:
                raise unknown(
                    "no job is of these modules or matches these patterns; GET /api/v1/jobs lists "
                    "the jobs and their modules"
                )
            changed = set_paused(
                self._store, catalog, jobs, paused=paused, actor=token.name, reason=reason
            )
            return [
                {"job": job, "paused": paused, "changed": did}
                for job, did in zip(jobs, changed, strict=True)
            ]

        return JSONResponse({"jobs": await blocking(act)})

    pause_many = partialmethod(_pause_many, paused=True)
    resume_many = partialmethod(_pause_many, paused=False)

    async def retry_run(self, request: Request, token: ApiToken) -> Response:
        queued, _reason = await self._on_run(request, token, retry_run)
        body = {
            "run_id": queued.run_id,
            "retry_of": queued.retry_of.id,
            "job": queued.retry_of.job_name,
            "attempt": queued.attempt,
            "outcome": "pending",
        }
        return JSONResponse(body, status_code=202)

    async def cancel_run(self, request: Request, token: ApiToken) -> Response:
        asked, reason = await self._on_run(request, token, cancel_run)
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

    async def _on_run(
        self, request: Request, token: ApiToken, action: Callable[..., _T]
    ) -> tuple[_T, str]:
        run_id = request.path_params["run_id"]
        reason = await read_reason(request, self._limit)
        if len(run_id) > RUN_ID_LIMIT:
            raise _no_run()
        store = self._store
        try:
            done = await blocking(lambda: action(store, run_id, actor=token.name, reason=reason))
        except ActionRefused as refused:
            if refused.unknown:
                raise _no_run() from None
            raise ChangeRefused(409, "Conflict", str(refused)) from None
        return done, reason


def _no_run() -> ChangeRefused:
    return unknown("no run with this id in the ledger; run ids are in GET /api/v1/jobs/{name}/runs")


class StateEndpoints(ServiceEndpoints):
    async def read(self, request: Request, _token: ApiToken) -> Response:
        name = request.path_params["name"]
        await blocking(lambda: require_known(self._service.current(name), self._store, name))
        return JSONResponse(state_json(await blocking(lambda: read_state(self._store, name))))

    async def put(self, request: Request, token: ApiToken) -> Response:
        value, reason = await read_state_value(request, self._limit)
        return await self._change(request, token, value, reason)

    async def delete(self, request: Request, token: ApiToken) -> Response:
        reason = await read_reason(request, self._limit)
        return await self._change(request, token, None, reason)

    async def _change(
        self, request: Request, token: ApiToken, value: str | None, reason: str
    ) -> Response:
        name, key = request.path_params["name"], request.path_params["key"]
        if len(key) > KEY_LIMIT:
            return problem(422, "Invalid key", f"a key is at most {KEY_LIMIT} characters")

        def act() -> Response:
            require_known(self._service.current(name), self._store, name)
            try:
                done = change_state(self._store, name, key, value, actor=token.name, reason=reason)
            except BadStateInput as bad:
                return problem(422, "Invalid key", str(bad))
            except ActionRefused as refused:
                status = 404 if refused.unknown else 409
                return problem(status, "Not found" if refused.unknown else "Conflict", str(refused))
            if value is None and done.before is None:
                raise unknown(f"job {name} has no such state key; GET its state to list them")
            body = {"job": name, "key": key, "before": done.before, "after": done.after}
            return JSONResponse({**body, "changed": done.changed})

        return await blocking(act)


def require_known(catalog: Catalog, store: Store, name: str) -> None:
    """Nothing for a job declared or known to the store; else the API's 404."""
    if name not in catalog.jobs and not store.stored_job_names([name]):
        raise not_found(name)


class BackfillEndpoints(ServiceEndpoints):
    async def start(self, request: Request, token: ApiToken) -> Response:
        name = request.path_params["name"]
        body = await read_model(request, self._limit, BackfillRequest)
        data, status = await blocking(lambda: self._start(name, body, token.name))
        return JSONResponse(data, status_code=status)

    async def show(self, request: Request, _token: ApiToken) -> Response:
        backfill_id = request.path_params["backfill_id"]
        found = await blocking(lambda: find_backfill(self._store, backfill_id))
        return JSONResponse(backfill_json(found)) if found is not None else _no_backfill()

    async def cancel(self, request: Request, token: ApiToken) -> Response:
        backfill_id = request.path_params["backfill_id"]
        if not BACKFILL_ID.fullmatch(backfill_id):
            return _no_backfill()
        reason = await read_reason(request, self._limit)
        record = await blocking(
            lambda: cancel_backfill(self._store, backfill_id, actor=token.name, reason=reason)
        )
        return JSONResponse(backfill_json(record)) if record is not None else _no_backfill()

    def _start(self, name: str, body: BackfillRequest, actor: str) -> tuple[dict[str, Any], int]:
        spec = self._service.current(name).jobs.get(name)
        if spec is None:
            raise not_found(name)
        try:
            plan, backfill_id = plan_and_start(
                self._store,
                spec,
                start=body.from_,
                end=body.to,
                mode=body.mode,
                limit=self._service.settings.backfill_limit,
                concurrency=body.concurrency,
                actor=actor,
                reason=body.reason,
                dry_run=body.dry_run,
            )
        except BackfillInputError as error:
            raise field_error(422, "Invalid backfill", "", str(error)) from None
        return {"id": backfill_id, **plan.to_json()}, 200 if backfill_id is None else 202


def _no_backfill() -> Response:
    # The id is not repeated: whatever arrives in a path is never echoed.
    return problem(
        404,
        "Not found",
        "no backfill with this id in the store; POST /api/v1/jobs/{name}/backfills answers "
        "the id of a new one",
    )
