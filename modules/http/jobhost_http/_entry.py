"""Typed reads of one ``[[modules.http.jobs]]`` entry, each refusal naming the entry and key."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from datetime import timedelta
from enum import StrEnum
from typing import Any, TypeVar
from urllib.parse import urlsplit

from jobhost_contracts import parse_duration

__all__ = ["IDEMPOTENCY_HEADER", "EntryReader", "env_name", "given", "header_value", "safe_url"]

IDEMPOTENCY_HEADER = "Idempotency-Key"
"""Set by every call from the run's idempotency key; a job may not set it itself."""

_Choice = TypeVar("_Choice", bound=StrEnum)
_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def safe_url(url: str) -> str:
    """``url`` without its password and query string, which may carry credentials."""
    parts = urlsplit(url)
    host = parts.netloc.rpartition("@")[2]
    user = f"{parts.username}:***@" if parts.password else ""
    query = "?***" if parts.query else ""
    return f"{parts.scheme}://{user}{host}{parts.path}{query}"


class EntryReader:
    """Reads one entry; ``where`` names it in every refusal (``modules.http.jobs[0] 'ping'``)."""

    def __init__(self, where: str, entry: Mapping[str, Any]) -> None:
        self.where = where
        self.entry = entry

    def refuse(self, key: str, value: object, allowed: str) -> ValueError:
        return ValueError(f"{self.where}: {key} = {value!r}: {allowed}")

    def text(self, key: str, default: str) -> str:
        value = self.entry.get(key, default)
        if not isinstance(value, str) or not value.strip():
            raise self.refuse(key, value, "must be a non-empty string")
        return value

    def optional_text(self, key: str, *, allow_empty: bool = False) -> str | None:
        value = self.entry.get(key)
        if value is None:
            return None
        if not isinstance(value, str) or (not allow_empty and not value.strip()):
            raise self.refuse(key, value, "must be a non-empty string")
        return value

    def flag(self, key: str, *, default: bool) -> bool:
        value = self.entry.get(key, default)
        if not isinstance(value, bool):
            raise self.refuse(key, value, "must be true or false")
        return value

    def count(self, key: str, default: int) -> int:
        value = self.entry.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise self.refuse(key, value, "must be a whole number of at least 1")
        return value

    def duration(self, key: str, default: timedelta | None) -> timedelta | None:
        value = self.entry.get(key)
        if value is None:
            return default
        try:
            duration = parse_duration(value)
        except ValueError as error:
            raise self.refuse(key, value, str(error)) from None
        if duration <= timedelta(0):
            raise self.refuse(key, value, "must be a positive duration, e.g. '30s'")
        return duration

    def url(self) -> str:
        value = self.entry.get("url")
        allowed = "required, an http:// or https:// URL with a host"
        if not isinstance(value, str):
            raise self.refuse("url", value, allowed)
        parts = urlsplit(value)
        if parts.scheme not in {"http", "https"} or not parts.hostname:
            raise self.refuse("url", safe_url(value), allowed)
        try:
            parts.port  # noqa: B018 (urllib checks the port only when it is read)
        except ValueError:
            raise self.refuse(
                "url", safe_url(value), "has a port that is not a number 1-65535"
            ) from None
        return value

    def method(self) -> str:
        value = self.entry.get("method", "GET")
        if not isinstance(value, str) or value.upper() not in _METHODS:
            raise self.refuse("method", value, f"must be one of {', '.join(sorted(_METHODS))}")
        return value.upper()

    def headers(self, key: str, check: Callable[[object], str | None]) -> dict[str, str]:
        table = self.entry.get(key, {})
        if not isinstance(table, Mapping):
            raise self.refuse(key, table, "must be a table of header name = value")
        result: dict[str, str] = {}
        for name, value in table.items():
            if not isinstance(name, str) or not _TOKEN.fullmatch(name):
                raise self.refuse(key, name, "is not a valid HTTP header name")
            if name.lower() == IDEMPOTENCY_HEADER.lower():
                raise ValueError(
                    f"{self.where}: {key} sets {name!r}; every call sends "
                    f"{IDEMPOTENCY_HEADER} itself, from the run's occurrence, so that a retry "
                    "is recognised as the same call: remove it"
                )
            problem = check(value)
            if problem is not None:
                # The header's name only: a misplaced credential must not reach the log.
                raise ValueError(f"{self.where}: {key}.{name}: {problem}")
            result[name] = value
        return result

    def statuses(self) -> frozenset[int] | None:
        value = self.entry.get("expect_status")
        if value is None:
            return None
        items = list(value) if isinstance(value, list | tuple) else [value]
        if not items or any(
            isinstance(item, bool) or not isinstance(item, int) or not 100 <= item <= 599
            for item in items
        ):
            raise self.refuse(
                "expect_status", value, "must be an HTTP status (100-599) or a list of them"
            )
        return frozenset(items)

    def choice(self, key: str, kind: type[_Choice], default: _Choice) -> _Choice:
        value = self.entry.get(key, default.value)
        try:
            return kind(value)
        except ValueError:
            allowed = "|".join(member.value for member in kind)
            raise self.refuse(key, value, f"must be one of {allowed}") from None


def given(value: timedelta | None) -> timedelta:
    # duration() returns None only when asked to default to None.
    assert value is not None
    return value


def header_value(value: object) -> str | None:
    if not isinstance(value, str):
        return f"must be a string, not {type(value).__name__}"
    if "\r" in value or "\n" in value:
        return "must not contain a line break"
    return None


def env_name(value: object) -> str | None:
    if not isinstance(value, str) or not _ENV_NAME.fullmatch(value):
        return f"must name an environment variable (letters, digits, _), got {value!r}"
    return None
