"""The ``/api/v1`` endpoints: who may call which, and what each answers.

Every request but the OpenAPI document carries ``Authorization: Bearer <secret>``: none or an
unknown one is 401, a token without the operation's scope 403. Changes are recorded with the
token's name. Every error is ``application/problem+json``; an unknown path or method under the
prefix too, so a client never has to guess the shape of an answer.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import re
import secrets
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from functools import partialmethod
from operator import attrgetter
from typing import Any

from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Mount, Route

from jobhost.catalog import Catalog
from jobhost.config import ApiToken, Settings
from jobhost.errors import UnknownJobError
from jobhost.operations.changes import change_json
from jobhost.operations.failures import (
    SEARCH_LIMIT,
    BadFailureQuery,
    FailureQuery,
    decode_cursor,
    failures_json,
    parse_since,
    read_failures,
)
from jobhost.operations.failures import retry_failures as retry_open_failures
from jobhost.operations.jobs import kinds_json, require_known_job
from jobhost.operations.report import SORTS, STATUSES, JobFilter, Sort, build_report, select_jobs
from jobhost.operations.runs import (
    OUTCOMES,
    RUN_ID_LIMIT,
    history_json,
    page_json,
    read_run_log,
)
from jobhost.operations.timefmt import short_utc
from jobhost.records import ChangeSearch
from jobhost.runtime.service import ChangeRefused, JobService, etag_matches, not_found
from jobhost.store import Store
from jobhost.store.engine import is_store_down
from jobhost.store.runtime import acting_from
from jobhost.store.snapshot import JobRead
from jobhost.web.access import GuessBrake, bearer_secret, client_address
from jobhost.web.api.actions import (
    ActionEndpoints,
    BackfillEndpoints,
    ServiceEndpoints,
    StateEndpoints,
    require_known,
)
from jobhost.web.api.models import (
    NAME_LIMIT,
    SINCE_PATTERN,
    SOURCES,
    ChangesQuery,
    FailureRetry,
    FailuresQuery,
    JobsQuery,
    RunLogQuery,
    RunsQuery,
)
from jobhost.web.api.openapi import ENDPOINTS, Endpoint, is_model, openapi_document
from jobhost.web.api.requests import (
    bad_query,
    field_error,
    invalid,
    problem,
    query_choice,
    query_flag,
    query_int,
    read_json,
    read_model,
    read_reason,
    take_reason,
    unknown,
)
from jobhost.web.api.views import job_json, runtime_json
from jobhost.web.middleware import blocking, failure_body, log_unexpected

__all__ = ["API_PREFIX", "api_routes"]

API_PREFIX = "/api/v1"
_SINCE = re.compile(SINCE_PATTERN)
_log = logging.getLogger("jobhost.api")
_Operation = tuple[Endpoint, Callable[[Request, ApiToken], Awaitable[Response]]]


def api_routes(
    settings: Settings,
    catalog: Catalog,
    store: Store,
    *,
    trigger_wait: float = 2.0,
    brake: GuessBrake | None = None,
) -> list[BaseRoute]:
    """The API's routes under :data:`API_PREFIX`; none while no ``api_tokens`` are configured."""
    if not settings.api_tokens:
        return []
    service = JobService(settings, catalog, store, trigger_wait=trigger_wait)
    return [_Api(service, brake or GuessBrake(store)).mount()]


