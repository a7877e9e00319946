"""The schemas of the ``/api/v1`` document: the requests' and the answers' shapes."""

from __future__ import annotations

from typing import Any

from jobhost.operations.history import OUTCOMES
from jobhost.operations.status import STATUSES
from jobhost.runtime.definition import JobDefinition
from jobhost.web.api.backfills import BackfillRequest

__all__ = ["NULL_STR", "STR", "component_schemas", "object_schema", "ref"]

_REF = "#/components/schemas/{model}"
NULL_STR = {"type": ["string", "null"]}
STR = {"type": "string"}


def ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def object_schema(
    properties: dict[str, Any], *, required: list[str] | None = None
) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties) if required is None else required,
    }


def component_schemas() -> dict[str, Any]:
    """Every schema the document refers to, the body's generated from JobDefinition."""
    definition = JobDefinition.model_json_schema(ref_template=_REF)
    lifted = definition.pop("$defs", {})
    trigger = object_schema(
        {
            "kind": {"type": ["string", "null"], "enum": ["cron", "interval", None]},
            "expression": NULL_STR,
            "timezone": STR,
            "source": {"type": "string"},
            "dst_policy": {"type": "string"},
        },
        required=["kind", "expression", "timezone"],
    )
    runtime = object_schema(
        {
            "name": STR,
            "source": {"type": "string", "const": "api"},
            "kind": STR,
            "definition": {"type": "object"},
            "etag": STR,
            "version": {"type": "integer", "minimum": 1},
            "created_at": STR,
            "created_by": STR,
            "updated_at": STR,
            "updated_by": STR,
        }
    )
    job = object_schema(
        {
            "name": STR,
            "module": STR,
            "description": STR,
            "critical": {"type": "boolean"},
            "enabled": {"type": "boolean"},
            "paused": {"type": "boolean"},
            "state": STR,
            "declared_trigger": {"oneOf": [ref("Trigger"), {"type": "null"}]},
            "effective_trigger": ref("Trigger"),
            "next_fire_utc": NULL_STR,
            "next_fire_local": NULL_STR,
            "last_run": {"type": ["object", "null"]},
            "recent_outcomes": {"type": "array", "items": STR},
            "mismatch": {"type": "array", "items": STR},
            "status": {"type": "string", "enum": list(STATUSES)},
            "source": {"type": "string", "enum": ["api", "declaration", "override", "store"]},
            "kind": NULL_STR,
            "runtime": ref("RuntimeJob"),
        },
        required=["name", "module", "enabled", "paused", "status", "source", "kind"],
    )
    kind = object_schema(
        {
            "name": STR,
            "description": STR,
            "module": STR,
            "settings_schema": {"type": "object"},
            "examples": {"type": "array", "items": {"type": "object"}},
        }
    )
    run = object_schema(
        {
            "run_id": STR,
            "occurrence": NULL_STR,
            "attempt": {"type": "integer"},
            "source": STR,
            "outcome": {"type": "string", "enum": list(OUTCOMES)},
        }
    )
    change = object_schema(
        {
            "id": {"type": "integer"},
            "at": STR,
            "actor": STR,
            "action": {
                "type": "string",
                "enum": [
                    "create",
                    "change",
                    "delete",
                    "pause",
                    "resume",
                    "trigger",
                    "backfill",
                    "backfill-cancel",
                ],
            },
            "job": STR,
            "before": {"type": ["object", "null"]},
            "after": {"type": ["object", "null"]},
            "reason": NULL_STR,
        }
    )
    problem = object_schema(
        {
            "type": STR,
            "title": STR,
            "status": {"type": "integer"},
            "detail": STR,
            "id": STR,
            "errors": {
                "type": "array",
                "items": object_schema({"field": STR, "message": STR}),
            },
        },
        required=["type", "title", "status", "detail"],
    )
    reason = {
        "type": "object",
        "properties": {"reason": {"type": "string", "minLength": 1, "maxLength": 500}},
        "required": ["reason"],
        "additionalProperties": False,
    }
    return {
        **lifted,
        "JobDefinition": definition,
        "Trigger": trigger,
        "RuntimeJob": runtime,
        "Job": job,
        "Kind": kind,
        "Run": run,
        "Change": change,
        "Failure": object_schema(
            {
                "job": STR,
                "run_id": STR,
                "occurrence": NULL_STR,
                "started_at": NULL_STR,
                "finished_at": NULL_STR,
                "outcome": {
                    "type": "string",
                    "enum": ["failed", "timed_out", "abandoned", "stuck"],
                },
                "attempt": {"type": "integer"},
                "source": STR,
                "host": NULL_STR,
                "error_type": NULL_STR,
                "error": NULL_STR,
                "streak": {"type": "integer", "minimum": 0},
            }
        ),
        "Problem": problem,
        "Reason": reason,
        "TriggerResult": object_schema(
            {
                "job": STR,
                "request_id": STR,
                "run_id": NULL_STR,
                "status": STR,
                "message": NULL_STR,
            }
        ),
        "PauseResult": object_schema(
            {"job": STR, "paused": {"type": "boolean"}, "changed": {"type": "boolean"}}
        ),
        "BackfillRequest": BackfillRequest.model_json_schema(by_alias=True, ref_template=_REF),
        "BackfillSelection": object_schema(
            {
                "id": NULL_STR,
                "job": STR,
                "mode": {"type": "string", "enum": ["missing", "failed", "all"]},
                "from": STR,
                "to": STR,
                "occurrences": {"type": "array", "items": STR},
            }
        ),
        "Backfill": _backfill(),
    }


def _backfill() -> dict[str, Any]:
    count = {"type": "integer", "minimum": 0}
    return object_schema(
        {
            "id": STR,
            "job": STR,
            "from": STR,
            "to": STR,
            "mode": {"type": "string", "enum": ["missing", "failed", "all"]},
            "state": {"type": "string", "enum": ["running", "cancelled", "done"]},
            "reason": NULL_STR,
            "actor": STR,
            "concurrency": {"type": "integer", "minimum": 1},
            "created_at": STR,
            "finished_at": NULL_STR,
            **{
                name: count
                for name in ("selected", "done", "succeeded", "failed", "running", "pending")
            },
        }
    )
