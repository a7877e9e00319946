"""``GET /api/v1/failures``: open failures of every job (``all=true``: every failure), a page
at a time, newest first; what ``jobhost failures --json`` prints. ``POST /api/v1/failures``:
one retry of every open failure of a job, a module or since a time, what ``jobhost retry
--failed`` does."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from jobhost.config import ApiToken
from jobhost.errors import UnknownJobError
from jobhost.operations.failure_actions import jobs_of_module
from jobhost.operations.failure_actions import retry_failures as retry_open_failures
from jobhost.operations.failures import (
    SEARCH_LIMIT,
    BadFailureQuery,
    FailureQuery,
    decode_cursor,
    failures_json,
    parse_since,
    read_failures,
    require_stored_job,
)
from jobhost.runtime.definition import FieldProblem
from jobhost.store import Clock, Engine, SystemClock
from jobhost.web.api.requests import BadRequest, ReasonText, query_flag, query_int, read_json
from jobhost.web.app import blocking

__all__ = ["PAGE_LIMIT", "FailureRetry", "failures_endpoint", "retry_failures_endpoint"]

PAGE_LIMIT = 500
"""The most rows one answer holds."""

_JOB_LIMIT = 200


class FailureRetry(BaseModel):
    """Which open failures to retry, once each, and why (``POST /failures``)."""

    model_config = ConfigDict(extra="forbid")
    job: str | None = Field(None, min_length=1, max_length=200, description="Only this job's.")
    module: str | None = Field(
        None, min_length=1, max_length=200, description="Only failures of this module's jobs."
    )
    since: str | None = Field(
        None,
        min_length=1,
        max_length=64,
        description="Only failures since then: 2h, 7d, a date (UTC) or an ISO 8601 time.",
    )
    reason: ReasonText


def failures_endpoint(
    engine: Engine, clock: Clock | None
) -> Callable[[Request, ApiToken], Awaitable[Response]]:
    """The handler: parameters ``since``, ``job``, ``q``, ``limit`` and ``cursor``."""

    async def failures(request: Request, _token: ApiToken) -> Response:
        params = request.query_params
        limit = query_int(request, "limit", 50, 1, PAGE_LIMIT)
        everything = query_flag(request, "all")
        job = params.get("job")
        if job is not None and not 0 < len(job) <= _JOB_LIMIT:
            raise _bad("job", f"must be a job name of 1 to {_JOB_LIMIT} characters")
        text = params.get("q")
        if text is not None:
            text = text.strip() or None
            if text is not None and len(text) > SEARCH_LIMIT:
                raise _bad("q", f"must be at most {SEARCH_LIMIT} characters")
        try:
            cursor = decode_cursor(params["cursor"]) if "cursor" in params else None
            since = params.get("since")
            start = parse_since(since, (clock or SystemClock())()) if since else None
        except BadFailureQuery as error:
            raise _bad(error.field, error.detail) from None

        def read() -> dict[str, Any]:
            if job is not None:
                try:
                    require_stored_job(engine, job)
                except UnknownJobError:
                    # The name is the caller's text: it is not repeated.
                    raise _bad(
                        "job", "names no job the store knows; GET /api/v1/jobs lists them"
                    ) from None
            query = FailureQuery(
                since=start,
                job=job,
                text=text,
                limit=limit,
                cursor=cursor,
                include_resolved=everything,
            )
            return failures_json(read_failures(engine, query, clock))

        return JSONResponse(await blocking(read))

    return failures


def retry_failures_endpoint(
    engine: Engine, clock: Clock | None, limit: int
) -> Callable[[Request, ApiToken], Awaitable[Response]]:
    """The handler of ``POST``: body ``{"job", "module", "since", "reason"}``."""

    async def retry_failures(request: Request, token: ApiToken) -> Response:
        body = _retry_body(await read_json(request, limit))
        try:
            start = parse_since(body.since, (clock or SystemClock())()) if body.since else None
        except BadFailureQuery as error:
            raise _invalid(error.field, error.detail) from None

        def act() -> dict[str, Any]:
            if body.job is not None:
                try:
                    require_stored_job(engine, body.job)
                except UnknownJobError:
                    raise _invalid("job", "names no job the store knows") from None
            jobs = jobs_of_module(engine, body.module) if body.module is not None else None
            if body.module is not None and not jobs:
                raise _invalid("module", "names no module of a job the store knows")
            query = FailureQuery(since=start, job=body.job, jobs=jobs)
            reason = body.reason
            done = retry_open_failures(engine, query, actor=token.name, reason=reason, clock=clock)
            return {
                "queued": [
                    {
                        "run_id": q.run_id,
                        "retry_of": q.retry_of.id,
                        "job": q.retry_of.job_name,
                        "attempt": q.attempt,
                        "outcome": "pending",
                    }
                    for q in done.queued
                ],
                "refused": [
                    {"run_id": run.id, "job": run.job_name, "reason": why}
                    for run, why in done.refused
                ],
                "more": done.more,
                "hosts_alive": done.hosts_alive,
            }

        return JSONResponse(await blocking(act), status_code=202)

    return retry_failures


def _retry_body(body: Any) -> FailureRetry:
    try:
        return FailureRetry.model_validate(body)
    except ValidationError as error:
        problems = [
            FieldProblem(".".join(str(p) for p in e["loc"]) or "", e["msg"])
            for e in error.errors(include_url=False, include_input=False)
        ]
        first = problems[0] if problems else FieldProblem("", "not a failure retry")
        raise BadRequest(422, "Invalid body", first.line(), problems) from None


def _invalid(field: str, detail: str) -> BadRequest:
    problem = FieldProblem(field, detail)
    return BadRequest(422, "Invalid body", problem.line(), [problem])


def _bad(field: str, detail: str) -> BadRequest:
    problem = FieldProblem(field, detail)
    return BadRequest(400, "Invalid query parameter", problem.line(), [problem])
