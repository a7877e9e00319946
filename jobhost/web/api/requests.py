"""Reading an API request (its JSON body, size-limited and strictly parsed, and its query), and
answering what is wrong with it as ``application/problem+json``: a detail naming the field and
the fix, and for a refused body every field problem under ``errors``."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from functools import cache
from typing import Annotated, Any, TypeVar

from pydantic import AfterValidator, BaseModel, Field, ValidationError
from starlette.requests import Request
from starlette.responses import Response

from jobhost.operations.changes import REASON_LIMIT, BadReason, checked_reason
from jobhost.operations.jobs import VALUE_LIMIT
from jobhost.runtime.definition import FieldProblem
from jobhost.runtime.service import ChangeRefused
from jobhost.web.middleware import (
    MAX_JSON_DEPTH,
    PROBLEM_JSON,
    BodyTooLarge,
    declared_too_large,
    json_problem,
    problem_body,
    read_capped,
)

__all__ = [
    "ReasonText",
    "bad_query",
    "field_error",
    "invalid",
    "problem",
    "query_choice",
    "query_flag",
    "query_int",
    "read_json",
    "read_model",
    "read_reason",
    "take_reason",
    "unknown",
]

# What checked_reason accepts, for the document: any text of whitespace-folding characters and
# others, with something besides whitespace, and no control character str.split() does not fold.
_CONTROLS = r"\x00-\x08\x0e-\x1b\x7f-\x84\x86-\x9f"
_REASON_PATTERN = rf"^[^{_CONTROLS}]*[^\s{_CONTROLS}][^{_CONTROLS}]*$"
ReasonText = Annotated[
    str,
    Field(
        min_length=1,
        max_length=REASON_LIMIT,
        # Documented only: checked_reason enforces it, with a message naming what is wrong.
        json_schema_extra={"pattern": _REASON_PATTERN},
    ),
    AfterValidator(checked_reason),
]

_SELECTION_LIMIT = 100
_NAME_LIMIT = 200
_DIGITS = re.compile(r"[0-9]{1,19}")
_Model = TypeVar("_Model", bound=BaseModel)


def problem(
    status: int,
    title: str,
    detail: str,
    *,
    errors: Sequence[FieldProblem] = (),
    headers: Mapping[str, str] | None = None,
    extra: Mapping[str, object] | None = None,
) -> Response:
    body = problem_body(status, title, detail, **(extra or {}))
    if errors:
        body["errors"] = [{"field": e.field, "message": e.message} for e in errors]
    return Response(
        json.dumps(body, indent=2), status_code=status, headers=headers, media_type=PROBLEM_JSON
    )


def unknown(detail: str) -> ChangeRefused:
    """404 for what the path names, which ``detail`` never repeats."""
    return ChangeRefused(404, "Not found", detail)


def field_error(status: int, title: str, field: str, detail: str) -> ChangeRefused:
    """A refusal naming one ``field`` (``""``: the whole body) and what is wrong with it."""
    problem = FieldProblem(field, detail)
    return ChangeRefused(status, title, problem.line(), problems=[problem])


def invalid(field: str, detail: str) -> ChangeRefused:
    return field_error(422, "Invalid body", field, detail)


def bad_query(name: str, detail: str) -> ChangeRefused:
    return field_error(400, "Invalid query parameter", name, detail)


async def read_json(request: Request, limit: int) -> Any:
    """The body as JSON; 413 past ``limit`` bytes (read no further), 415 for another media
    type, 411 for a body framed neither by length nor by chunks, 400 for malformed JSON."""
    if declared_too_large(request, limit):
        raise _too_large(limit)
    media = request.headers.get("content-type", "application/json").split(";")[0].strip().lower()
    if media != "application/json" and not media.endswith("+json"):
        raise ChangeRefused(
            415,
            "Unsupported media type",
            f"the body must be JSON: send Content-Type: application/json (got {media!r})",
        )
    try:
        body = await read_capped(request, limit)
    except BodyTooLarge:
        raise _too_large(limit) from None
    headers = request.headers
    if not body and "content-length" not in headers and "transfer-encoding" not in headers:
        # HTTP gives such a request no body, so what a client sent after the head (a whole
        # upload, perhaps too large) was never read: say what is missing, not that "" is bad.
        raise ChangeRefused(
            411,
            "Length required",
            "the request has neither Content-Length nor Transfer-Encoding: chunked, so it "
            "carries no body (anything sent after its headers is not read); send the JSON "
            "with its Content-Length",
        )
    try:
        value = json.loads(body.decode("utf-8"), parse_constant=_no_constant)
    except RecursionError:
        raise ChangeRefused(
            400,
            "Malformed JSON",
            f"the body is nested deeper than {MAX_JSON_DEPTH} levels; send a flatter object",
        ) from None
    except UnicodeDecodeError as error:
        detail = f"the body is not UTF-8 (at byte offset {error.start}): send the JSON as UTF-8"
        raise ChangeRefused(400, "Malformed JSON", detail) from None
    except ValueError as error:
        where = ""
        if isinstance(error, json.JSONDecodeError):
            where = f" at line {error.lineno}, column {error.colno}"
        raise ChangeRefused(
            400,
            "Malformed JSON",
            f"the body is not valid JSON{where}: {error.args[0] if error.args else error}; "
            'send one JSON object, e.g. {"kind": "http", ...}',
        ) from None
    problem = json_problem(value)
    if problem is not None:
        raise invalid(problem.field, problem.message)
    return value


async def read_model(request: Request, limit: int, model: type[_Model]) -> _Model:
    body = await read_json(request, limit)
    try:
        return model.model_validate(body)
    except ValidationError as error:
        problems = [
            FieldProblem(".".join(str(p) for p in e["loc"]), e["msg"])
            for e in error.errors(include_url=False, include_input=False)
        ]
        raise ChangeRefused(422, "Invalid body", problems[0].line(), problems=problems) from None


async def read_reason(request: Request, limit: int) -> str:
    body = await _read_object(request, limit, {"reason"}, '{"reason": "..."}', '{"reason"}')
    return _reason(body)


def take_reason(body: object) -> tuple[dict[str, Any], str]:
    """A runtime job's definition without its ``reason`` (audited, not stored), and the reason."""
    if not isinstance(body, dict):
        raise invalid("", 'the body must be a JSON object: {"kind": "http", "reason": "..."}')
    return {key: value for key, value in body.items() if key != "reason"}, _reason(body)


