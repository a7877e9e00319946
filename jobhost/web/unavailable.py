"""The store is down, hung or locked: every HTTP surface answers 503, and the log says it once.

The answer is ``application/problem+json`` ("store unavailable, retry") with ``Retry-After``,
and names nothing of the error: no driver message, no SQL, no parameters. The log has one
warning when an outage starts (the error's type and first line, redacted) and one line when a
request that reads the store succeeds again, whatever the number of requests in between.
"""

from __future__ import annotations

import json
import logging
import threading

from jobhost_contracts import redact_text
from starlette.types import ASGIApp, Receive, Scope, Send

from jobhost.store.retrying import is_store_down
from jobhost.web.raw_answers import PROBLEM_JSON, StartWatch, send_answer

__all__ = ["RETRY_AFTER_SECONDS", "StoreUnavailable", "is_store_down", "unavailable_answer"]

RETRY_AFTER_SECONDS = 5
"""What ``Retry-After`` says: about how long a store outage takes to notice it is over."""

_log = logging.getLogger("jobhost.http")
_lock = threading.Lock()
_down = False
# Requests that never read the store cannot tell that it is back.
_STORELESS = ("/healthz", "/readyz", "/metrics", "/static/")


def unavailable_answer(
    method: str, path: str, error: BaseException
) -> tuple[int, dict[str, str], bytes]:
    """Note the outage ``error`` shows (once per outage in the log); the 503 to answer with."""
    global _down
    with _lock:
        first, _down = not _down, True
    if first:
        line = str(error).splitlines()[0] if str(error) else ""
        _log.warning(
            "HTTP %s %s: the store is unavailable (%s: %s); answering 503 until it returns",
            method,
            path[:200],
            type(error).__name__,
            redact_text(line)[:300],
        )
    if method in {"GET", "HEAD", "OPTIONS"}:
        detail = f"the store is unavailable, retry in {RETRY_AFTER_SECONDS}s"
    else:
        # The connection may have gone while the commit was under way: say so, never guess.
        detail = (
            f"the store is unavailable, retry in {RETRY_AFTER_SECONDS}s; the change may or may "
            "not have been made: read the resource (a job's ETag, its changes) before retrying"
        )
    body = {"type": "about:blank", "title": "Store unavailable", "status": 503, "detail": detail}
    headers = {
        "content-type": PROBLEM_JSON,
        "retry-after": str(RETRY_AFTER_SECONDS),
    }
    return 503, headers, json.dumps(body, indent=2).encode()


def _store_answered(path: str) -> None:
    global _down
    if not _down or path.startswith(_STORELESS):
        return
    with _lock:
        was, _down = _down, False
    if was:
        _log.info("HTTP %s: the store answers again", path[:200])


class StoreUnavailable:
    """ASGI middleware: a store error out of the application answers 503 (see the module)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = str(scope.get("path", "?"))

        def started(status: int) -> None:
            # Said before the answer leaves, so whoever reads the answer can read the line.
            if status < 500:
                _store_answered(path)

        watched = StartWatch(send, started)
        try:
            await self.app(scope, receive, watched)
        except Exception as error:
            if not is_store_down(error) or watched.started:
                raise
            code, headers, body = unavailable_answer(str(scope.get("method", "?")), path, error)
            await send_answer(send, code, body, headers)
