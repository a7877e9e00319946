"""The ``http`` plugin: one job per ``[[modules.http.jobs]]`` entry, through ``jobhost_jobs``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from jobhost_contracts import (
    SCHEDULE_KEYS,
    BackgroundJobDeclaration,
    JobKind,
    JobRegistration,
    configured_declaration,
    hookimpl,
    safe_url,
)

from jobhost_http.call import HttpCall
from jobhost_http.kind import http_kind
from jobhost_http.settings import SECTION, HttpJobSettings, parse_jobs

__all__ = ["declaration", "jobhost_job_kinds", "jobhost_jobs"]


@hookimpl
def jobhost_jobs(settings: Mapping[str, Mapping[str, Any]]) -> list[JobRegistration]:
    """A job for every configured call; none without ``[modules.http]``."""
    section = settings.get(SECTION)
    if section is None:
        return []
    return [JobRegistration(declaration(job), HttpCall(job)) for job in parse_jobs(section)]


@hookimpl
def jobhost_job_kinds() -> list[JobKind]:
    """Kind ``http``: runtime jobs making the call a ``[[modules.http.jobs]]`` entry makes."""
    return [http_kind()]


def declaration(job: HttpJobSettings) -> BackgroundJobDeclaration:
    return configured_declaration(
        name=job.name,
        section=SECTION,
        # The report shows the description: the URL there is the safe form, without credentials.
        description=job.description or f"{job.method} {safe_url(job.url)}",
        call_timeout=job.timeout,
        **job.model_dump(include=set(SCHEDULE_KEYS)),
    )
