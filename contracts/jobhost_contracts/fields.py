"""Checks of the values every module's section keeps needing: each takes what the settings file
holds and returns it typed, or raises ``ValueError`` saying what is allowed, for a hand-written
check or a pydantic ``BeforeValidator`` alike (docs/operations/writing-a-module.md).
"""

from __future__ import annotations

import re
from datetime import timedelta
from urllib.parse import urlsplit

from jobhost_contracts.durations import parse_duration

__all__ = [
    "env_name",
    "flag",
    "http_url",
    "non_empty_text",
    "non_negative_duration",
    "positive_duration",
    "safe_url",
]

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def positive_duration(value: object) -> timedelta | None:
    """``"30s"``, ``"1h30m"``, a number of seconds or a ``timedelta``, greater than zero; None
    stays None, so an optional field takes the same check."""
    if value is None:
        return None
    parsed = parse_duration(value)
    if parsed <= timedelta(0):
        raise ValueError("must be a positive duration, e.g. '30s' or '24h'")
    return parsed


def non_negative_duration(value: object) -> timedelta | None:
    """As :func:`positive_duration`, zero allowed (``min_age = 0``: no wait)."""
    if value is None:
        return None
    parsed = parse_duration(value)
    if parsed < timedelta(0):
        raise ValueError("must not be negative, e.g. '0s' or '24h'")
    return parsed


def http_url(value: object) -> str:
    """An ``http://`` or ``https://`` URL with a host (and a port 1-65535, if any)."""
    allowed = "required, an http:// or https:// URL with a host"
    if not isinstance(value, str):
        raise ValueError(allowed)
    parts = urlsplit(value)
    if parts.scheme not in {"http", "https"} or not parts.hostname:
        raise ValueError(allowed)
    try:
        parts.port  # noqa: B018 (urllib checks the port only when it is read)
    except ValueError:
        raise ValueError("has a port that is not a number 1-65535") from None
    return value


def env_name(value: object) -> str:
    """The name of an environment variable (letters, digits, ``_``): a secret is never a settings
    value; the job reads the variable when it runs, so no file, report or log holds it."""
    if not isinstance(value, str) or not _ENV_NAME.fullmatch(value):
        raise ValueError(
            "must name an environment variable (letters, digits, _), e.g. 'PARTNER_TOKEN'"
        )
    return value


def non_empty_text(value: object) -> str:
    """A string with more than blanks in it."""
    if not isinstance(value, str) or not value.strip():
        raise ValueError("must be a non-empty string")
    return value


def flag(value: object) -> bool:
    """``true`` or ``false``, nothing else: ``1`` or ``"yes"`` is more likely a mistake."""
    if not isinstance(value, bool):
        raise ValueError("must be true or false")
    return value


def safe_url(url: str) -> str:
    """``url`` as it may be shown: user, password or token replaced by ``***``, and the query
    (which often carries a key) too: ``https://***@api.example/v1?***``."""
    parts = urlsplit(url)
    host = parts.netloc.rpartition("@")[2]
    user = "***@" if "@" in parts.netloc else ""
    query = "?***" if parts.query else ""
    return f"{parts.scheme}://{user}{host}{parts.path}{query}"
