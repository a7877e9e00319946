"""``GET /api/v1/failures``: open failures of every job (``all=true``: every failure), a page
at a time, newest first; what ``jobhost failures --json`` prints. ``POST /api/v1/failures``:
one retry of every open failure of a job, a module or since a time, what ``jobhost retry
--failed`` does."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from jobhost.config import ApiToken
from jobhost.errors import UnknownJobError
from jobhost.operations.failures import (
    CURSOR_PATTERN,
    SEARCH_LIMIT,
    BadFailureQuery,
    FailureQuery,
    decode_cursor,
    failures_json,
    parse_since,
    read_failures,
)
from jobhost.operations.failures import retry_failures as retry_open_failures
from jobhost.operations.jobs import require_known_job
from jobhost.store import Store
from jobhost.web.api.actions import ServiceEndpoints
from jobhost.web.api.requests import (
    BadRequest,
    ReasonText,
    bad_query,
    field_error,
    invalid,
    query_flag,
    query_int,
    read_model,
)
from jobhost.web.app import blocking
from jobhost.web.inputs import NO_NUL_PATTERN

__all__ = ["SINCE_PATTERN", "FailureEndpoints", "FailureRetry", "FailuresQuery"]

_JOB_LIMIT = 200
# Up to three parts, the first not zero: at most 29,997 weeks, which no clock reaches back past.
_DURATION = "[1-9][0-9]{0,3}(?:ms|s|m|h|d|w)(?:[0-9]{1,4}(?:ms|s|m|h|d|w)){0,2}"
_YEAR = "(?:1[0-9]{3}|[2-8][0-9]{3}|9[0-8][0-9]{2})"
_MONTH_DAY = (
    "(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])"
    "|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)"
    "|02-(?:0[1-9]|1[0-9]|2[0-8]))"
)
_LEAP_DAY = (
    "(?:(?:1[0-9]|[2-8][0-9]|9[0-8])(?:0[48]|[2468][048]|[13579][26])"
    "|(?:1[26]|[2468][048]|[3579][26])00)-02-29"
)
_TIME = r"T(?:[01][0-9]|2[0-3]):[0-5][0-9](?::[0-5][0-9](?:\.[0-9]{1,6})?)?"
_ZONE = "(?:Z|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])"
SINCE_PATTERN = f"{_DURATION}|(?:{_YEAR}-{_MONTH_DAY}|{_LEAP_DAY})(?:{_TIME}{_ZONE})?"
"""What the API takes as ``since`` (the document's pattern, checked by the server): a positive
duration of whole units (``2h``, ``4h30m``), a calendar date from year 1000 to 9899, or that
date with a time and a zone. Every text of this shape is a time the failures can be read from."""
_SINCE = re.compile(SINCE_PATTERN)


def _name(description: str) -> Any:
    # The pattern is documented only: json_problem refuses NUL in any body.
    extra: dict[str, Any] = {"pattern": NO_NUL_PATTERN}
    return Field(
        None, min_length=1, max_length=200, description=description, json_schema_extra=extra
    )


class FailureRetry(BaseModel):
    """Which open failures to retry, once each, and why (``POST /failures``)."""

    model_config = ConfigDict(extra="forbid")
    job: str | None = _name("Only this job's.")
    module: str | None = _name("Only failures of this module's jobs.")
    since: str | None = Field(
        None,
        min_length=1,
        max_length=64,
        description="Only failures since then: 2h, 7d, a date (UTC) or an ISO 8601 time.",
        # Documented only: _since checks it, with a message that says what is wrong.
        json_schema_extra={"pattern": f"^(?:{SINCE_PATTERN})$"},
    )
    reason: ReasonText


class FailuresQuery(BaseModel):
    since: str = Field(
        "",
        max_length=64,
        description="Only runs that finished since then: a positive duration of whole units (2h, "
        "7d, 4h30m), a date (UTC, midnight) or a time with a zone (2026-11-28T06:00:00Z).",
        json_schema_extra={"pattern": f"^(?:{SINCE_PATTERN})?$"},
    )
    job: str = Field("", max_length=_JOB_LIMIT, description="Only this job's runs.")
    q: str = Field(
        "",
        max_length=SEARCH_LIMIT,
        description="Only runs whose error type or message contains this text (any case).",
    )
    limit: int = Field(50, ge=1, le=500, description="At most N runs (default 50).")
    cursor: str = Field(
        "",
        max_length=200,
        description="next_cursor of the previous answer.",
        json_schema_extra={"pattern": f"^(?:{CURSOR_PATTERN})?$"},
    )
    all: bool = Field(
        False, description="Also failures resolved by a later success or an acknowledgement."
    )


class FailureEndpoints(ServiceEndpoints):
    """The handlers of ``GET`` and ``POST /failures``."""

    async def read(self, request: Request, _token: ApiToken) -> Response:
        params, store = request.query_params, self._store
        limit = query_int(request, FailuresQuery, "limit")
        everything = query_flag(request, "all")
        job = params.get("job") or None
        if job is not None and len(job) > _JOB_LIMIT:
            raise bad_query("job", f"must be a job name of 1 to {_JOB_LIMIT} characters")
        text = params.get("q")
        if text is not None:
            if len(text) > SEARCH_LIMIT:
                raise bad_query("q", f"must be at most {SEARCH_LIMIT} characters")
            text = text.strip() or None
        try:
            cursor = decode_cursor(params["cursor"]) if params.get("cursor") else None
            start = _since(params.get("since"), store)
        except BadFailureQuery as error:
            raise bad_query(error.field, error.detail) from None

        def answer() -> dict[str, Any]:
            _require_job(store, job, "names no job the store knows; GET /api/v1/jobs lists them")
            query = FailureQuery(
                since=start,
                job=job,
                text=text,
                limit=limit,
                cursor=cursor,
                include_resolved=everything,
            )
            return failures_json(read_failures(store, query))

        return JSONResponse(await blocking(answer))

    async def retry(self, request: Request, token: ApiToken) -> Response:
        store = self._store
        body = await read_model(request, self._limit, FailureRetry, "a failure retry")
        try:
            start = _since(body.since, store)
        except BadFailureQuery as error:
            raise invalid(error.field, error.detail) from None

        def act() -> dict[str, Any]:
            _require_job(store, body.job, "names no job the store knows")
            jobs = None
            if body.module is not None:
                jobs = tuple(sorted(store.list_schedules(module=body.module)))
                if not jobs:
                    raise _unknown("module", "names no module of a job the store knows")
            query = FailureQuery(since=start, job=body.job, jobs=jobs)
            done = retry_open_failures(store, query, actor=token.name, reason=body.reason)
            queued = [{**retried, "outcome": "pending"} for retried in done["queued"]]
            return {**done, "queued": queued}

        return JSONResponse(await blocking(act), status_code=202)


def _since(text: str | None, store: Store) -> datetime | None:
    """The instant ``text`` names (None for none); :class:`BadFailureQuery` for a text not of
    :data:`SINCE_PATTERN`'s shape, or outside the range the store holds."""
    if not text:
        return None
    if not _SINCE.fullmatch(text):
        raise BadFailureQuery(
            "since",
            "must be a duration such as 2h, 7d or 4h30m, a date such as 2026-11-28, or a time with "
            "a zone such as 2026-11-28T06:00:00Z",
        )
    return parse_since(text, store.clock())


def _require_job(store: Store, job: str | None, detail: str) -> None:
    if job is None:
        return
    try:
        require_known_job(None, store, job)
    except UnknownJobError:
        # The name is the caller's text: it is not repeated.
        raise _unknown("job", detail) from None


def _unknown(field: str, detail: str) -> BadRequest:
    """A well-formed name of nothing the store knows: 404, as for any unknown job."""
    return field_error(404, "Not found", field, detail)
