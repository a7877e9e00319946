"""API tokens: ``Authorization: Bearer <secret>``, matched by the SHA-256 of the secret.

The settings hold only digests, so a leaked settings file grants nothing. Every configured
digest is compared, in constant time, whatever matches first.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Sequence

from starlette.requests import Request

from jobhost.config import ApiToken

__all__ = ["TokenCheck"]


class TokenCheck:
    def __init__(self, tokens: Sequence[ApiToken]) -> None:
        self._tokens = list(tokens)

    def token_for(self, request: Request) -> ApiToken | None:
        """The token the request carries, or None (absent, malformed or unknown)."""
        header = request.headers.get("authorization", "")
        scheme, _, secret = header.partition(" ")
        if scheme.lower() != "bearer" or not secret.strip():
            return None
        digest = hashlib.sha256(secret.strip().encode()).hexdigest()
        found = None
        for token in self._tokens:
            if hmac.compare_digest(digest, token.sha256):
                found = token
        return found
