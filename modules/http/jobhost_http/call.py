"""One scheduled HTTP call, with the standard library only. Secret header values are read at
call time and scrubbed from what is logged or stored: the server may echo them back."""

from __future__ import annotations

import contextlib
import http.client
import os
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass

from jobhost_contracts import JobContext, hide_secrets, safe_url
from returns.result import Failure, Result, Success

from jobhost_http.settings import IDEMPOTENCY_HEADER, HttpJobSettings

__all__ = [
    "BODY_START",
    "CallFailed",
    "CallResult",
    "HttpCall",
    "HttpCallError",
    "MissingSecret",
    "UnexpectedStatus",
]

BODY_START = 200
"""How much of an unexpected response's body a Failure quotes."""

_READ_LIMIT = 4096
_USER_AGENT = "jobhost-http/0.1"


@dataclass(frozen=True)
class CallResult:
    status: int
    elapsed_ms: int


class HttpCallError(Exception):
    """A call that did not get an expected answer; returned as a ``Failure``, never raised."""


class MissingSecret(HttpCallError):
    def __init__(self, job: str, variable: str, header: str) -> None:
        super().__init__(
            f"{job}: environment variable {variable} (for header {header}) is not set; "
            "no request was sent"
        )


class UnexpectedStatus(HttpCallError):
    """An answer with a status the job did not expect; ``body_start`` is None where the body
    is not quoted (then ``size`` is its length in bytes, as read)."""

    def __init__(
        self, job: str, target: str, status: int, body_start: str | None = None, size: str = ""
    ) -> None:
        shown = f"{body_start!r}" if body_start is not None else f"{size} bytes (body not shown)"
        super().__init__(f"{job}: {target} answered {status}: {shown}")
        self.status = status
        self.body_start = body_start


class CallFailed(HttpCallError):
    """No HTTP answer: timed out, refused, reset, unresolvable host, TLS failure."""

    def __init__(self, job: str, target: str, reason: str) -> None:
        super().__init__(f"{job}: {target} failed: {reason}")


class HttpCall:
    """The executor of one entry. ``environ`` (default ``os.environ``, read at every call) holds
    the ``secret_headers`` variables. ``quote_body``: whether a Failure quotes the start of an
    unexpected answer's body; None (a runtime job, whose failures every ``read`` token sees):
    only when ``[modules.http]`` sets ``runtime_response_body = true``."""

    def __init__(
        self,
        job: HttpJobSettings,
        environ: Mapping[str, str] | None = None,
        *,
        quote_body: bool | None = True,
    ) -> None:
        self._job = job
        self._environ = environ
        self._quote_body = quote_body
        # Redirects are not followed: urllib would forward our headers, secrets included, to
        # wherever the Location points. A 3xx is an answer like any other.
        self._opener = urllib.request.build_opener(_NoRedirects())

    def __repr__(self) -> str:
        return f"HttpCall({self._job!r})"

    def execute(self, context: JobContext) -> Result[CallResult, HttpCallError]:
        job = self._job
        target = f"{job.method} {safe_url(job.url)}"
        environ = os.environ if self._environ is None else self._environ
        headers = {"User-Agent": _USER_AGENT, **job.headers}
        secrets: list[str] = []
        for header, variable in job.secret_headers.items():
            value = environ.get(variable)
            if value is None:
                return self._failed(context, MissingSecret(job.name, variable, header))
            headers[header] = value
            secrets.append(value)
        headers[IDEMPOTENCY_HEADER] = context.idempotency_key
        request = urllib.request.Request(
            job.url,
            data=None if job.body is None else job.body.encode("utf-8"),
            headers=headers,
            method=job.method,
        )
        context.cancellation.raise_if_cancelled()
        started = time.monotonic()
        try:
            with self._opener.open(request, timeout=job.timeout.total_seconds()) as response:
                status = int(response.status)
                body = response.read(_READ_LIMIT)
        except urllib.error.HTTPError as error:
            status, body = error.code, b""
            with contextlib.suppress(OSError, http.client.HTTPException):
                body = error.read(_READ_LIMIT)
            error.close()
        except urllib.error.URLError as error:
            return self._failed(context, CallFailed(job.name, target, _reason(error.reason, job)))
        except (OSError, http.client.HTTPException) as error:
            return self._failed(context, CallFailed(job.name, target, _reason(error, job)))
        elapsed_ms = round((time.monotonic() - started) * 1000)
        if not job.expects(status):
            quote = self._quote_body
            if quote is None:
                quote = context.config.get("runtime_response_body") is True
            if not quote:
                size = f"{len(body)}+" if len(body) >= _READ_LIMIT else str(len(body))
                return self._failed(context, UnexpectedStatus(job.name, target, status, size=size))
            start = hide_secrets(body.decode("utf-8", "replace"), secrets)[:BODY_START]
            return self._failed(context, UnexpectedStatus(job.name, target, status, start))
        context.logger.info("%s answered %d in %d ms", target, status, elapsed_ms)
        return Success(CallResult(status, elapsed_ms))

    def _failed(
        self, context: JobContext, error: HttpCallError
    ) -> Result[CallResult, HttpCallError]:
        context.logger.warning("%s", error)
        return Failure(error)


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None


def _reason(reason: object, job: HttpJobSettings) -> str:
    if isinstance(reason, TimeoutError):
        return f"timed out after {job.timeout.total_seconds():g}s"
    if isinstance(reason, ConnectionRefusedError):
        return "connection refused (is anything listening there?)"
    text = str(reason) or type(reason).__name__
    return f"{type(reason).__name__}: {text}" if isinstance(reason, BaseException) else text
