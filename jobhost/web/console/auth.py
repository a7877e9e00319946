"""Who is signed in to the dashboard, and proof that a form came from the dashboard itself: the
session cookie is HttpOnly, SameSite=Strict and signed, and carries a random CSRF token every
form posts back; a POST whose ``Origin`` is another site is refused before anything else."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import parse_qs

from starlette.requests import Request
from starlette.responses import Response

from jobhost.web.access import holder
from jobhost.web.middleware import MAX_FORM, BodyTooLarge, read_capped

__all__ = ["COOKIE", "BadForm", "Session", "SessionKeeper", "read_form", "same_origin"]

COOKIE = "jobhost_session"
_LIFETIME_SECONDS = 8 * 3600
_CLOCK_SLACK_SECONDS = 60


@dataclass(frozen=True)
class Session:
    who: str
    csrf: str
    expires: float
    role: str = "operator"
    """``operator`` (may act) or ``reader`` (signed in with a read API token: may look)."""
    version: int = 0
    """The person's session version when it started: a sign-out moves the stored one on."""


class SessionKeeper:
    """Signs, reads and checks sessions of operators (and, where reading needs a sign-in, of
    the API tokens with the read scope: ``readers``, SHA-256 to name).

    The signing key is derived from ``secret`` (``session_secret``), else from the operator
    tokens, secrets themselves. With neither, it is random, for the process: the readers'
    digests are in the settings file, and a key made from them alone would let whoever reads
    the file forge a reader's session. Any change of secret or tokens signs everyone out.
    """

    def __init__(
        self,
        tokens: Mapping[str, str],
        readers: Mapping[str, str] | None = None,
        secret: str | None = None,
    ) -> None:
        self._tokens = dict(tokens)
        self._readers = dict(readers or {})
        material = "\0".join(f"{name}={token}" for name, token in sorted(self._tokens.items()))
        material += "\0".join(f"{d}={name}" for d, name in sorted(self._readers.items()))
        if secret:
            keyed = b"jobhost-console-secret\0" + secret.encode() + b"\0"
        elif self._tokens:
            keyed = b"jobhost-console\0"
        else:
            keyed = b"jobhost-console-random\0" + secrets.token_bytes(32)
        self._key = hashlib.sha256(keyed + material.encode()).digest()

    @property
    def enabled(self) -> bool:
        return bool(self._tokens) or bool(self._readers)

    def identify(self, token: str) -> tuple[str, str] | None:
        return holder(token, self._tokens, self._readers)

    def start(
        self,
        response: Response,
        who: str,
        *,
        secure: bool,
        role: str = "operator",
        version: int = 0,
    ) -> Session:
        expires = time.time() + _LIFETIME_SECONDS
        session = Session(who, secrets.token_urlsafe(24), expires, role, version)
        payload = json.dumps(
            {"who": who, "csrf": session.csrf, "exp": expires, "role": role, "ver": version}
        )
        # Unpadded, so the cookie value needs no quoting.
        value = base64.urlsafe_b64encode(payload.encode()).decode().rstrip("=")
        response.set_cookie(
            COOKIE,
            f"{value}.{self._sign(value)}",
            max_age=_LIFETIME_SECONDS,
            httponly=True,
            samesite="strict",
            secure=secure,
            path="/",
        )
        return session

    def end(self, response: Response) -> None:
        response.delete_cookie(COOKIE, path="/")

    def read(self, request: Request) -> Session | None:
        raw = request.cookies.get(COOKIE)
        if not raw or "." not in raw or not self.enabled:
            return None
        value, _, signature = raw.rpartition(".")
        if not hmac.compare_digest(signature, self._sign(value)):
            return None
        try:
            data = json.loads(base64.urlsafe_b64decode(value + "=" * (-len(value) % 4)))
            session = Session(
                str(data["who"]),
                str(data["csrf"]),
                float(data["exp"]),
                str(data.get("role", "operator")),
                int(data.get("ver", 0)),
            )
        except (ValueError, KeyError, TypeError):
            return None
        now = time.time()
        # The signature says the server made the cookie; the bound says no session outlives
        # its lifetime whatever it claims (a minute allowed for clocks apart across replicas).
        if not now <= session.expires <= now + _LIFETIME_SECONDS + _CLOCK_SLACK_SECONDS:
            return None
        known = (
            session.who in self._tokens
            if session.role == "operator"
            else session.role == "reader" and session.who in self._readers.values()
        )
        return session if known else None

    def _sign(self, value: str) -> str:
        return hmac.new(self._key, value.encode(), hashlib.sha256).hexdigest()


def same_origin(request: Request) -> bool:
    origin = request.headers.get("origin")
    if origin is None or origin == "null":
        return origin is None
    host = request.headers.get("host", "")
    # Scheme and host both: http://host is another origin than https://host.
    return origin == f"{request.url.scheme}://{host}"


class BadForm(Exception):
    def __init__(self, status: int, why: str) -> None:
        super().__init__(why)
        self.status = status


async def read_form(request: Request) -> dict[str, str]:
    """An urlencoded form body, the first value of each field; :class:`BadForm` 413 past
    :data:`MAX_FORM` bytes, 400 for a field holding NUL (no store can keep it)."""
    try:
        body = await read_capped(request, MAX_FORM)
    except BodyTooLarge:
        raise BadForm(413, f"the form is larger than {MAX_FORM} bytes") from None
    parsed = parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True)
    form = {key: values[0] for key, values in parsed.items()}
    for key, value in form.items():
        if "\x00" in key or "\x00" in value:
            raise BadForm(400, "a form field must not contain a NUL character (%00)")
    return form
