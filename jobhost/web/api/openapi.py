"""Every endpoint of ``/api/v1`` in one table, and the OpenAPI 3.1 document generated from it
and the very pydantic models that validate its bodies, answers and query strings: the routes
are mounted from the same table, so the two cannot drift apart. A new endpoint is one more
:class:`Endpoint` here, an ``async`` method of that ``operation`` name on the API's handler
class, and its models in :mod:`jobhost.web.api.models`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import Any, Literal, TypeGuard

from pydantic import BaseModel, TypeAdapter
from pydantic.json_schema import models_json_schema

from jobhost.catalog import NAME_PATTERN
from jobhost.operations.jobs import KEY_LIMIT
from jobhost.operations.runs import RUN_ID_LIMIT
from jobhost.web.api import models
from jobhost.web.api.models import Problem
from jobhost.web.middleware import NO_NUL_PATTERN

__all__ = ["ENDPOINTS", "PATH_PARAMETERS", "Answer", "Endpoint", "is_model", "openapi_document"]

Scope = Literal["read", "write", "trigger"]


@dataclass(frozen=True)
class Answer:
    """One status an endpoint answers with: what it means, its body's type (None: no body),
    and its headers."""

    description: str
    body: Any = None
    headers: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Endpoint:
    route: str
    """Its method and path: ``GET /jobs/{name}``."""
    operation: str
    """The handler's name on the API object (dotted for a group: ``backfills.start``), and the
    document's ``operationId``."""
    scope: Scope | None
    """The token's scope it needs; None: no token at all (the document itself)."""
    summary: str
    answers: Mapping[int, Answer]
    query: type[BaseModel] | None = None
    body: type[BaseModel] | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    """The request headers it reads."""

    @property
    def method(self) -> str:
        return self.route.split(" ")[0]

    @property
    def path(self) -> str:
        return self.route.split(" ")[1]


PATH_PARAMETERS: dict[str, tuple[str, dict[str, Any]]] = {
    "name": (
        "The job's name, module.job ('hooks.nightly-ping').",
        {"type": "string", "pattern": NAME_PATTERN.pattern, "maxLength": 200},
    ),
    "backfill_id": (
        "The backfill's id, as POST /jobs/{name}/backfills answers it.",
        {"type": "string", "maxLength": 64},
    ),
    "key": (
        "A key of the job's durable state, as GET /jobs/{name}/state lists it.",
        {"type": "string", "minLength": 1, "maxLength": KEY_LIMIT},
    ),
    "run_id": (
        "The run's id, as GET /jobs/{name}/runs lists it.",
        {"type": "string", "maxLength": RUN_ID_LIMIT},
    ),
}

_IF_NONE_MATCH = {
    "If-None-Match": "On GET, an ETag you hold: 304 while the job is still so. On PUT, *: create "
    "only (412 if the job exists)."
}
_IF_MATCH = {"If-Match": "An ETag from a GET or PUT (or *): change only if the job is still so."}
_ETAG = {"ETag": "The job's version, for If-Match."}

