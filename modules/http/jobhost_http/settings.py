"""``[[modules.http.jobs]]``: one scheduled HTTP call per entry, read and checked at start-up.

A refusal is a ``ModuleSettingsError`` naming the entry (``modules.http.jobs[0] 'ping'``) and the
key. ``secret_headers`` names environment variables, read at call time, never here.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Mapping
from datetime import timedelta
from enum import StrEnum
from typing import Annotated, Any, NoReturn, TypeVar

from jobhost_contracts import (
    MisfirePolicy,
    ModuleSettingsError,
    OverlapPolicy,
    RetryPolicy,
    SettingProblem,
    check_trigger,
    flag,
    http_url,
    module_settings,
    non_empty_text,
    positive_duration,
    safe_url,
)
from jobhost_contracts import env_name as contract_env_name
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, model_validator
from pydantic_core import PydanticCustomError

__all__ = ["IDEMPOTENCY_HEADER", "SECTION", "HttpJobSettings", "parse_jobs"]

SECTION = "http"

IDEMPOTENCY_HEADER = "Idempotency-Key"
"""Set by every call from the run's idempotency key; a job may not set it itself."""

# A refusal written whole after the entry's name: a header's name, never its value.
_ENTRY_PROBLEM = "entry_problem"

# Plain header values whose name says they are credentials are hidden from repr all the same.
_SENSITIVE = re.compile(r"auth|token|secret|key|cookie|password|signature", re.IGNORECASE)

_Choice = TypeVar("_Choice", bound=StrEnum)
_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")


def _entry_problem(text: str) -> PydanticCustomError:
    # Through the context: a header name may hold braces.
    return PydanticCustomError(_ENTRY_PROBLEM, "{text}", {"text": text})


def _count(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError("must be a whole number of at least 1")
    return value


def _method(value: object) -> str:
    if not isinstance(value, str) or value.upper() not in _METHODS:
        raise ValueError(f"must be one of {', '.join(sorted(_METHODS))}")
    return value.upper()


def _headers(key: str, check: Callable[[object], str | None]) -> Callable[[object], dict[str, str]]:
    def checked(table: object) -> dict[str, str]:
        if not isinstance(table, Mapping):
            raise ValueError("must be a table of header name = value")
        result: dict[str, str] = {}
        for name, value in table.items():
            if not isinstance(name, str) or not _TOKEN.fullmatch(name):
                raise _entry_problem(f"{key} = {name!r}: is not a valid HTTP header name")
            if name.lower() == IDEMPOTENCY_HEADER.lower():
                raise _entry_problem(
                    f"{key} sets {name!r}; every call sends {IDEMPOTENCY_HEADER} itself, from "
                    "the run's occurrence, so that a retry is recognised as the same call: "
                    "remove it"
                )
            problem = check(value)
            if problem is not None:
                # The header's name only: a misplaced credential must not reach the log.
                raise _entry_problem(f"{key}.{name}: {problem}")
            result[name] = value
        return result

    return checked


def _statuses(value: object) -> frozenset[int] | None:
    if value is None:
        return None
    items = list(value) if isinstance(value, list | tuple) else [value]
    statuses = [i for i in items if isinstance(i, int) and not isinstance(i, bool) and 99 < i < 600]
    if not items or len(statuses) < len(items):
        raise ValueError("must be an HTTP status (100-599) or a list of them")
    return frozenset(statuses)


def _choice(kind: type[_Choice]) -> Callable[[object], _Choice]:
    def checked(value: object) -> _Choice:
        if isinstance(value, str) and value in kind.__members__.values():
            return kind(value)
        raise ValueError(f"must be one of {'|'.join(member.value for member in kind)}")

    return checked


def _header_value(value: object) -> str | None:
    if not isinstance(value, str):
        return f"must be a string, not {type(value).__name__}"
    if "\r" in value or "\n" in value:
        return "must not contain a line break"
    return None


def _env_name(value: object) -> str | None:
    try:
        contract_env_name(value)
    except ValueError as error:
        return f"{error}, got {value!r}"
    return None


_Text = Annotated[str, BeforeValidator(non_empty_text)]
_Flag = Annotated[bool, BeforeValidator(flag)]
_Count = Annotated[int, BeforeValidator(_count)]
_Duration = Annotated[timedelta, BeforeValidator(positive_duration)]


class HttpJobSettings(BaseModel):
    """One checked entry; ``repr`` hides the URL's credentials and query, sensitive-looking
    header values and the body. The first refusal, in field order, is reported."""

    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)

    name: str
    cron: Annotated[
        str | None, BeforeValidator(lambda v: None if v is None else non_empty_text(v))
    ] = None
    interval: _Duration | None = None
    enabled: _Flag = True
    headers: Annotated[dict[str, str], BeforeValidator(_headers("headers", _header_value))] = Field(
        default_factory=dict
    )
    secret_headers: Annotated[
        dict[str, str], BeforeValidator(_headers("secret_headers", _env_name))
    ] = Field(default_factory=dict)
    # None, checked: a missing url is refused as "required", like a wrong one.
    url: Annotated[str, BeforeValidator(http_url)] = Field(None, validate_default=True)
    method: Annotated[str, BeforeValidator(_method)] = "GET"
    timezone: _Text = "UTC"
    # An empty body is a body.
    body: Annotated[
        str | None, BeforeValidator(lambda v: v if v in (None, "") else non_empty_text(v))
    ] = None
    timeout: _Duration = timedelta(seconds=30)
    expect_status: Annotated[frozenset[int] | None, BeforeValidator(_statuses)] = None
    """None: any 2xx."""
    critical: _Flag = False
    description: _Text = ""
    misfire: Annotated[MisfirePolicy, BeforeValidator(_choice(MisfirePolicy))] = (
        MisfirePolicy.RUN_ONCE
    )
    catch_up_limit: _Count = 10
    misfire_grace: _Duration | None = None
    overlap: Annotated[OverlapPolicy, BeforeValidator(_choice(OverlapPolicy))] = (
        OverlapPolicy.FORBID
    )
    max_concurrent: _Count = 1
    max_attempts: _Count = 1
    backoff: _Duration = timedelta(seconds=30)
    backoff_max: _Duration = timedelta(hours=1)

    @model_validator(mode="after")
    def _one_trigger_and_one_header_each(self) -> HttpJobSettings:
        check_trigger(
            self.cron, self.interval, enabled=self.enabled, examples=("*/5 * * * *", "20s")
        )
        both = sorted(
            {key.lower() for key in self.headers} & {key.lower() for key in self.secret_headers}
        )
        if both:
            raise ValueError(f"header {both[0]!r} is in both headers and secret_headers")
        return self

    def __repr__(self) -> str:
        headers = {
            key: "***" if _SENSITIVE.search(key) else value for key, value in self.headers.items()
        }
        body = None if self.body is None else f"<{len(self.body)} characters>"
        retry = RetryPolicy(
            max_attempts=self.max_attempts, backoff=self.backoff, backoff_max=self.backoff_max
        )
        return (
            f"HttpJobSettings(name={self.name!r}, method={self.method!r}, "
            f"url={safe_url(self.url)!r}, cron={self.cron!r}, interval={self.interval!r}, "
            f"timezone={self.timezone!r}, headers={headers!r}, "
            f"secret_headers={dict(self.secret_headers)!r}, body={body}, "
            f"timeout={self.timeout!r}, expect_status={self.expect_status!r}, "
            f"enabled={self.enabled}, retry={retry!r})"
        )

    __str__ = __repr__

    def expects(self, status: int) -> bool:
        if self.expect_status is None:
            return 200 <= status < 300
        return status in self.expect_status


