"""The kinds of value a setting takes: a field's type says what it accepts, and its check says
what is wrong and what to write instead (API tokens, operator tokens and ``[jobs."NAME"]``
overrides included)."""

from __future__ import annotations

import ipaddress
import re
from datetime import timedelta
from typing import Annotated, Literal
from urllib.parse import urlsplit

from jobhost_contracts import DstGap, DstRepeat, parse_duration
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    SecretStr,
    field_validator,
)

__all__ = [
    "GROUP_NAME",
    "MAX_DURATION",
    "ApiToken",
    "ApiTokens",
    "ClockOffset",
    "DashboardUrl",
    "DatabaseUrl",
    "Grace",
    "GroupLimits",
    "HostId",
    "JobOverride",
    "ListenAddress",
    "LogLevel",
    "OperatorTokens",
    "PositiveDuration",
    "PostgresUrl",
    "ProxyAddress",
    "SessionSecret",
    "StoreTimeout",
    "WholeNumber",
    "is_loopback",
    "split_listen_address",
]

# Longer durations overflow date arithmetic long before they mean anything: always a typo.
MAX_DURATION = timedelta(days=365)

GROUP_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]{0,99}$")

_LISTEN = re.compile(r"^(?P<host>[^\s:]*|\[[0-9a-fA-F:]+\]):(?P<port>\d{1,5})$")
_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_MIN_TOKEN = 16


def _whole_number(value: object) -> object:
    # pydantic takes true for 1; a flag where a count belongs is a mistake worth naming.
    if isinstance(value, bool):
        raise ValueError("must be a whole number, not true or false")
    return value


def _positive(value: timedelta) -> timedelta:
    if value <= timedelta(0):
        raise ValueError("must be positive: a duration greater than 0, e.g. '30s'")
    return _not_negative(value)


def _not_negative(value: timedelta) -> timedelta:
    if value < timedelta(0):
        raise ValueError("must not be negative, e.g. '30m' (0s: no grace)")
    if value > MAX_DURATION:
        raise ValueError("must be at most 365d")
    return value


def _store_timeout(value: timedelta) -> timedelta:
    if value < timedelta(0) or value > timedelta(hours=1):
        raise ValueError("must be between 0 (off) and 1h, e.g. '10s'")
    return value


def _small_offset(value: timedelta) -> timedelta:
    if abs(value) > timedelta(days=1):
        raise ValueError("must be within one day either way, e.g. '20s' or '-20s'")
    return value


def _host_id(value: str | None) -> str | None:
    if value == "":
        return None  # JOBHOST_HOST_ID= in an environment file means "not set"
    if value is not None and (not value.strip() or len(value) > 200):
        raise ValueError("must be 1 to 200 characters, or unset for a generated id")
    return value


def _listen_address(value: str | None) -> str | None:
    if not value:
        return None
    split_listen_address(value)
    return value


def _level(value: str) -> str:
    upper = value.upper()
    if upper not in _LEVELS:
        raise ValueError("must be one of DEBUG, INFO, WARNING, ERROR")
    return upper


def _database_url(value: str) -> str:
    backend = _backend(value)
    if backend is None:
        raise ValueError(
            "is not a database URL; use e.g. 'sqlite:///jobhost.db' or "
            "'postgresql+psycopg://user@host/db'"
        )
    # postgres:// is how PaaS and libpq tools write it; the engine gives it psycopg 3 too.
    if backend not in {"sqlite", "postgresql", "postgres"}:
        raise ValueError("must be an SQLite or PostgreSQL URL")
    return value


def _postgres_url(value: str | None) -> str | None:
    if not value:
        return None
    if _backend(value) != "postgresql":
        raise ValueError(
            "must be a PostgreSQL URL, e.g. 'postgresql+psycopg://user@db.internal:5432/db'"
        )
    return value


def _backend(value: str) -> str | None:
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        return make_url(value).get_backend_name()
    except ArgumentError:
        return None


