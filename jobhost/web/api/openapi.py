"""The OpenAPI 3.1 document of ``/api/v1``, written out by hand beside the code it describes.

The body of ``PUT /api/v1/jobs/{name}`` is generated from :class:`JobDefinition`, so the
document and the validation cannot disagree; the answers are described here, and a
property-based test (schemathesis) checks that every answer the API gives fits them.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from jobhost.catalog import NAME_PATTERN
from jobhost.operations.failures import SEARCH_LIMIT
from jobhost.operations.history import OUTCOMES
from jobhost.operations.runlogs import PAGE_LINES, RUN_ID_LIMIT
from jobhost.operations.selection import SORTS
from jobhost.operations.status import STATUSES
from jobhost.store.runtime import MAX_CHANGE_ID
from jobhost.web.api.failures import PAGE_LIMIT
from jobhost.web.api.schemas import NULL_STR, STR, component_schemas, object_schema, ref

__all__ = ["openapi_document"]


def _json(schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


_PROBLEM = {
    "description": "An error: what is wrong, the field, and the fix.",
    "content": {"application/problem+json": {"schema": ref("Problem")}},
}
_NAME = {
    "name": "name",
    "in": "path",
    "required": True,
    "description": "The job's name, module.job ('hooks.nightly-ping').",
    "schema": {"type": "string", "pattern": NAME_PATTERN.pattern, "maxLength": 200},
}
_RUN_ID = {
    "name": "run_id",
    "in": "path",
    "required": True,
    "description": "The run's id, as GET /jobs/{name}/runs lists it.",
    "schema": {"type": "string", "maxLength": RUN_ID_LIMIT},
}
_BACKFILL_ID = {
    "name": "backfill_id",
    "in": "path",
    "required": True,
    "description": "The backfill's id, as POST /jobs/{name}/backfills answers it.",
    "schema": {"type": "string", "maxLength": 64},
}
_RUN_LOG = object_schema(
    {
        "run_id": STR,
        "job": STR,
        "outcome": {"type": "string", "enum": list(OUTCOMES)},
        "running": {"type": "boolean"},
        "lines": {
            "type": "array",
            "items": {
                "oneOf": [
                    object_schema(
                        {
                            "seq": {"type": "integer"},
                            "time": STR,
                            "level": STR,
                            "message": STR,
                        }
                    ),
                    object_schema(
                        {
                            "dropped": object_schema(
                                {"lines": {"type": "integer"}, "bytes": {"type": "integer"}}
                            )
                        }
                    ),
                ]
            },
        },
        "next_after": {"type": "integer"},
    }
)
_IF_NONE_MATCH = {
    "name": "If-None-Match",
    "in": "header",
    "required": False,
    "description": "On GET, an ETag you hold: 304 while the job is still so. On PUT, *: create "
    "only (412 if the job exists).",
    "schema": STR,
}
_IF_MATCH = {
    "name": "If-Match",
    "in": "header",
    "required": False,
    "description": "An ETag from a GET or PUT (or *): change only if the job is still so.",
    "schema": STR,
}


def _query(name: str, schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {
        "name": name,
        "in": "query",
        "required": False,
        "description": description,
        "schema": schema,
    }


def _operation(
    summary: str,
    ok: dict[str, Any],
    *,
    scope: str,
    parameters: list[dict[str, Any]] | None = None,
    body: dict[str, Any] | None = None,
) -> dict[str, Any]:
    operation: dict[str, Any] = {
        "summary": summary,
        "description": f"Scope: {scope}.",
        "parameters": parameters or [],
        "responses": {**ok, "default": _PROBLEM},
    }
    if body is not None:
        operation["requestBody"] = {
            "required": True,
            "content": {"application/json": {"schema": body}},
        }
    return operation


def _paths() -> dict[str, Any]:
    etag = {"ETag": {"description": "The job's version, for If-Match.", "schema": STR}}
    runtime = {
        "description": "",
        "headers": etag,
        "content": {"application/json": {"schema": ref("RuntimeJob")}},
    }
    listing = [
        _query("search", STR, "Only jobs whose name, module or description holds this."),
        _query("module", {"type": "array", "items": STR}, "Only jobs of these modules."),
        _query(
            "state",
            {"type": "array", "items": {"type": "string", "enum": list(STATUSES)}},
            "Only jobs with these statuses.",
        ),
        _query("failing", {"type": "boolean"}, "Only jobs whose last run failed or timed out."),
        _query("sort", {"type": "string", "enum": list(SORTS)}, "Order of the jobs."),
        _query(
            "source",
            {
                "type": "array",
                "items": {"type": "string", "enum": ["api", "declaration", "override", "store"]},
            },
            "Only jobs from these sources.",
        ),
        _query("limit", {"type": "integer", "minimum": 1, "maximum": 10_000}, "At most N jobs."),
    ]
    reason = ref("Reason")
    return {
        "/openapi.json": {
            "get": {
                "summary": "This document.",
                "security": [],
                "responses": {"200": _json({"type": "object"}, "The OpenAPI document.")},
            }
        },
        "/kinds": {
            "get": _operation(
                "The job kinds the modules offer, with their settings' JSON schema.",
                {
                    "200": _json(
                        object_schema({"kinds": {"type": "array", "items": ref("Kind")}}),
                        "The kinds.",
                    )
                },
                scope="read",
            )
        },
        "/jobs": {
            "get": _operation(
                "Every job, declared and runtime, as the report shows it.",
                {
                    "200": _json(
                        object_schema({"jobs": {"type": "array", "items": ref("Job")}}), "The jobs."
                    )
                },
                scope="read",
                parameters=listing,
            )
        },
        "/jobs/{name}": {
            "get": _operation(
                "One job; a runtime job's answer carries its ETag.",
                {
                    "200": {**_json(ref("Job"), "The job."), "headers": etag},
                    "304": {"description": "Not modified: If-None-Match names its ETag."},
                },
                scope="read",
                parameters=[_NAME, _IF_NONE_MATCH],
            ),
            "put": _operation(
                "Create (201) or replace (200) a runtime job.",
                {
                    "200": {**runtime, "description": "Replaced (or unchanged)."},
                    "201": {**runtime, "description": "Created."},
                },
                scope="write",
                parameters=[_NAME, _IF_MATCH, _IF_NONE_MATCH],
                body=ref("JobDefinition"),
            ),
            "delete": _operation(
                "Remove a runtime job (409 for a declared one); its history stays.",
                {"204": {"description": "Removed."}},
                scope="write",
                parameters=[_NAME, _IF_MATCH],
            ),
        },
        "/jobs/{name}/trigger": {
            "post": _operation(
                "Run the job now, once, audited with the reason.",
                {"202": _json(ref("TriggerResult"), "Queued (run_id once a host started it).")},
                scope="trigger",
                parameters=[_NAME],
                body=reason,
            )
        },
        "/jobs/{name}/pause": {
            "post": _operation(
                "Pause the job on every replica; missed occurrences are recorded.",
                {"200": _json(ref("PauseResult"), "Paused (changed: false if it was).")},
                scope="write",
                parameters=[_NAME],
                body=reason,
            )
        },
        "/jobs/{name}/resume": {
            "post": _operation(
                "Resume the job; its misfire policy decides what of the pause runs.",
                {
                    "200": _json(
                        ref("PauseResult"), "Resumed (changed: false if it was not paused)."
                    )
                },
                scope="write",
                parameters=[_NAME],
                body=reason,
            )
        },
        "/jobs/{name}/runs": {
            "get": _operation(
                "The job's history, newest first.",
                {
                    "200": _json(
                        object_schema({"job": STR, "runs": {"type": "array", "items": ref("Run")}}),
                        "The runs.",
                    )
                },
                scope="read",
                parameters=[
                    _NAME,
                    _query(
                        "limit",
                        {"type": "integer", "minimum": 1, "maximum": 1000},
                        "At most N runs (default 20).",
                    ),
                    _query(
                        "outcome",
                        {"type": "string", "enum": list(OUTCOMES)},
                        "Only runs with this outcome.",
                    ),
                ],
            )
        },
        "/jobs/{name}/backfills": {
            "post": _operation(
                "Replay the job's past occurrences from ≤ occurrence < to, each once (see "
                "jobhost backfill); dry_run only lists them.",
                {
                    "202": _json(ref("BackfillSelection"), "Recorded: its id and occurrences."),
                    "200": _json(ref("BackfillSelection"), "A dry run or nothing to do (id null)."),
                },
                scope="trigger",
                parameters=[_NAME],
                body=ref("BackfillRequest"),
            )
        },
        "/backfills/{backfill_id}": {
            "get": _operation(
                "A backfill's progress: selected, done, succeeded, failed, running.",
                {"200": _json(ref("Backfill"), "The backfill.")},
                scope="read",
                parameters=[_BACKFILL_ID],
            ),
            "delete": _operation(
                "Cancel a backfill: no new occurrence starts; runs in flight finish.",
                {"200": _json(ref("Backfill"), "The backfill, cancelled (or already ended).")},
                scope="trigger",
                parameters=[_BACKFILL_ID],
            ),
        },
        "/runs/{run_id}/logs": {
            "get": _operation(
                "What the run wrote through its job's logger, in order; tail it with after.",
                {"200": _json(_RUN_LOG, "Lines; pass next_after as after for the next ones.")},
                scope="read",
                parameters=[
                    _RUN_ID,
                    _query(
                        "after",
                        {"type": "integer", "minimum": 0, "maximum": 2**31 - 1},
                        "Only lines numbered above this (next_after of the previous answer).",
                    ),
                    _query(
                        "limit",
                        {"type": "integer", "minimum": 1, "maximum": PAGE_LINES},
                        f"At most N lines (default {PAGE_LINES}).",
                    ),
                ],
            )
        },
        "/changes": {
            "get": _operation(
                "The change log, oldest first: who changed what, when, before and after.",
                {
                    "200": _json(
                        object_schema(
                            {
                                "changes": {"type": "array", "items": ref("Change")},
                                "next_after": {"type": "integer"},
                            }
                        ),
                        "Changes; pass next_after as after for the next page.",
                    )
                },
                scope="read",
                parameters=[
                    _query("job", STR, "Only this job's changes."),
                    _query(
                        "after",
                        {"type": "integer", "minimum": 0, "maximum": MAX_CHANGE_ID},
                        "Only changes with a larger id.",
                    ),
                    _query(
                        "limit",
                        {"type": "integer", "minimum": 1, "maximum": 1000},
                        "At most N changes (default 100).",
                    ),
                ],
            )
        },
        "/failures": {
            "get": _operation(
                "Failed, timed-out, abandoned and stuck runs of every job, newest first.",
                {
                    "200": _json(
                        object_schema(
                            {
                                "failures": {"type": "array", "items": ref("Failure")},
                                "next_cursor": NULL_STR,
                                "searched_to": NULL_STR,
                                "streak_limit": {"type": "integer"},
                                "generated_at": STR,
                            }
                        ),
                        "Failures; pass next_cursor as cursor for the next page.",
                    )
                },
                scope="read",
                parameters=[
                    _query(
                        "since",
                        {"type": "string", "maxLength": 64},
                        "Only runs that finished since then: 2h, 7d, a date (UTC) or an "
                        "ISO 8601 time with a zone.",
                    ),
                    _query("job", {"type": "string", "maxLength": 200}, "Only this job's runs."),
                    _query(
                        "q",
                        {"type": "string", "maxLength": SEARCH_LIMIT},
                        "Only runs whose error type or message contains this text (any case).",
                    ),
                    _query(
                        "limit",
                        {"type": "integer", "minimum": 1, "maximum": PAGE_LIMIT},
                        "At most N runs (default 50).",
                    ),
                    _query(
                        "cursor",
                        {"type": "string", "maxLength": 200},
                        "next_cursor of the previous answer.",
                    ),
                ],
            )
        },
    }


@cache
def openapi_document() -> dict[str, Any]:
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
            "schemas": component_schemas(),
        },
        "paths": _paths(),
    }
