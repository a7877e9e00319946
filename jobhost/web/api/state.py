"""``/api/v1/jobs/{name}/state``: a job's durable state, read (scope read) and changed one key at
a time between runs (scope write), as ``jobhost state`` does, with the token's name as the actor.
A change while a run of the job runs is 409 naming the run; every change is in the change log.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from jobhost.catalog import Catalog
from jobhost.config import ApiToken
from jobhost.operations.job_state import (
    KEY_LIMIT,
    VALUE_LIMIT,
    BadStateInput,
    change_state,
    read_state,
    state_json,
)
from jobhost.operations.run_actions import ActionRefused
from jobhost.runtime.errors import not_found
from jobhost.runtime.service import JobService
from jobhost.store import Store
from jobhost.web.api.requests import problem, read_reason, read_state_value
from jobhost.web.app import blocking

__all__ = ["StateEndpoints", "require_known"]


class StateEndpoints:
    """The handlers (rows ``state.*`` of :data:`~jobhost.web.api.table.ENDPOINTS`)."""

    def __init__(self, service: JobService, limit: int) -> None:
        self._store = service.store
        self._service = service
        self._limit = limit

    async def read(self, request: Request, _token: ApiToken) -> Response:
        name = request.path_params["name"]
        await blocking(lambda: require_known(self._service.current(name), self._store, name))
        return JSONResponse(state_json(await blocking(lambda: read_state(self._store, name))))

    async def put(self, request: Request, token: ApiToken) -> Response:
        value, reason = await read_state_value(request, self._limit, VALUE_LIMIT)
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
                done = change_state(
                    self._store,
                    name,
                    key,
                    value,
                    actor=token.name,
                    reason=reason,
                    clock=self._store.clock,
                )
            except BadStateInput as bad:
                return problem(422, "Invalid key", str(bad))
            except ActionRefused as refused:
                status = 404 if refused.unknown else 409
                return problem(status, "Not found" if refused.unknown else "Conflict", str(refused))
            if value is None and done.before is None:
                # The key is not echoed: whatever arrives in a path is never repeated.
                return problem(
                    404,
                    "Not found",
                    f"job {name} has no such state key; GET its state to list them",
                )
            body = {"job": name, "key": key, "before": done.before, "after": done.after}
            return JSONResponse({**body, "changed": done.changed})

        return await blocking(act)


def require_known(catalog: Catalog, store: Store, name: str) -> None:
    """Nothing for a job declared or known to the store; else the API's 404."""
    if name not in catalog.jobs and not store.job_is_known(name):
        raise not_found(name)
