"""``[[modules.http.jobs]]``: one scheduled HTTP call per entry, read and checked at start-up.

Every refusal is a ``ValueError`` naming the entry (``modules.http.jobs[0] 'ping'``), the key and
what is allowed. Secret header values are never read here: ``secret_headers`` names environment
variables, read at call time, so no settings object can leak one through ``repr`` or a log.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from jobhost_contracts import MisfirePolicy, OverlapPolicy, RetryPolicy

from jobhost_http._entry import (
    IDEMPOTENCY_HEADER,
    EntryReader,
    env_name,
    given,
    header_value,
    safe_url,
)

__all__ = ["IDEMPOTENCY_HEADER", "SECTION", "HttpJobSettings", "parse_jobs", "safe_url"]

SECTION = "http"

_SECTION_KEYS = frozenset({"jobs", "runtime_response_body"})
_JOB_KEYS = frozenset(
    {
        "name",
        "cron",
        "interval",
        "timezone",
        "method",
        "url",
        "headers",
        "secret_headers",
        "body",
        "timeout",
        "expect_status",
        "enabled",
        "critical",
        "description",
        "misfire",
        "catch_up_limit",
        "misfire_grace",
        "overlap",
        "max_concurrent",
        "max_attempts",
        "backoff",
        "backoff_max",
    }
)
# Plain header values whose name says they are credentials are hidden from repr all the same.
_SENSITIVE = re.compile(r"auth|token|secret|key|cookie|password|signature", re.IGNORECASE)


@dataclass(frozen=True, kw_only=True)
class HttpJobSettings:
    """One checked entry. ``repr`` hides credentials: URL password and query, sensitive-looking
    header values, the body; ``secret_headers`` holds variable names, never values."""

    name: str
    entry: str
    url: str
    method: str = "GET"
    cron: str | None = None
    interval: timedelta | None = None
    timezone: str = "UTC"
    headers: Mapping[str, str] = field(default_factory=dict)
    secret_headers: Mapping[str, str] = field(default_factory=dict)
    body: str | None = None
    timeout: timedelta = timedelta(seconds=30)
    expect_status: frozenset[int] | None = None
    """None: any 2xx."""
    enabled: bool = True
    critical: bool = False
    description: str = ""
    misfire: MisfirePolicy = MisfirePolicy.RUN_ONCE
    catch_up_limit: int = 10
    misfire_grace: timedelta | None = None
    overlap: OverlapPolicy = OverlapPolicy.FORBID
    max_concurrent: int = 1
    retry: RetryPolicy = field(default_factory=RetryPolicy)

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

    def expects(self, status: int) -> bool:
        if self.expect_status is None:
            return 200 <= status < 300
        return status in self.expect_status


def parse_jobs(section: Mapping[str, Any]) -> list[HttpJobSettings]:
    """Every entry of ``[[modules.http.jobs]]``, checked; raise ``ValueError`` on the first bad."""
    unknown = sorted(str(key) for key in section if key not in _SECTION_KEYS)
    if unknown:
        raise ValueError(
            f"[modules.http] {unknown[0]!r} is not a known setting; jobs go in "
            "[[modules.http.jobs]] entries"
        )
    quote = section.get("runtime_response_body", False)
    if not isinstance(quote, bool):
        raise ValueError(f"[modules.http] runtime_response_body = {quote!r}: must be true or false")
    entries = section.get("jobs", ())
    if isinstance(entries, str | bytes | Mapping) or not isinstance(entries, list | tuple):
        raise ValueError(
            f"[modules.http] jobs = {entries!r}: must be a list of tables, "
            "written as [[modules.http.jobs]]"
        )
    jobs: list[HttpJobSettings] = []
    seen: dict[str, str] = {}
    for index, entry in enumerate(entries):
        job = _parse_job(index, entry)
        if job.name in seen:
            raise ValueError(f"{job.entry}: name {job.name!r} is already used by {seen[job.name]}")
        seen[job.name] = job.entry
        jobs.append(job)
    return jobs


def _parse_job(index: int, entry: object) -> HttpJobSettings:
    where = f"modules.http.jobs[{index}]"
    if not isinstance(entry, Mapping):
        raise ValueError(f"{where} = {entry!r}: must be a table ([[modules.http.jobs]])")
    raw_name = entry.get("name")
    if not isinstance(raw_name, str) or not raw_name.strip():
        raise ValueError(f"{where}: name = {raw_name!r}: required, e.g. name = 'nightly-ping'")
    where = f"{where} {raw_name!r}"
    unknown = sorted(str(key) for key in entry if key not in _JOB_KEYS)
    if unknown:
        raise ValueError(
            f"{where}: {unknown[0]!r} is not a known key; allowed: {', '.join(sorted(_JOB_KEYS))}"
        )
    read = EntryReader(where, entry)
    cron = read.optional_text("cron")
    interval = read.duration("interval", None)
    enabled = read.flag("enabled", default=True)
    if cron is not None and interval is not None:
        raise ValueError(f"{where}: has both cron and interval; keep exactly one")
    if enabled and cron is None and interval is None:
        raise ValueError(f"{where}: needs cron (e.g. '*/5 * * * *') or interval (e.g. '20s')")
    headers = read.headers("headers", header_value)
    secret_headers = read.headers("secret_headers", env_name)
    both = sorted({key.lower() for key in headers} & {key.lower() for key in secret_headers})
    if both:
        raise ValueError(f"{where}: header {both[0]!r} is in both headers and secret_headers")
    return HttpJobSettings(
        name=raw_name if "." in raw_name else f"{SECTION}.{raw_name}",
        entry=where,
        url=read.url(),
        method=read.method(),
        cron=cron,
        interval=interval,
        timezone=read.text("timezone", "UTC"),
        headers=headers,
        secret_headers=secret_headers,
        body=read.optional_text("body", allow_empty=True),
        timeout=given(read.duration("timeout", timedelta(seconds=30))),
        expect_status=read.statuses(),
        enabled=enabled,
        critical=read.flag("critical", default=False),
        description=read.optional_text("description") or "",
        misfire=read.choice("misfire", MisfirePolicy, MisfirePolicy.RUN_ONCE),
        catch_up_limit=read.count("catch_up_limit", 10),
        misfire_grace=read.duration("misfire_grace", None),
        overlap=read.choice("overlap", OverlapPolicy, OverlapPolicy.FORBID),
        max_concurrent=read.count("max_concurrent", 1),
        retry=RetryPolicy(
            max_attempts=read.count("max_attempts", 1),
            backoff=given(read.duration("backoff", timedelta(seconds=30))),
            backoff_max=given(read.duration("backoff_max", timedelta(hours=1))),
        ),
    )
