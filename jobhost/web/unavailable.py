"""The store is down, hung or locked: every HTTP surface answers 503, and the log says it once.

A store that fails answers at once. One that hangs would hold a request until the statement's
deadline: a request still at work after half a second has the store looked at (a trivial read,
shared by every request), about once a second while it lasts; if the store does not answer that
within a second, the request is abandoned and answered the same 503.

The answer (``application/problem+json`` with ``Retry-After``) names nothing of the error. The
log has one warning when an outage starts and one line when a request that reads the store
succeeds again, whatever the number of requests in between.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable

import anyio
from jobhost_contracts import redact_text
from starlette.types import ASGIApp, Receive, Scope, Send

from jobhost.store.engine import is_store_down
from jobhost.web.middleware import PROBES, PROBLEM_JSON, StartWatch, problem_body, send_answer

__all__ = ["StoreUnavailable", "is_store_down"]

_RETRY_AFTER_SECONDS = 5
"""What ``Retry-After`` says: about how long a store outage takes to notice it is over."""
_SUSPECT_AFTER = 0.5
_ANSWER_WITHIN = 1.0
_LOOK_EVERY = 1.0

_log = logging.getLogger("jobhost.http")
_lock = threading.Lock()
_down = False
# Requests that never read the store cannot tell that it is back.
_STORELESS = (*PROBES, "/static/")


async def _unavailable(send: Send, method: str, path: str, error: BaseException) -> None:
    """Note the outage ``error`` shows (once per outage in the log), and answer 503."""
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
        detail = f"the store is unavailable, retry in {_RETRY_AFTER_SECONDS}s"
    else:
        # The connection may have gone while the commit was under way: say so, never guess.
        detail = (
            f"the store is unavailable, retry in {_RETRY_AFTER_SECONDS}s; the change may or may "
            "not have been made: read the resource (a job's ETag, its changes) before retrying"
        )
    body = problem_body(503, "Store unavailable", detail)
    headers = {"content-type": PROBLEM_JSON, "retry-after": str(_RETRY_AFTER_SECONDS)}
    await send_answer(send, 503, json.dumps(body, indent=2).encode(), headers)


def _store_answered(path: str) -> None:
    global _down
    if not _down or path.startswith(_STORELESS):
        return
    with _lock:
        was, _down = _down, False
    if was:
        _log.info("HTTP %s: the store answers again", path[:200])


class StoreUnavailable:
    """ASGI middleware: a store error out of the application, or a store that stops answering
    while a request works, answers 503 (see the module). ``answers(within)``: whether the store
    answered a trivial read within ``within`` seconds."""

    def __init__(self, app: ASGIApp, answers: Callable[[float], bool] | None = None) -> None:
        self.app = app
        self.answers = answers
        self._looks: anyio.CapacityLimiter | None = None

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
        cause: BaseException
        try:
            if self.answers is None or path.startswith(_STORELESS):
                await self.app(scope, receive, watched)
                return
            if not await self._abandoned(scope, receive, watched) or watched.started:
                return
            cause = TimeoutError(f"no answer to a trivial read within {_ANSWER_WITHIN:g}s")
        except Exception as error:
            if not is_store_down(error) or watched.started:
                raise
            cause = error
        await _unavailable(send, str(scope.get("method", "?")), path, cause)

    async def _abandoned(self, scope: Scope, receive: Receive, watched: StartWatch) -> bool:
        """Run the request while the store is watched; whether it was abandoned to a hang."""
        failed: list[Exception] = []
        hung = False

        async def watch() -> None:
            nonlocal hung
            await anyio.sleep(_SUSPECT_AFTER)
            while not watched.started:
                if not await self._store_answers():
                    hung = True
                    group.cancel_scope.cancel()
                    return
                await anyio.sleep(_LOOK_EVERY)

        async with anyio.create_task_group() as group:
            group.start_soon(watch)
            # The request runs in this task, at once: a task of its own would start a turn of
            # the event loop later, after the server may have seen its client hang up.
            try:
                await self.app(scope, receive, watched)
            except Exception as error:  # raised outside the group, unwrapped
                failed.append(error)
            group.cancel_scope.cancel()
        if failed:
            raise failed[0]
        return hung

    async def _store_answers(self) -> bool:
        assert self.answers is not None
        if self._looks is None:  # made on the server's event loop; never behind stuck requests
            self._looks = anyio.CapacityLimiter(2)
        answered: bool = await anyio.to_thread.run_sync(
            self.answers, _ANSWER_WITHIN, abandon_on_cancel=True, limiter=self._looks
        )
        return answered