class _Section(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)

    jobs: list[Any] = Field(default_factory=list)
    runtime_response_body: _Flag = False


def parse_jobs(section: Mapping[str, Any]) -> list[HttpJobSettings]:
    """Every entry, checked; ``ModuleSettingsError`` on the first bad one."""
    checked = module_settings(_Section, {SECTION: section}, SECTION)
    assert checked is not None  # the section is there
    jobs: list[HttpJobSettings] = []
    seen: dict[str, str] = {}
    for index, entry in enumerate(checked.jobs):
        where = f"modules.http.jobs[{index}]"
        if not isinstance(entry, Mapping):
            _refuse(f"{where} = {entry!r}: must be a table ([[modules.http.jobs]])")
        name = entry.get("name")
        if not isinstance(name, str) or not name.strip():
            _refuse(f"{where}: name = {name!r}: required, e.g. name = 'nightly-ping'")
        where = f"{where} {name!r}"
        known = HttpJobSettings.model_fields
        unknown = sorted(str(key) for key in entry if key not in known)
        if unknown:
            close = difflib.get_close_matches(unknown[0], list(known), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            allowed = ", ".join(sorted(known))
            _refuse(f"{where}: {unknown[0]!r} is not a known key{hint}; allowed: {allowed}")
        try:
            job = HttpJobSettings.model_validate(dict(entry))
        except ValidationError as error:
            _refuse(f"{where}: {_described(error)}")
        name = name if "." in name else f"{SECTION}.{name}"
        if name in seen:
            _refuse(f"{where}: name {name!r} is already used by {seen[name]}")
        seen[name] = where
        jobs.append(job.model_copy(update={"name": name}))
    return jobs


def _refuse(message: str) -> NoReturn:
    raise ModuleSettingsError(SECTION, [SettingProblem(None, None, message)])


def _described(error: ValidationError) -> str:
    first = error.errors(include_url=False)[0]
    message = str(first["msg"]).removeprefix("Value error, ")
    if first["type"] == _ENTRY_PROBLEM or not first["loc"]:
        return message
    key = str(first["loc"][0])
    value = first["input"]
    shown = safe_url(value) if key == "url" and isinstance(value, str) else value
    return f"{key} = {shown!r}: {message}"
