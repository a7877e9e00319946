"""Input the store cannot hold, refused at the door with 4xx naming the field.

A NUL character in a path or a query parameter (``%00``) is answered 400 before any handler
runs: PostgreSQL refuses NUL in text, so it would otherwise surface as a database error. Parsed
JSON bodies are checked by :func:`json_problem` for NUL in any string and for nesting deeper
than any body of the API needs.
"""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, unquote

from starlette.types import ASGIApp, Receive, Scope, Send

from jobhost.runtime.definition import FieldProblem
from jobhost.web.middleware import PROBLEM_JSON, json_bytes, problem_body, send_answer

__all__ = ["MAX_JSON_DEPTH", "NO_NUL_PATTERN", "RefuseNul", "json_problem"]

MAX_JSON_DEPTH = 32
"""Deepest nesting of objects and arrays a JSON body may have."""
NO_NUL_PATTERN = "^[^\\x00]*$"
"""The API document's pattern of a text that may hold anything but NUL, refused here."""
_NUL = "\x00"
# JSON can carry a lone surrogate (``"\ud800"``) that no UTF-8 text holds: the database
# driver and the answer's encoder would fail on it with a 500.
_SURROGATE = re.compile("[\ud800-\udfff]")
_NO_SURROGATE = "must not contain a lone surrogate (\\ud800-\\udfff): send text as UTF-8"


class RefuseNul:
    """ASGI middleware: a request whose path or query holds NUL is answered 400."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            problem = _nul_problem(scope)
            if problem is not None:
                errors = [{"field": problem.field, "message": problem.message}]
                body = problem_body(400, "Invalid request", problem.line(), errors=errors)
                await send_answer(send, 400, json_bytes(body), {"content-type": PROBLEM_JSON})
                return
        await self.app(scope, receive, send)


def _nul_problem(scope: Scope) -> FieldProblem | None:
    """The first path part or query parameter of ``scope`` that holds NUL, as a problem."""
    message = "must not contain a NUL character (%00)"
    path = str(scope.get("path", ""))
    raw = scope.get("raw_path")
    if _NUL in path or (isinstance(raw, bytes) and _NUL in unquote(raw.decode("latin-1"))):
        return FieldProblem("path", message)
    query = scope.get("query_string", b"")
    text = query.decode("latin-1") if isinstance(query, bytes) else ""
    for name, value in parse_qsl(text, keep_blank_values=True):
        if _NUL in name or _NUL in value:
            return FieldProblem(name.replace(_NUL, "\\0")[:60] or "query", message)
    return None


def json_problem(value: object) -> FieldProblem | None:
    """The first place of a parsed JSON body that the store cannot hold: a string or a key with
    NUL or a lone surrogate, or nesting deeper than :data:`MAX_JSON_DEPTH`."""
    pending: list[tuple[object, str, int]] = [(value, "", 0)]
    while pending:
        item, where, depth = pending.pop()
        if isinstance(item, str):
            if _NUL in item:
                return FieldProblem(where, "must not contain a NUL character (\\u0000)")
            if _SURROGATE.search(item) is not None:
                return FieldProblem(where, _NO_SURROGATE)
            continue
        if not isinstance(item, dict | list):
            continue
        if depth >= MAX_JSON_DEPTH:
            return FieldProblem(where, f"is nested deeper than {MAX_JSON_DEPTH} levels")
        if isinstance(item, dict):
            for key, inner in item.items():
                field = f"{where}.{key}" if where else str(key)
                if _NUL in key:
                    return FieldProblem(field.replace(_NUL, "\\0"), "a key must not contain NUL")
                if _SURROGATE.search(key) is not None:
                    return FieldProblem(_SURROGATE.sub("?", field), _NO_SURROGATE)
                pending.append((inner, field, depth + 1))
        else:
            pending.extend((inner, f"{where}[{i}]", depth + 1) for i, inner in enumerate(item))
    return None