# An endpoint per entry: route, operation, scope, summary, answers, then its options.
# fmt: off
ENDPOINTS: tuple[Endpoint, ...] = (
    Endpoint("GET /openapi.json", "openapi", None, "This document.",
             {200: Answer("The OpenAPI document.", dict[str, Any])}),
    Endpoint("GET /kinds", "kinds", "read",
             "The job kinds the modules offer, with their settings' JSON schema.",
             {200: Answer("The kinds.", models.KindList)}),
    Endpoint("GET /jobs", "jobs", "read",
             "Every job, declared and runtime, as the report shows it.",
             {200: Answer("The jobs.", models.JobList)}, query=models.JobsQuery),
    Endpoint("GET /jobs/{name}", "job", "read", "One job; a runtime job's answer carries its ETag.",
             {200: Answer("The job.", models.Job, _ETAG),
              304: Answer("Not modified: If-None-Match names its ETag.")},
             headers=_IF_NONE_MATCH),
    Endpoint("PUT /jobs/{name}", "put", "write", "Create (201) or replace (200) a runtime job.",
             {200: Answer("Replaced (or unchanged).", models.RuntimeJob, _ETAG),
              201: Answer("Created.", models.RuntimeJob, _ETAG)},
             headers={**_IF_MATCH, **_IF_NONE_MATCH}, body=models.JobWrite),
    Endpoint("DELETE /jobs/{name}", "delete", "write",
             "Remove a runtime job (409 for a declared one); its history stays.",
             {204: Answer("Removed.")}, headers=_IF_MATCH, body=models.Reason),
    Endpoint("POST /jobs/{name}/trigger", "trigger", "trigger",
             "Run the job now, once, audited with the reason.",
             {202: Answer("Queued (run_id once a host started it).", models.TriggerResult)},
             body=models.Reason),
    Endpoint("POST /jobs/{name}/pause", "pause", "write",
             "Pause the job on every replica; missed occurrences are recorded.",
             {200: Answer("Paused (changed: false if it was).", models.PauseResult)},
             body=models.Reason),
    Endpoint("POST /jobs/{name}/resume", "resume", "write",
             "Resume the job; its misfire policy decides what of the pause runs.",
             {200: Answer("Resumed (changed: false if it was not paused).", models.PauseResult)},
             body=models.Reason),
    Endpoint("GET /jobs/{name}/runs", "runs", "read", "The job's history, newest first.",
             {200: Answer("The runs.", models.RunList)}, query=models.RunsQuery),
    Endpoint("GET /jobs/{name}/state", "state.read", "read",
             "The job's durable state (what its runs keep through context.state), by key.",
             {200: Answer("The keys and values.", models.JobState)}),
    Endpoint("PUT /jobs/{name}/state/{key}", "state.put", "write",
             "Set one key of the job's state between runs (see jobhost state); 409 while a run of "
             "the job is running.",
             {200: Answer("Set (changed: false if it had that value).", models.StateChanged)},
             body=models.StateValue),
    Endpoint("DELETE /jobs/{name}/state/{key}", "state.delete", "write",
             "Remove one key of the job's state between runs; 404 for a key it does not have, 409 "
             "while a run of the job is running.",
             {200: Answer("Removed.", models.StateChanged)}, body=models.Reason),
    Endpoint("POST /jobs/{name}/backfills", "backfills.start", "trigger",
             "Replay the job's past occurrences from ≤ occurrence < to, each once (see jobhost "
             "backfill); dry_run only lists them.",
             {202: Answer("Recorded: its id and occurrences.", models.BackfillSelection),
              200: Answer("A dry run or nothing to do (id null).", models.BackfillSelection)},
             body=models.BackfillRequest),
    Endpoint("GET /backfills/{backfill_id}", "backfills.show", "read",
             "A backfill's progress: selected, done, succeeded, failed, running.",
             {200: Answer("The backfill.", models.Backfill)}),
    Endpoint("DELETE /backfills/{backfill_id}", "backfills.cancel", "trigger",
             "Cancel a backfill: no new occurrence starts; runs in flight finish.",
             {200: Answer("The backfill, cancelled (or already ended).", models.Backfill)},
             body=models.Reason),
    Endpoint("GET /failures", "failures", "read",
             "Open failures (failed, timed-out, abandoned and stuck runs not resolved by a later "
             "success or an acknowledgement) of every job, newest first; all=true for every one.",
             {200: Answer("Failures; pass next_cursor as cursor for the next page.",
                          models.FailureList)},
             query=models.FailuresQuery),
    Endpoint("POST /failures", "retry_failures", "trigger",
             "Retry every open failure of a job, a module or since a time, once each (one "
             "change-log entry per run), queued for the hosts.",
             {202: Answer("Queued (refused: those whose work has a retry under way).",
                          models.FailuresRetried)},
             body=models.FailureRetry),
    Endpoint("POST /pause", "actions.pause_many", "write",
             "Pause every job of the modules, or whose name matches a pattern, with one reason "
             "(one change-log entry per job paused).",
             {200: Answer("The jobs selected (changed: false if it was).", models.PausedMany)},
             body=models.Selection),
    Endpoint("POST /resume", "actions.resume_many", "write",
             "Resume every job of the modules, or whose name matches a pattern.",
             {200: Answer("The jobs selected (changed: false if it was not).", models.PausedMany)},
             body=models.Selection),
    Endpoint("POST /runs/{run_id}/retry", "actions.retry_run", "trigger",
             "Queue the next attempt at a failed, timed-out, abandoned or cancelled run's "
             "occurrence (same idempotency key); 409 for a run still running or whose work "
             "succeeded.",
             {202: Answer("Queued: a host claims it as every retry.", models.RetryQueued)},
             body=models.Reason),
    Endpoint("POST /runs/{run_id}/cancel", "actions.cancel_run", "trigger",
             "Ask the running run's host to cancel it (recorded cancelled with the token's name); "
             "a run not yet started is cancelled at once; 409 for a finished run or one whose "
             "host is gone.",
             {202: Answer("Asked (requested), already asked, or cancelled.", models.CancelAsked)},
             body=models.Reason),
    Endpoint("GET /runs/{run_id}/logs", "run_logs", "read",
             "What the run wrote through its job's logger, in order; tail it with after.",
             {200: Answer("Lines; pass next_after as after for the next ones.", models.RunLog)},
             query=models.RunLogQuery),
    Endpoint("GET /changes", "changes", "read",
             "The change log, oldest first: who changed what, when, before and after.",
             {200: Answer("Changes; pass next_after as after for the next page.",
                          models.ChangeList)},
             query=models.ChangesQuery),
)
# fmt: on


