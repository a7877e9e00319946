"""Who may read what over HTTP, and a brake on guessing credentials.

``web_read_access = "token"`` puts ``/report`` behind a bearer token (an API token with the
``read`` scope, or an operator token), and ``metrics_access = "token"`` does the same for
``/metrics``; ``/healthz`` and ``/readyz`` always answer. :class:`GuessBrake` counts wrong
credentials per client address (sign-in, API, these endpoints): past the limit within the window
the address is answered 429 with ``Retry-After`` until the window has passed, and every wrong
credential adds to the ``jobhost.http.refused_credentials`` counter.
"""

from __future__ import annotations

import hashlib
import hmac
import math
import threading
import time
from collections import deque
from collections.abc import Callable

from opentelemetry import metrics
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from jobhost.config import Settings

__all__ = ["GUESS_LIMIT", "GUESS_WINDOW_SECONDS", "GuessBrake", "ReadAccess", "client_address"]

GUESS_LIMIT = 10
"""Wrong credentials one client address may send within :data:`GUESS_WINDOW_SECONDS`."""
GUESS_WINDOW_SECONDS = 60.0
_ADDRESSES_KEPT = 10_000


def client_address(request: Request) -> str:
    return request.client.host if request.client is not None else "-"


class GuessBrake:
    """Wrong credentials per client address in a sliding window (thread-safe, bounded)."""

    def __init__(
        self,
        limit: int = GUESS_LIMIT,
        window: float = GUESS_WINDOW_SECONDS,
        clock: Callable[[], float] = time.monotonic,
        meter: metrics.Meter | None = None,
    ) -> None:
        self._limit = limit
        self._window = window
        self._clock = clock
        self._lock = threading.Lock()
        self._wrong: dict[str, deque[float]] = {}
        self._counter = (meter or metrics.get_meter("jobhost")).create_counter(
            "jobhost.http.refused_credentials",
            unit="{attempt}",
            description="Wrong tokens or sign-ins over HTTP, by surface",
        )

    def wait_for(self, address: str) -> int | None:
        """Seconds ``address`` must wait before its next attempt, or None when it may try."""
        now = self._clock()
        with self._lock:
            times = self._wrong.get(address)
            if times is None:
                return None
            while times and times[0] <= now - self._window:
                times.popleft()
            if not times:
                del self._wrong[address]
                return None
            if len(times) < self._limit:
                return None
            return max(1, math.ceil(times[0] + self._window - now))

    def wrong(self, address: str, surface: str) -> None:
        """Count one wrong credential from ``address`` on ``surface`` (api, signin, ...)."""
        self._counter.add(1, {"surface": surface})
        now = self._clock()
        with self._lock:
            if address not in self._wrong and len(self._wrong) >= _ADDRESSES_KEPT:
                self._wrong.clear()  # bounded: an address flood forgets, never grows
            times = self._wrong.setdefault(address, deque())
            times.append(now)
            while len(times) > self._limit:
                times.popleft()

    def too_many(self, address: str) -> Response | None:
        """A 429 answer while ``address`` must wait, else None."""
        wait = self.wait_for(address)
        if wait is None:
            return None
        return JSONResponse(
            {"error": f"too many wrong credentials from {address}; try again in {wait}s"},
            429,
            headers={"Retry-After": str(wait)},
        )


class ReadAccess:
    """The read switches of one set of settings, and the tokens that open them."""

    def __init__(self, settings: Settings, brake: GuessBrake | None = None) -> None:
        self.report_needs_token = settings.web_read_access == "token"
        self.metrics_need_token = settings.metrics_access == "token"
        self.brake = brake or GuessBrake()
        self._operators = dict(settings.operator_tokens)
        self._readers = {
            token.sha256: token.name for token in settings.api_tokens if "read" in token.scopes
        }

    def reader(self, secret: str) -> str | None:
        """Who ``secret`` is: an operator, or an API token with the read scope; None if no one.
        Every candidate is compared, in constant time."""
        found = None
        for name, expected in self._operators.items():
            if hmac.compare_digest(secret.encode(), expected.encode()):
                found = name
        digest = hashlib.sha256(secret.encode()).hexdigest()
        for sha256, name in self._readers.items():
            if hmac.compare_digest(digest, sha256):
                found = name
        return found

    def refusal(self, request: Request, surface: str) -> Response | None:
        """None when ``request`` may read ``surface``; else 401 (or 429 while braked)."""
        address = client_address(request)
        braked = self.brake.too_many(address)
        if braked is not None:
            return braked
        scheme, _, secret = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() == "bearer" and secret.strip():
            if self.reader(secret.strip()) is not None:
                return None
            self.brake.wrong(address, surface)
        return JSONResponse(
            {
                "error": f"{surface} needs a token: send Authorization: Bearer <secret> with an "
                "API token that has the read scope, or an operator token"
            },
            401,
            headers={"WWW-Authenticate": 'Bearer realm="jobhost"'},
        )
