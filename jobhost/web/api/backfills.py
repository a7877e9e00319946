"""``/api/v1`` backfills: start one for a job (planned as ``jobhost backfill`` plans it, and
recorded for the hosts), read its progress, cancel it."""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from jobhost.config import ApiToken
from jobhost.operations.backfills import (
    BackfillInputError,
    backfill_json,
    cancel_backfill,
    plan_backfill,
    start_backfill,
)
from jobhost.runtime.service import not_found
from jobhost.web.api.actions import ServiceEndpoints
from jobhost.web.api.models import BackfillMode
from jobhost.web.api.requests import ReasonText, field_error, problem, read_model, read_reason
from jobhost.web.middleware import blocking

__all__ = ["BackfillEndpoints", "BackfillRequest"]

_ID = re.compile(r"[0-9a-f]{32}")


class BackfillRequest(BaseModel):
    """The body of ``POST /api/v1/jobs/{name}/backfills``."""

    model_config = ConfigDict(extra="forbid", strict=True)

    from_: str = Field(
        alias="from",
        min_length=1,
        max_length=40,
        description="First instant (included): ISO 8601 with a zone, or a date (midnight in "
        "the job's zone).",
    )
    to: str = Field(min_length=1, max_length=40, description="Last instant (excluded).")
    mode: BackfillMode = "missing"
    reason: ReasonText = Field(description="Why; audited.")
    dry_run: bool = False
    concurrency: int = Field(default=1, ge=1, le=1000)


class BackfillEndpoints(ServiceEndpoints):
    """The handlers of rows ``backfills.*`` of :data:`~jobhost.web.api.table.ENDPOINTS`."""

    async def start(self, request: Request, token: ApiToken) -> Response:
        name = request.path_params["name"]
        body = await read_model(request, self._limit, BackfillRequest, "a backfill request")
        data, status = await blocking(lambda: self._start(name, body, token.name))
        return JSONResponse(data, status_code=status)

    async def show(self, request: Request, _token: ApiToken) -> Response:
        backfill_id = request.path_params["backfill_id"]
        if not _ID.fullmatch(backfill_id):
            return _no_backfill()
        found = await blocking(lambda: self._store.list_backfills(ids=[backfill_id]))
        return JSONResponse(backfill_json(found[0])) if found else _no_backfill()

    async def cancel(self, request: Request, token: ApiToken) -> Response:
        backfill_id = request.path_params["backfill_id"]
        if not _ID.fullmatch(backfill_id):
            return _no_backfill()
        reason = await read_reason(request, self._limit)
        record = await blocking(
            lambda: cancel_backfill(self._store, backfill_id, actor=token.name, reason=reason)
        )
        return JSONResponse(backfill_json(record)) if record is not None else _no_backfill()

    def _start(self, name: str, body: BackfillRequest, actor: str) -> tuple[dict[str, Any], int]:
        catalog = self._service.current(name)
        spec = catalog.jobs.get(name)
        if spec is None:
            raise not_found(name)
        store = self._store
        try:
            plan = plan_backfill(
                spec,
                store,
                start=body.from_,
                end=body.to,
                mode=body.mode,
                limit=self._service.settings.backfill_limit,
                now=store.now(),
            )
        except BackfillInputError as error:
            raise field_error(422, "Invalid backfill", "", str(error)) from None
        shown = {"id": None, **plan.to_json()}
        if body.dry_run or not plan.occurrences:
            return shown, 200
        backfill_id = start_backfill(
            store, spec, plan, concurrency=body.concurrency, actor=actor, reason=body.reason
        )
        return {**shown, "id": backfill_id}, 202


def _no_backfill() -> Response:
    # The id is not repeated: whatever arrives in a path is never echoed.
    return problem(
        404,
        "Not found",
        "no backfill with this id in the store; POST /api/v1/jobs/{name}/backfills answers "
        "the id of a new one",
    )
