"""The ``publish`` plugin: one job per ``[[modules.publish.jobs]]`` entry, and the job kind
``publish`` for jobs created at run time, which name a broker but never carry its URL."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from jobhost_contracts import (
    SCHEDULE_KEYS,
    BackgroundJobDeclaration,
    JobKind,
    JobRegistration,
    KindSettingsError,
    configured_declaration,
    hookimpl,
)
from pydantic import ValidationError

from jobhost_publish.executor import build_executor
from jobhost_publish.settings import (
    SECTION,
    BrokerUrls,
    PublishJobSettings,
    PublishSettings,
    parse_section,
)

__all__ = ["declaration", "jobhost_job_kinds", "jobhost_jobs"]


@hookimpl
def jobhost_jobs(settings: Mapping[str, Mapping[str, Any]]) -> list[JobRegistration]:
    """A job for every configured message; none without ``[modules.publish]``."""
    section = settings.get(SECTION)
    if section is None:
        return []
    config = parse_section(section)
    # An entry is the message's settings with a schedule: its executor publishes as a kind's.
    return [
        JobRegistration(declaration(job), build_executor(job, config.urls)) for job in config.jobs
    ]


@hookimpl
def jobhost_job_kinds(settings: Mapping[str, Mapping[str, Any]]) -> list[JobKind]:
    """Kind ``publish``, through the brokers ``[modules.publish]`` names (none without it)."""
    section = settings.get(SECTION) or {}
    try:
        urls = BrokerUrls.model_validate({k: v for k, v in section.items() if k != "jobs"})
    except ValidationError:
        urls = BrokerUrls()  # jobhost_jobs reports the section's problems

    def validate(given: Mapping[str, Any]) -> PublishSettings:
        try:
            checked = PublishSettings.model_validate(dict(given))
        except ValidationError as error:
            raise KindSettingsError.first_of(error, PublishSettings.model_fields) from None
        missing = urls.missing(checked.broker)
        if missing is not None:
            raise KindSettingsError("broker", missing)
        return checked

    kind = JobKind(
        name="publish",
        description="Publish one message to NATS JetStream or RabbitMQ, confirmed by the broker.",
        settings_schema=PublishSettings.model_json_schema(),
        validate=validate,
        factory=lambda _name, settings: build_executor(settings, urls),
        module=SECTION,
        examples=({"broker": "nats", "subject": "billing.close-day", "payload": {"day": "x"}},),
    )
    return [kind]


def declaration(job: PublishJobSettings) -> BackgroundJobDeclaration:
    return configured_declaration(
        name=job.job_name,
        section=SECTION,
        description=job.description or f"publish to {job.destination}",
        call_timeout=job.timeout,
        **job.model_dump(include=set(SCHEDULE_KEYS)),
    )
