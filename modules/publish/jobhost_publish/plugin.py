"""The ``publish`` plugin: one job per ``[[modules.publish.jobs]]`` entry, through ``jobhost_jobs``.

Settings-file jobs and the job kind ``publish`` build their executors the same way, through
:func:`jobhost_publish.executor.build_executor`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from jobhost_contracts import (
    CALL_TIMEOUT_MARGIN,
    SCHEDULE_KEYS,
    BackgroundJobDeclaration,
    JobKind,
    JobRegistration,
    configured_declaration,
    hookimpl,
)
from pydantic import ValidationError

from jobhost_publish.executor import build_executor
from jobhost_publish.kind import publish_kind
from jobhost_publish.section import parse_section
from jobhost_publish.settings import (
    SECTION,
    BrokerUrls,
    PublishJobSettings,
    thawed,
)

__all__ = [
    "TIMEOUT_MARGIN",
    "declaration",
    "jobhost_job_kinds",
    "jobhost_jobs",
]

TIMEOUT_MARGIN = CALL_TIMEOUT_MARGIN
"""The run's timeout is the publish's plus this: the publish gives up first and says why."""


@hookimpl
def jobhost_jobs(settings: Mapping[str, Mapping[str, Any]]) -> list[JobRegistration]:
    """A job for every configured message; none without ``[modules.publish]``.

    The section is checked here and connects to nothing: every bad entry is listed in one
    ValueError, which ``jobhost validate`` reports and ``jobhost run`` refuses to start with.
    """
    section = settings.get(SECTION)
    if section is None:
        return []
    config = parse_section(section)
    return [
        JobRegistration(declaration(job), build_executor(job.kind_settings(), config.urls))
        for job in config.jobs
    ]


@hookimpl
def jobhost_job_kinds(settings: Mapping[str, Mapping[str, Any]]) -> list[JobKind]:
    """Kind ``publish``, through the brokers ``[modules.publish]`` names (none without it)."""
    section = thawed(settings.get(SECTION) or {})
    section.pop("jobs", None)
    try:
        urls = BrokerUrls.model_validate(section)
    except ValidationError:
        urls = BrokerUrls()  # jobhost_jobs reports the section's problems
    return [publish_kind(urls)]


def declaration(job: PublishJobSettings) -> BackgroundJobDeclaration:
    """The declaration of one configured message."""
    return configured_declaration(
        name=job.job_name,
        section=SECTION,
        description=job.description or f"publish to {job.destination}",
        call_timeout=job.timeout,
        **job.model_dump(include=set(SCHEDULE_KEYS)),
    )