class _Api(ServiceEndpoints):
    def __init__(self, service: JobService, brake: GuessBrake) -> None:
        super().__init__(service, service.settings.api_body_limit)
        self.brake = brake
        self.actions = ActionEndpoints(service, self._limit)
        self.backfills = BackfillEndpoints(service, self._limit)
        self.state = StateEndpoints(service, self._limit)

    def mount(self) -> Mount:
        table: dict[str, dict[str, _Operation]] = {}
        for endpoint in ENDPOINTS:
            handler = attrgetter(endpoint.operation)(self)
            table.setdefault(endpoint.path, {})[endpoint.method] = (endpoint, handler)
        routes = [Route(path, self._dispatch(ops)) for path, ops in table.items()]
        routes.append(Route("/{rest:path}", self.unknown))
        for route in routes:
            # Every method reaches the handlers, so any other one (TRACE, made up) is answered
            # 405 in the API's shape with the path's Allow, not by the router's 405 or 404.
            route.methods = None
        return Mount(API_PREFIX, routes=routes)

    def _dispatch(self, ops: dict[str, _Operation]) -> Callable[[Request], Any]:
        allowed = ", ".join(sorted({*ops, "HEAD"} if "GET" in ops else ops))

        async def endpoint(request: Request) -> Response:
            method = "GET" if request.method == "HEAD" else request.method
            if method not in ops:
                return problem(
                    405,
                    "Method not allowed",
                    f"{request.method} is not allowed here; use {allowed}",
                    headers={"Allow": allowed},
                )
            found, handler = ops[method]
            if found.scope is None:  # the document: no token
                return await self.openapi(request)
            address = client_address(request)
            token = _token_for(request, self._service.settings.api_tokens)
            if token is None:
                sent = request.headers.get("authorization")
                if sent and (wait := await self.brake.refused(address, "api")) is not None:
                    return problem(
                        429,
                        "Too many requests",
                        f"too many wrong tokens; try again in {wait}s",
                        headers={"Retry-After": str(wait)},
                    )
                return problem(
                    401,
                    "Unauthorized",
                    "send Authorization: Bearer <secret> with a secret whose SHA-256 is one of "
                    "the configured api_tokens",
                    headers={"WWW-Authenticate": 'Bearer realm="jobhost"'},
                )
            if (scope := found.scope) not in token.scopes:
                return problem(
                    403,
                    "Forbidden",
                    f"token {token.name!r} lacks scope {scope!r} (it has "
                    f"{', '.join(token.scopes)}); add {scope!r} to its scopes in [[api_tokens]]",
                )
            acting_from("api", address)
            try:
                return _checked(found, await handler(request, token))
            except ChangeRefused as error:
                return problem(error.status, error.title, error.detail, errors=error.problems)
            except Exception as error:  # the API must answer, and the host go on
                if is_store_down(error):
                    raise  # answered 503 by StoreUnavailable
                return _internal_error(log_unexpected(request.method, request.url.path, error))

        return endpoint

    async def unknown(self, _request: Request) -> Response:
        # The path is the caller's text: it is never echoed back.
        return problem(
            404, "Not found", f"no such endpoint; the API is described at {API_PREFIX}/openapi.json"
        )

    async def openapi(self, _request: Request) -> Response:
        return JSONResponse(openapi_document())

    async def kinds(self, _request: Request, _token: ApiToken) -> Response:
        return JSONResponse(kinds_json(self._service.catalog.kinds))

    async def jobs(self, request: Request, _token: ApiToken) -> Response:
        sorts = query_choice(request, "sort", SORTS)
        sort_by: Sort = next((known for known in SORTS if sorts[-1:] == [known]), "name")
        which = JobFilter(
            search=request.query_params.get("search", ""),
            modules=request.query_params.getlist("module"),
            statuses=query_choice(request, "state", STATUSES),
            failing=query_flag(request, "failing"),
            sort=sort_by,
        )
        limit = query_int(request, JobsQuery, "limit")
        sources = query_choice(request, "source", SOURCES)

        def answer() -> list[dict[str, Any]]:
            catalog = self._service.current()
            report = build_report(self._service.settings, catalog, self._store)
            rows = {row.name: row for row in self._store.list_runtime_jobs().rows}
            found = [
                job_json(j, catalog, rows.get(j.name)) for j in select_jobs(report.jobs, which)
            ]
            return [j for j in found if not sources or j["source"] in sources][:limit]

        return JSONResponse({"jobs": await blocking(answer)})

    async def job(self, request: Request, _token: ApiToken) -> Response:
        name = request.path_params["name"]

        def answer() -> dict[str, Any]:
            catalog = self._service.current(name)
            require_known(catalog, self._store, name)
            if name not in catalog.jobs:
                self._refuse_deleted(name)
            report = build_report(self._service.settings, catalog, self._store, job=name)
            if not report.jobs:
                raise not_found(name)
            return job_json(report.jobs[0], catalog, self._service.runtime_row(name))

        data = await blocking(answer)
        if "runtime" not in data:
            return JSONResponse(data)
        etag = data["runtime"]["etag"]
        if_none_match = request.headers.get("if-none-match")
        if if_none_match is not None and etag_matches(etag, if_none_match):
            return Response(status_code=304, headers={"ETag": etag})
        return JSONResponse(data, headers={"ETag": etag})

    async def put(self, request: Request, token: ApiToken) -> Response:
        name = request.path_params["name"]
        body, reason = take_reason(await read_json(request, self._limit))
        if_match = request.headers.get("if-match")
        if_none_match = request.headers.get("if-none-match")
        done = await blocking(
            lambda: self._service.put(
                name,
                body,
                actor=token.name,
                if_match=if_match,
                if_none_match=if_none_match,
                reason=reason,
            )
        )
        return JSONResponse(
            runtime_json(done.row),
            status_code=201 if done.created else 200,
            headers={"ETag": done.etag, "Location": f"{API_PREFIX}/jobs/{name}"},
        )

    async def delete(self, request: Request, token: ApiToken) -> Response:
        name = request.path_params["name"]
        reason = await read_reason(request, self._limit)
        if_match = request.headers.get("if-match")
        await blocking(
            lambda: self._service.delete(name, actor=token.name, if_match=if_match, reason=reason)
        )
        return Response(status_code=204)

    async def trigger(self, request: Request, token: ApiToken) -> Response:
        name = request.path_params["name"]
        reason = await read_reason(request, self._limit)
        data = await blocking(lambda: self._service.trigger(name, actor=token.name, reason=reason))
        if data["status"] == "refused":
            # The host would not start it: a run still running under overlap = forbid.
            detail = f"job {name}: {data['message'] or 'the run was refused'}"
            return problem(409, "Conflict", detail, extra={"request_id": data["request_id"]})
        return JSONResponse(data, status_code=202)

    async def _pause(self, request: Request, token: ApiToken, *, paused: bool) -> Response:
        name = request.path_params["name"]
        reason = await read_reason(request, self._limit)
        act = self._service.pause if paused else self._service.resume
        changed = await blocking(lambda: act(name, actor=token.name, reason=reason))
        return JSONResponse({"job": name, "paused": paused, "changed": changed})

    pause = partialmethod(_pause, paused=True)
    resume = partialmethod(_pause, paused=False)

    async def runs(self, request: Request, _token: ApiToken) -> Response:
        name = request.path_params["name"]
        limit = query_int(request, RunsQuery, "limit")
        outcomes = query_choice(request, "outcome", OUTCOMES)
        outcome = outcomes[-1] if outcomes else None

        def answer() -> dict[str, Any]:
            require_known(self._service.current(name), self._store, name)
            rows = self._store.job_page(JobRead(name, history=limit, outcome=outcome)).history
            return history_json(name, rows)

        return JSONResponse(await blocking(answer))

    async def run_logs(self, request: Request, _token: ApiToken) -> Response:
        run_id = request.path_params["run_id"]
        after = query_int(request, RunLogQuery, "after")
        limit = query_int(request, RunLogQuery, "limit")
        if len(run_id) > RUN_ID_LIMIT:
            raise _no_run()
        page = await blocking(lambda: read_run_log(self._store, run_id, after=after, limit=limit))
        if page is None:
            raise _no_run()
        return JSONResponse(page_json(page))

    async def changes(self, request: Request, _token: ApiToken) -> Response:
        limit = query_int(request, ChangesQuery, "limit")
        after = query_int(request, ChangesQuery, "after")
        job = request.query_params.get("job")
        if job is not None and len(job) > NAME_LIMIT:
            raise bad_query("job", f"must be a job name of 1 to {NAME_LIMIT} characters")

        def answer() -> dict[str, Any]:
            search = ChangeSearch(job=job, after_id=after)
            found = self._store.search_changes(search, limit, oldest_first=True)
            return {
                "changes": [change_json(c) for c in found],
                "next_after": found[-1].id if found else after,
            }

        return JSONResponse(await blocking(answer))

    async def failures(self, request: Request, _token: ApiToken) -> Response:
        params, store = request.query_params, self._store
        limit = query_int(request, FailuresQuery, "limit")
        everything = query_flag(request, "all")
        job = params.get("job") or None
        if job is not None and len(job) > NAME_LIMIT:
            raise bad_query("job", f"must be a job name of 1 to {NAME_LIMIT} characters")
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

    async def retry_failures(self, request: Request, token: ApiToken) -> Response:
        store = self._store
        body = await read_model(request, self._limit, FailureRetry)
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
                    raise field_error(
                        404, "Not found", "module", "names no module of a job the store knows"
                    )
            query = FailureQuery(since=start, job=body.job, jobs=jobs)
            done = retry_open_failures(store, query, actor=token.name, reason=body.reason)
            queued = [{**retried, "outcome": "pending"} for retried in done["queued"]]
            return {**done, "queued": queued}

        return JSONResponse(await blocking(act), status_code=202)

    def _refuse_deleted(self, name: str) -> None:
        """404 for a runtime job removed through the API: by whom, when, where its history is."""
        row = self._store.list_schedules([name]).get(name)
        if row is None or not row.orphaned or row.trigger_source != "api":
            return
        found = self._store.search_changes(ChangeSearch(job=name, action="delete"), 1)
        change = found[0] if found else None
        how = f" by {change.actor} at {short_utc(change.at)}" if change is not None else ""
        raise ChangeRefused(
            404,
            "Deleted job",
            f"job {name!r} was deleted through the API{how}; its runs stay under "
            f"GET {API_PREFIX}/jobs/{name}/runs and its changes under "
            f"GET {API_PREFIX}/changes?job={name}",
            exit_code=2,
        )


