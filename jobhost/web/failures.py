"""An unexpected exception in any handler: a bare 500 with an id, and one log line that
carries the id.

The answer says nothing of the error (no message, no SQL, no traceback); the log has it. The
first failure of a kind (exception type and where it was raised) within a minute is logged with
its traceback, the rest of that minute one line each, so a client that repeats a failing
request cannot flood the log.
"""

from __future__ import annotations

import logging
import secrets
import threading
import time

from starlette.types import ASGIApp, Receive, Scope, Send

from jobhost.web.raw_answers import PROBLEM_JSON, StartWatch, json_bytes, send_answer

__all__ = ["CatchUnexpected", "failure_body", "log_unexpected"]

_log = logging.getLogger("jobhost.http")
_QUIET_SECONDS = 60.0
_KEPT_KINDS = 1000
_lock = threading.Lock()
_last_traceback: dict[tuple[str, str], float] = {}


def log_unexpected(method: str, path: str, error: BaseException) -> str:
    """Log ``error`` once under a new id; return the id."""
    failure_id = secrets.token_hex(8)
    kind = (type(error).__qualname__, _origin(error))
    now = time.monotonic()
    with _lock:
        loud = now - _last_traceback.get(kind, -_QUIET_SECONDS) >= _QUIET_SECONDS
        if loud:
            if len(_last_traceback) >= _KEPT_KINDS:
                _last_traceback.clear()
            _last_traceback[kind] = now
    where = f"HTTP {method} {path[:200]} failed (id {failure_id})"
    if loud:
        _log.error("%s", where, exc_info=error)
    else:
        _log.error("%s: %s (traceback logged within the last minute)", where, kind[0])
    return failure_id


def _origin(error: BaseException) -> str:
    """Where ``error`` was raised: its kind is its type and this place, whatever the path."""
    trace = error.__traceback__
    while trace is not None and trace.tb_next is not None:
        trace = trace.tb_next
    if trace is None:
        return "?"
    return f"{trace.tb_frame.f_code.co_filename}:{trace.tb_lineno}"


def failure_body(failure_id: str) -> dict[str, object]:
    """What a 500 answers: no more than that something failed, and where the log has it."""
    return {
        "type": "about:blank",
        "title": "Internal error",
        "status": 500,
        "detail": f"an unexpected error; the log has it under id {failure_id}",
        "id": failure_id,
    }


class CatchUnexpected:
    """ASGI middleware: an exception out of the application answers 500 (see the module)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        watched = StartWatch(send)
        try:
            await self.app(scope, receive, watched)
        except Exception as error:
            failure_id = log_unexpected(scope.get("method", "?"), scope.get("path", "?"), error)
            if watched.started:
                return  # the answer is under way: it is cut off, and the log says why
            body = json_bytes(failure_body(failure_id))
            await send_answer(send, 500, body, {"content-type": PROBLEM_JSON})