async def read_state_value(request: Request, limit: int) -> tuple[str, str]:
    shape = '{"value": "...", "reason": "..."}'
    body = await _read_object(request, limit, {"value", "reason"}, shape)
    value = body.get("value")
    if not isinstance(value, str) or len(value) > VALUE_LIMIT:
        raise invalid("value", f"a string of at most {VALUE_LIMIT} characters")
    return value, _reason(body)


async def read_selection(request: Request, limit: int) -> tuple[list[str], list[str], str]:
    shape = '{"modules": ["..."], "match": ["..."], "reason": "..."}'
    body = await _read_object(request, limit, {"modules", "match", "reason"}, shape)
    modules, patterns = _names(body, "modules"), _names(body, "match")
    if not modules and not patterns:
        raise invalid("modules", "name at least one module, or a name pattern in match")
    return modules, patterns, _reason(body)


async def _read_object(
    request: Request, limit: int, fields: set[str], shape: str, known: str | None = None
) -> dict[str, Any]:
    """The JSON body, refused unless an object of only ``fields`` (``shape`` shows it)."""
    body = await read_json(request, limit)
    if not isinstance(body, dict):
        raise invalid("", f"the body must be a JSON object: {shape}")
    extra = sorted(str(key) for key in body if key not in fields)
    if extra:
        raise invalid(extra[0], f"is not a known field; the body is {known or shape}")
    return body


def _reason(body: dict[str, Any]) -> str:
    reason = body.get("reason")
    if not isinstance(reason, str):
        raise invalid("reason", "say why, in a non-empty string: it is audited")
    try:
        return checked_reason(reason)
    except BadReason as error:
        raise invalid("reason", str(error)) from None


def _names(body: dict[str, Any], field: str) -> list[str]:
    value = body.get(field, [])
    if (
        not isinstance(value, list)
        or len(value) > _SELECTION_LIMIT
        or not all(isinstance(v, str) and 0 < len(v) <= _NAME_LIMIT for v in value)
    ):
        raise invalid(
            field,
            f"must be a list of at most {_SELECTION_LIMIT} non-empty strings of at most "
            f"{_NAME_LIMIT} characters",
        )
    return list(value)


def query_int(request: Request, query: type[BaseModel], name: str) -> int:
    """``name`` with the default and bounds of its field in ``query``, so the two cannot drift."""
    default, low, high = _bounds(query, name)
    raw = request.query_params.get(name)
    if raw is None:
        return default
    if not _DIGITS.fullmatch(raw) or not low <= int(raw) <= high:
        raise _bad_query(name, raw, f"a whole number from {low} to {high}")
    return int(raw)


def query_flag(request: Request, name: str) -> bool:
    raw = request.query_params.get(name)
    if raw is None:
        return False
    if raw not in ("true", "false"):
        raise _bad_query(name, raw, "true or false")
    return raw == "true"


def query_choice(request: Request, name: str, allowed: Sequence[str]) -> list[str]:
    values = request.query_params.getlist(name)
    for value in values:
        if value not in allowed:
            raise _bad_query(name, value, f"one of {', '.join(allowed)}")
    return values


@cache
def _bounds(query: type[BaseModel], name: str) -> tuple[int, int, int]:
    field = query.model_fields[name]
    low = next(rule.ge for rule in field.metadata if hasattr(rule, "ge"))
    high = next(rule.le for rule in field.metadata if hasattr(rule, "le"))
    return field.default, low, high


def _no_constant(name: str) -> None:
    raise ValueError(f"{name} is not JSON")


def _too_large(limit: int) -> ChangeRefused:
    return ChangeRefused(
        413,
        "Body too large",
        f"the body is larger than {limit} bytes (api_body_limit); send a smaller definition",
    )


def _bad_query(name: str, value: str, allowed: str) -> ChangeRefused:
    return bad_query(name, f"must be {allowed} (got {value[:60]!r})")
