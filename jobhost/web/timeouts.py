"""A bound on how long one request may take, as ASGI middleware."""

from __future__ import annotations

import logging

import anyio
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from jobhost.web.raw_answers import StartWatch

__all__ = ["RequestTimeout"]

_log = logging.getLogger("jobhost.http")


class RequestTimeout:
    """Answer 504 to a request that has not answered within ``seconds``.

    Work on a worker thread is abandoned, not stopped (threads cannot be); its result is dropped.
    A response that already started cannot be replaced, so it is cut off instead.
    """

    def __init__(self, app: ASGIApp, seconds: float) -> None:
        self.app = app
        self.seconds = seconds

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        watched = StartWatch(send)
        try:
            with anyio.fail_after(self.seconds):
                await self.app(scope, receive, watched)
        except TimeoutError:
            _log.warning("HTTP %s timed out after %gs", scope.get("path"), self.seconds)
            if watched.started:
                return
            body = {"error": f"the request took longer than {self.seconds:g}s"}
            if scope.get("method") not in {"GET", "HEAD", "OPTIONS"}:
                # Its work goes on in a thread that cannot be stopped, and may still commit.
                body["error"] += (
                    "; the change may or may not be made: read the resource (a job's ETag, its "
                    "changes) before retrying"
                )
            await JSONResponse(body, 504)(scope, receive, send)