def _session_secret(value: SecretStr | None) -> SecretStr | None:
    if value is None or not value.get_secret_value():
        return None  # JOBHOST_SESSION_SECRET= means "not set"
    if len(value.get_secret_value()) < 32:
        raise ValueError(
            "must be at least 32 characters, e.g. the output of "
            "`python -c 'import secrets; print(secrets.token_urlsafe(32))'`"
        )
    return value


def _dashboard_url(value: str | None) -> str | None:
    if not value:
        return None
    parts = urlsplit(value)
    if parts.scheme not in {"http", "https"} or not parts.netloc or parts.query or parts.fragment:
        raise ValueError(
            "must be the dashboard's http(s) URL without a query, e.g. "
            "'https://jobhost.example.com' or 'https://ops.example.com/jobhost'"
        )
    if any(c.isspace() or c in "\"'{}<>" for c in value) or len(value) > 500:
        raise ValueError("must be a URL of at most 500 characters without spaces or quotes")
    # Alert templates append /jobs/NAME: a trailing slash would double it.
    return value.rstrip("/")


def _group_names(value: dict[str, int]) -> dict[str, int]:
    for name in value:
        if not GROUP_NAME.fullmatch(name):
            raise ValueError(
                f"group name {name!r} must be 1 to 100 lower-case letters, digits, '.', "
                "'_' or '-', starting with a letter or digit, e.g. warehouse = 2"
            )
    return value


def _proxy_address(value: str) -> str:
    try:
        return str(ipaddress.ip_network(value.strip(), strict=False))
    except ValueError:
        raise ValueError(
            f"{value!r} is not an IP address or network: give e.g. '10.0.0.5' or '10.0.0.0/8'"
        ) from None


Duration = Annotated[timedelta, BeforeValidator(parse_duration)]
PositiveDuration = Annotated[Duration, AfterValidator(_positive)]
Grace = Annotated[Duration, AfterValidator(_not_negative)]
StoreTimeout = Annotated[Duration, AfterValidator(_store_timeout)]
ClockOffset = Annotated[Duration, AfterValidator(_small_offset)]
WholeNumber = Annotated[int, BeforeValidator(_whole_number)]
_Slots = Annotated[WholeNumber, Field(ge=1, le=100_000)]
GroupLimits = Annotated[dict[str, _Slots], AfterValidator(_group_names)]
HostId = Annotated[str | None, AfterValidator(_host_id)]
DashboardUrl = Annotated[str | None, AfterValidator(_dashboard_url)]
ListenAddress = Annotated[str | None, AfterValidator(_listen_address)]
LogLevel = Annotated[str, AfterValidator(_level)]
DatabaseUrl = Annotated[str, AfterValidator(_database_url)]
PostgresUrl = Annotated[str | None, AfterValidator(_postgres_url)]
SessionSecret = Annotated[SecretStr | None, AfterValidator(_session_secret)]
ProxyAddress = Annotated[str, AfterValidator(_proxy_address)]


def is_loopback(host: str) -> bool:
    """True for a loopback address (127.0.0.0/8, ::1) or the name localhost."""
    if host.lower() in ("localhost", "localhost."):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def split_listen_address(value: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:PORT`` for IPv6; an empty host is every address) as a pair;
    :class:`ValueError` saying the expected form otherwise."""
    match = _LISTEN.match(value)
    if not match or not 0 < int(match["port"]) < 65536:
        raise ValueError("must be HOST:PORT, e.g. '0.0.0.0:8080' or '127.0.0.1:9100'")
    return match["host"].strip("[]") or "0.0.0.0", int(match["port"])


class JobOverride(BaseModel):
    """A deployment's change to one job, under ``[jobs."module.job-name"]``: each field is the
    :class:`jobhost_contracts.JobPolicies` policy of its name, None keeping the declaration's."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool | None = None
    cron: str | None = None
    interval: Duration | None = None
    timezone: str | None = None
    dst_gap: DstGap | None = None
    dst_repeat: DstRepeat | None = None
    concurrency_group: str | None = None


ApiScope = Literal["read", "write", "trigger"]


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
OperatorTokens = Annotated[dict[str, str], AfterValidator(_operator_tokens)]