_REF = "#/components/schemas/{model}"
_STRING = {"type": "string"}
_SchemaOf = Callable[[Any], dict[str, Any]]


@cache
def openapi_document() -> dict[str, Any]:
    bodies = [b for e in ENDPOINTS for b in (e.body, *(a.body for a in e.answers.values()))]
    models = sorted(set(filter(is_model, [Problem, *bodies])), key=lambda model: model.__name__)
    refs, definitions = models_json_schema([(m, "validation") for m in models], ref_template=_REF)

    def schema_of(body: Any) -> dict[str, Any]:
        if is_model(body):
            return dict(refs[(body, "validation")])
        return TypeAdapter(body).json_schema(ref_template=_REF)

    paths: dict[str, dict[str, Any]] = {}
    for endpoint in ENDPOINTS:
        paths.setdefault(endpoint.path, {})[endpoint.method.lower()] = _operation(
            endpoint, schema_of
        )
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "jobhost API",
            "version": "1",
            "description": "Job kinds and runtime jobs: create, change, pause, trigger and remove "
            "jobs while the hosts run. Errors are application/problem+json.",
        },
        "servers": [{"url": "/api/v1"}],
        "security": [{"bearer": []}],
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            "schemas": definitions.get("$defs", {}),
        },
        "paths": paths,
    }


def is_model(body: object) -> TypeGuard[type[BaseModel]]:
    """A pydantic model, not another type such as ``dict[str, Any]``."""
    return isinstance(body, type) and issubclass(body, BaseModel)


def _operation(endpoint: Endpoint, schema_of: _SchemaOf) -> dict[str, Any]:
    operation: dict[str, Any] = {
        "operationId": endpoint.operation,
        "summary": endpoint.summary,
        "parameters": _parameters(endpoint),
        "responses": _responses(endpoint, schema_of),
    }
    if endpoint.scope is None:
        operation["security"] = []
    else:
        operation["description"] = f"Scope: {endpoint.scope}."
    if endpoint.body is not None:
        operation["requestBody"] = {
            "required": True,
            "content": {"application/json": {"schema": schema_of(endpoint.body)}},
        }
    return operation


def _parameter(name: str, where: str, description: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": name,
        "in": where,
        "required": where == "path",
        "description": description,
        "schema": schema,
    }


def _parameters(endpoint: Endpoint) -> list[dict[str, Any]]:
    parameters = [
        _parameter(name, "path", PATH_PARAMETERS[name][0], _without_nul(PATH_PARAMETERS[name][1]))
        for name in re.findall(r"\{(\w+)\}", endpoint.path)
    ]
    parameters += [_parameter(n, "header", text, _STRING) for n, text in endpoint.headers.items()]
    query = endpoint.query.model_json_schema()["properties"] if endpoint.query else {}
    for name, schema in query.items():
        described = {k: v for k, v in schema.items() if k not in {"title", "default"}}
        description = described.pop("description", "")
        parameters.append(_parameter(name, "query", description, _without_nul(described)))
    return parameters


def _without_nul(schema: dict[str, Any]) -> dict[str, Any]:
    """A string's schema refuses NUL (as RefuseNul does): by its own pattern, or by ours."""
    if schema.get("type") == "string" and "pattern" not in schema:
        return {**schema, "pattern": NO_NUL_PATTERN}
    if schema.get("type") == "array":
        return {**schema, "items": _without_nul(schema.get("items", {}))}
    return schema


def _responses(endpoint: Endpoint, schema_of: _SchemaOf) -> dict[str, Any]:
    responses: dict[str, Any] = {}
    for status, answer in endpoint.answers.items():
        response: dict[str, Any] = {"description": answer.description}
        if answer.headers:
            response["headers"] = {
                name: {"description": text, "schema": _STRING}
                for name, text in answer.headers.items()
            }
        if answer.body is not None:
            response["content"] = {"application/json": {"schema": schema_of(answer.body)}}
        responses[str(status)] = response
    if endpoint.scope is not None:  # the document itself answers no error
        responses["default"] = {
            "description": "An error: what is wrong, the field, and the fix.",
            "content": {"application/problem+json": {"schema": schema_of(Problem)}},
        }
    return responses
