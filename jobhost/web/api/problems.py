"""Errors as ``application/problem+json`` (RFC 9457): a title, the status, a detail naming the
field and the fix, and for a refused body every field problem under ``errors``."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from starlette.responses import Response

from jobhost.runtime.definition import FieldProblem

__all__ = ["PROBLEM_JSON", "problem"]

PROBLEM_JSON = "application/problem+json"


def problem(
    status: int,
    title: str,
    detail: str,
    *,
    errors: Sequence[FieldProblem] = (),
    headers: Mapping[str, str] | None = None,
    extra: Mapping[str, object] | None = None,
) -> Response:
    body: dict[str, object] = {
        "type": "about:blank",
        "title": title,
        "status": status,
        "detail": detail,
    }
    body.update(extra or {})
    if errors:
        body["errors"] = [{"field": e.field, "message": e.message} for e in errors]
    return Response(
        json.dumps(body, indent=2), status_code=status, headers=headers, media_type=PROBLEM_JSON
    )
