"""Checks of single values of one ``[[modules.http.jobs]]`` entry, for the settings model.

Each takes what the settings file holds and returns it typed, or raises ``ValueError`` saying what
is allowed; the model names the entry, the key and the value. A refusal that must say more than
"key = value" (a header's name, never its value) is an :func:`entry_problem`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from enum import StrEnum
from typing import TypeVar

from jobhost_contracts import env_name as contract_env_name
from pydantic_core import PydanticCustomError

__all__ = [
    "ENTRY_PROBLEM",
    "IDEMPOTENCY_HEADER",
    "body",
    "choice",
    "count",
    "entry_problem",
    "env_name",
    "flag",
    "header_value",
    "headers",
    "method",
    "optional_text",
    "statuses",
    "text",
]

IDEMPOTENCY_HEADER = "Idempotency-Key"
"""Set by every call from the run's idempotency key; a job may not set it itself."""

ENTRY_PROBLEM = "entry_problem"
"""The pydantic error type of a refusal written whole, after the entry's name."""

_Choice = TypeVar("_Choice", bound=StrEnum)
_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")


def entry_problem(text: str) -> PydanticCustomError:
    # The text goes through the context: a header name may hold braces.
    return PydanticCustomError(ENTRY_PROBLEM, "{text}", {"text": text})


def text(value: object) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError("must be a non-empty string")
    return value


def optional_text(value: object) -> str | None:
    return None if value is None else text(value)


def body(value: object) -> str | None:
    """Like :func:`optional_text`, but an empty body is a body."""
    if value is None or value == "":
        return value
    return text(value)


def flag(value: object) -> bool:
    if not isinstance(value, bool):
        raise ValueError("must be true or false")
    return value


def count(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError("must be a whole number of at least 1")
    return value


def method(value: object) -> str:
    if not isinstance(value, str) or value.upper() not in _METHODS:
        raise ValueError(f"must be one of {', '.join(sorted(_METHODS))}")
    return value.upper()


def headers(key: str, check: Callable[[object], str | None]) -> Callable[[object], dict[str, str]]:
    """The check of the header table ``key``, each value checked by ``check``."""

    def checked(table: object) -> dict[str, str]:
        if not isinstance(table, Mapping):
            raise ValueError("must be a table of header name = value")
        result: dict[str, str] = {}
        for name, value in table.items():
            if not isinstance(name, str) or not _TOKEN.fullmatch(name):
                raise entry_problem(f"{key} = {name!r}: is not a valid HTTP header name")
            if name.lower() == IDEMPOTENCY_HEADER.lower():
                raise entry_problem(
                    f"{key} sets {name!r}; every call sends {IDEMPOTENCY_HEADER} itself, from "
                    "the run's occurrence, so that a retry is recognised as the same call: "
                    "remove it"
                )
            problem = check(value)
            if problem is not None:
                # The header's name only: a misplaced credential must not reach the log.
                raise entry_problem(f"{key}.{name}: {problem}")
            result[name] = value
        return result

    return checked


def statuses(value: object) -> frozenset[int] | None:
    if value is None:
        return None
    items = list(value) if isinstance(value, list | tuple) else [value]
    found = [
        item
        for item in items
        if isinstance(item, int) and not isinstance(item, bool) and 100 <= item <= 599
    ]
    if not items or len(found) < len(items):
        raise ValueError("must be an HTTP status (100-599) or a list of them")
    return frozenset(found)


def choice(kind: type[_Choice]) -> Callable[[object], _Choice]:
    def checked(value: object) -> _Choice:
        for member in kind:
            if value == member.value:
                return member
        raise ValueError(f"must be one of {'|'.join(member.value for member in kind)}")

    return checked


def header_value(value: object) -> str | None:
    if not isinstance(value, str):
        return f"must be a string, not {type(value).__name__}"
    if "\r" in value or "\n" in value:
        return "must not contain a line break"
    return None


def env_name(value: object) -> str | None:
    """:func:`jobhost_contracts.env_name` as the header check's problem text."""
    try:
        contract_env_name(value)
    except ValueError as error:
        return f"{error}, got {value!r}"
    return None
