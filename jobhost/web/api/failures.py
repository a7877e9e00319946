"""``GET /api/v1/failures``: failed, timed-out, abandoned and stuck runs of every job, a page
at a time, newest first; what ``jobhost failures --json`` prints."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from jobhost.config import ApiToken
from jobhost.errors import UnknownJobError
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
from jobhost.web.api.requests import BadRequest, query_int
from jobhost.web.app import blocking

__all__ = ["PAGE_LIMIT", "failures_endpoint"]

PAGE_LIMIT = 500
"""The most rows one answer holds."""

_JOB_LIMIT = 200


def failures_endpoint(
    engine: Engine, clock: Clock | None
) -> Callable[[Request, ApiToken], Awaitable[Response]]:
    """The handler: parameters ``since``, ``job``, ``q``, ``limit`` and ``cursor``."""

    async def failures(request: Request, _token: ApiToken) -> Response:
        params = request.query_params
        limit = query_int(request, "limit", 50, 1, PAGE_LIMIT)
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
            query = FailureQuery(since=start, job=job, text=text, limit=limit, cursor=cursor)
            return failures_json(read_failures(engine, query, clock))

        return JSONResponse(await blocking(read))

    return failures


def _bad(field: str, detail: str) -> BadRequest:
    problem = FieldProblem(field, detail)
    return BadRequest(400, "Invalid query parameter", problem.line(), [problem])
