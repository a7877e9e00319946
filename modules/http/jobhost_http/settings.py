"""``[[modules.http.jobs]]``: one scheduled HTTP call per entry, read and checked at start-up.

Every refusal is a ``ModuleSettingsError`` (a ``ValueError``, reported by the host as a problem of
``[modules.http]``) naming the entry (``modules.http.jobs[0] 'ping'``), the key and what is
allowed. Secret header values are never read here: ``secret_headers`` names environment
variables, read at call time, so no settings object can leak one through ``repr`` or a log.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import Annotated, Any, NoReturn

from jobhost_contracts import (
    MisfirePolicy,
    ModuleSettingsError,
    OverlapPolicy,
    RetryPolicy,
    SettingProblem,
    http_url,
    module_settings,
    positive_duration,
    safe_url,
)
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, model_validator

from jobhost_http import _entry
from jobhost_http._entry import ENTRY_PROBLEM, IDEMPOTENCY_HEADER

__all__ = ["IDEMPOTENCY_HEADER", "SECTION", "HttpJobSettings", "parse_jobs", "safe_url"]

SECTION = "http"

# Plain header values whose name says they are credentials are hidden from repr all the same.
_SENSITIVE = re.compile(r"auth|token|secret|key|cookie|password|signature", re.IGNORECASE)


def _checked(check: Callable[[Any], object]) -> Any:
    return BeforeValidator(check)


_Text = Annotated[str, _checked(_entry.text)]
_Flag = Annotated[bool, _checked(_entry.flag)]
_Count = Annotated[int, _checked(_entry.count)]
_Duration = Annotated[timedelta, _checked(positive_duration)]


class HttpJobSettings(BaseModel):
    """One checked entry. ``repr`` hides credentials: URL password and query, sensitive-looking
    header values, the body; ``secret_headers`` holds variable names, never values.

    Fields are checked in the order they are declared here, and the first refusal is reported.
    """

    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)

    name: str
    cron: Annotated[str | None, _checked(_entry.optional_text)] = None
    interval: _Duration | None = None
    enabled: _Flag = True
    headers: Annotated[dict[str, str], _checked(_entry.headers("headers", _entry.header_value))] = (
        Field(default_factory=dict)
    )
    secret_headers: Annotated[
        dict[str, str], _checked(_entry.headers("secret_headers", _entry.env_name))
    ] = Field(default_factory=dict)
    # None, checked: a missing url is refused as "required", like a wrong one.
    url: Annotated[str, _checked(http_url)] = Field(None, validate_default=True)
    method: Annotated[str, _checked(_entry.method)] = "GET"
    timezone: _Text = "UTC"
    body: Annotated[str | None, _checked(_entry.body)] = None
    timeout: _Duration = timedelta(seconds=30)
    expect_status: Annotated[frozenset[int] | None, _checked(_entry.statuses)] = None
    """None: any 2xx."""
    critical: _Flag = False
    description: _Text = ""
    misfire: Annotated[MisfirePolicy, _checked(_entry.choice(MisfirePolicy))] = (
        MisfirePolicy.RUN_ONCE
    )
    catch_up_limit: _Count = 10
    misfire_grace: _Duration | None = None
    overlap: Annotated[OverlapPolicy, _checked(_entry.choice(OverlapPolicy))] = OverlapPolicy.FORBID
    max_concurrent: _Count = 1
    max_attempts: _Count = 1
    backoff: _Duration = timedelta(seconds=30)
    backoff_max: _Duration = timedelta(hours=1)

    @model_validator(mode="after")
    def _one_trigger_and_one_header_each(self) -> HttpJobSettings:
        if self.cron is not None and self.interval is not None:
            raise ValueError("has both cron and interval; keep exactly one")
        if self.enabled and self.cron is None and self.interval is None:
            raise ValueError("needs cron (e.g. '*/5 * * * *') or interval (e.g. '20s')")
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
        return (
            f"HttpJobSettings(name={self.name!r}, method={self.method!r}, "
            f"url={safe_url(self.url)!r}, cron={self.cron!r}, interval={self.interval!r}, "
            f"timezone={self.timezone!r}, headers={headers!r}, "
            f"secret_headers={dict(self.secret_headers)!r}, body={body}, "
            f"timeout={self.timeout!r}, expect_status={self.expect_status!r}, "
            f"enabled={self.enabled}, retry={self.retry!r})"
        )

    __str__ = __repr__

    @property
    def retry(self) -> RetryPolicy:
        return RetryPolicy(
            max_attempts=self.max_attempts, backoff=self.backoff, backoff_max=self.backoff_max
        )

    def expects(self, status: int) -> bool:
        if self.expect_status is None:
            return 200 <= status < 300
        return status in self.expect_status


class _Section(BaseModel):
    """``[modules.http]`` itself; its entries are checked one by one, each named."""

    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)

    jobs: list[Any] = Field(default_factory=list)
    runtime_response_body: _Flag = False


def parse_jobs(section: Mapping[str, Any]) -> list[HttpJobSettings]:
    """Every entry of ``[[modules.http.jobs]]``, checked; raise ``ModuleSettingsError`` on the
    first bad one."""
    checked = module_settings(_Section, {SECTION: section}, SECTION)
    assert checked is not None  # the section is there
    jobs: list[HttpJobSettings] = []
    seen: dict[str, str] = {}
    for index, entry in enumerate(checked.jobs):
        where, job = _parse_job(index, entry)
        if job.name in seen:
            _refuse(f"{where}: name {job.name!r} is already used by {seen[job.name]}")
        seen[job.name] = where
        jobs.append(job)
    return jobs


def _refuse(message: str) -> NoReturn:
    # The message names the entry and the key already.
    raise ModuleSettingsError(SECTION, [SettingProblem(None, None, message)])


def _parse_job(index: int, entry: object) -> tuple[str, HttpJobSettings]:
    where = f"modules.http.jobs[{index}]"
    if not isinstance(entry, Mapping):
        _refuse(f"{where} = {entry!r}: must be a table ([[modules.http.jobs]])")
    raw_name = entry.get("name")
    if not isinstance(raw_name, str) or not raw_name.strip():
        _refuse(f"{where}: name = {raw_name!r}: required, e.g. name = 'nightly-ping'")
    where = f"{where} {raw_name!r}"
    known = HttpJobSettings.model_fields
    unknown = sorted(str(key) for key in entry if key not in known)
    if unknown:
        close = difflib.get_close_matches(unknown[0], list(known), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        _refuse(
            f"{where}: {unknown[0]!r} is not a known key{hint}; allowed: {', '.join(sorted(known))}"
        )
    try:
        job = HttpJobSettings.model_validate(dict(entry))
    except ValidationError as error:
        _refuse(f"{where}: {_described(error)}")
    name = raw_name if "." in raw_name else f"{SECTION}.{raw_name}"
    return where, job.model_copy(update={"name": name})


def _described(error: ValidationError) -> str:
    first = error.errors(include_url=False)[0]
    message = str(first["msg"]).removeprefix("Value error, ")
    if first["type"] == ENTRY_PROBLEM or not first["loc"]:
        return message
    key = str(first["loc"][0])
    value = first["input"]
    shown = safe_url(value) if key == "url" and isinstance(value, str) else value
    return f"{key} = {shown!r}: {message}"
