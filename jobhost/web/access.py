"""Who may read what over HTTP, and a brake on guessing credentials.

``web_read_access = "token"`` puts ``/report`` behind a bearer token (an API token with the
``read`` scope, or an operator token), ``metrics_access = "token"`` ``/metrics``.
:class:`GuessBrake` counts wrong credentials through the store, so every replica counts the
same guesses; past a limit within the minute, a wrong one is answered 429 until the minute is
over. A right one is never braked: a person who shares an address with a guesser is let in.
"""

from __future__ import annotations

import hashlib
import hmac
import math
import time
from collections.abc import Callable, Mapping

from opentelemetry import metrics
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from jobhost.config import Settings
from jobhost.records import GUESS_KEY_LENGTH
from jobhost.store import Store
from jobhost.web.middleware import blocking

__all__ = [
    "GUESS_LIMIT",
    "GuessBrake",
    "ReadAccess",
    "api_secret",
    "bearer_secret",
    "client_address",
    "holder",
    "read_tokens",
]

GUESS_LIMIT = 10
"""Wrong credentials one client address may send within a minute, on every replica together."""
GUESS_LIMIT_ALL = 100
"""The same for all addresses together: a guesser who rotates addresses is bounded too."""
GUESS_WINDOW_SECONDS = 60
_EVERYONE = "*"


def client_address(request: Request) -> str:
    return request.client.host if request.client is not None else "-"


def bearer_secret(request: Request) -> str | None:
    """The secret of ``Authorization: Bearer <secret>``; None when absent or malformed."""
    scheme, _, secret = request.headers.get("authorization", "").partition(" ")
    return secret.strip() if scheme.lower() == "bearer" and secret.strip() else None


def read_tokens(settings: Settings) -> dict[str, str]:
    return {token.sha256: token.name for token in settings.api_tokens if "read" in token.scopes}


def api_secret(secret: str, settings: Settings) -> bool:
    """Whether ``secret`` is an API token's, whatever its scopes: a right secret, never a guess."""
    digest = hashlib.sha256(secret.encode()).hexdigest()
    return any([hmac.compare_digest(digest, token.sha256) for token in settings.api_tokens])


def holder(
    secret: str, operators: Mapping[str, str], readers: Mapping[str, str]
) -> tuple[str, str] | None:
    """(name, ``operator``) for one of ``operators`` (name: token), (name, ``reader``) for one
    of ``readers`` (SHA-256: name). Every candidate is compared, in constant time."""
    given, digest = secret.encode(), hashlib.sha256(secret.encode()).hexdigest()
    operator = [n for n, token in operators.items() if hmac.compare_digest(given, token.encode())]
    reader = [name for sha256, name in readers.items() if hmac.compare_digest(digest, sha256)]
    if operator:
        return operator[-1], "operator"
    return (reader[-1], "reader") if reader else None


class GuessBrake:
    """Wrong credentials per client address and in all, per minute, counted in the store."""

    def __init__(
        self,
        store: Store,
        *,
        limit: int = GUESS_LIMIT,
        limit_all: int = GUESS_LIMIT_ALL,
        clock: Callable[[], float] = time.time,
        meter: metrics.Meter | None = None,
    ) -> None:
        self._store = store
        self._limit = limit
        self._limit_all = limit_all
        self._clock = clock
        self._purged = 0
        self._counter = (meter or metrics.get_meter("jobhost")).create_counter(
            "jobhost.http.refused_credentials",
            unit="{attempt}",
            description="Wrong tokens or sign-ins over HTTP, by surface",
        )

    def wrong(self, address: str, surface: str) -> int | None:
        """The seconds to wait when this wrong credential was one too many; reads the store."""
        self._counter.add(1, {"surface": surface})
        now = self._clock()
        minute = int(now // GUESS_WINDOW_SECONDS)
        key = f"address:{address}"[:GUESS_KEY_LENGTH]
        # Old windows go once a minute per replica, and only while someone guesses wrong.
        purge = minute > self._purged
        counts = self._store.count_wrong_guess([key, _EVERYONE], minute, purge=purge)
        self._purged = max(self._purged, minute)
        if counts[key] <= self._limit and counts[_EVERYONE] <= self._limit_all:
            return None
        return max(1, math.ceil((minute + 1) * GUESS_WINDOW_SECONDS - now))

    async def refused(self, address: str, surface: str) -> int | None:
        return await blocking(lambda: self.wrong(address, surface))


class ReadAccess:
    def __init__(self, settings: Settings, brake: GuessBrake) -> None:
        self.report_needs_token = settings.web_read_access == "token"
        self.metrics_need_token = settings.metrics_access == "token"
        self.brake = brake
        self._operators = dict(settings.operator_tokens)
        self._readers = read_tokens(settings)
        self._settings = settings

    async def refusal(self, request: Request, surface: str) -> Response | None:
        """None when ``request`` may read ``surface``; else 401 (or 429 while braked)."""
        secret = bearer_secret(request)
        if secret is not None:
            if holder(secret, self._operators, self._readers) is not None:
                return None
            address = client_address(request)
            guess = not api_secret(secret, self._settings)
            if guess and (wait := await self.brake.refused(address, surface)) is not None:
                return JSONResponse(
                    {"error": f"too many wrong credentials; try again in {wait}s"},
                    429,
                    headers={"Retry-After": str(wait)},
                )
        return JSONResponse(
            {
                "error": f"{surface} needs a token: send Authorization: Bearer <secret> with an "
                "API token that has the read scope, or an operator token"
            },
            401,
            headers={"WWW-Authenticate": 'Bearer realm="jobhost"'},
        )