def _since(text: str | None, store: Store) -> datetime | None:
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
        raise field_error(404, "Not found", "job", detail) from None


def _token_for(request: Request, tokens: Sequence[ApiToken]) -> ApiToken | None:
    """The token whose SHA-256 the bearer secret has (the settings hold only digests, so a
    leaked settings file grants nothing); every digest is compared, in constant time."""
    secret = bearer_secret(request)
    digest = hashlib.sha256(secret.encode()).hexdigest() if secret is not None else ""
    found = [token for token in tokens if hmac.compare_digest(digest, token.sha256)]
    return found[-1] if found else None


def _checked(endpoint: Endpoint, response: Response) -> Response:
    """``response``, when its JSON fits the answer model ``endpoint`` declares for its status;
    otherwise a 500, logged: a key the document does not list is the server's fault."""
    answer = endpoint.answers.get(response.status_code)
    model = answer.body if answer is not None else None
    if response.media_type != "application/json" or not is_model(model):
        return response
    try:
        model.model_validate_json(bytes(response.body))  # the same object: no copy
    except ValidationError as error:
        failure_id = secrets.token_hex(8)
        _log.error(
            "%s answered %s outside its %s model (id %s): %s",
            endpoint.route,
            response.status_code,
            model.__name__,
            failure_id,
            error,
        )
        return _internal_error(failure_id)
    return response


def _internal_error(failure_id: str) -> Response:
    detail = str(failure_body(failure_id)["detail"])
    return problem(500, "Internal error", detail, extra={"id": failure_id})


def _no_run() -> ChangeRefused:
    return unknown(
        "no run with this id in the ledger (a run purged by retention goes with its lines); "
        "run ids are in GET /api/v1/jobs/{name}/runs"
    )
