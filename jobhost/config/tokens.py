"""Who may use the HTTP surfaces: the API's tokens (by the SHA-256 of their secret) and the
dashboard's operator tokens."""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator

__all__ = ["ApiScope", "ApiToken", "ApiTokens", "OperatorTokens"]

ApiScope = Literal["read", "write", "trigger"]
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_MIN_TOKEN = 16


class ApiToken(BaseModel):
    """One ``[[api_tokens]]`` entry: who, the SHA-256 of the secret, and what it may do."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1, max_length=200)
    sha256: str
    scopes: list[ApiScope] = Field(min_length=1)

    @field_validator("sha256")
    @classmethod
    def _digest(cls, value: str) -> str:
        digest = value.strip().lower()
        if not _SHA256.fullmatch(digest):
            raise ValueError(
                "must be the SHA-256 of the secret as 64 hex digits, e.g. the first word of "
                '`printf %s "$SECRET" | sha256sum`; never the secret itself'
            )
        return digest


def _unique_api_tokens(value: list[ApiToken]) -> list[ApiToken]:
    seen: set[str] = set()
    for token in value:
        if token.name in seen:
            raise ValueError(f"two API tokens are named {token.name!r}; names are unique")
        if token.sha256 in {t.sha256 for t in value if t is not token}:
            raise ValueError(f"API token {token.name!r} has the same secret as another")
        seen.add(token.name)
    return value


def _operator_tokens(value: dict[str, str]) -> dict[str, str]:
    for name, token in value.items():
        if not name.strip():
            raise ValueError("an operator name must not be empty")
        if len(token) < _MIN_TOKEN:
            raise ValueError(
                f"the token of operator {name!r} is too short: use at least {_MIN_TOKEN} "
                "random characters (e.g. `python3 -c 'import secrets; "
                "print(secrets.token_urlsafe())'`)"
            )
    return value


ApiTokens = Annotated[list[ApiToken], AfterValidator(_unique_api_tokens)]
"""API tokens, each with a name and a secret of its own."""
OperatorTokens = Annotated[dict[str, str], AfterValidator(_operator_tokens)]
"""Operator name = secret token; the secret long enough not to be guessed."""
