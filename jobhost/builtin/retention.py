"""``jobhost.run-retention``: the host's own ledger purge, declared like any module's job.

It deletes run rows older than ``keep_days`` with their log lines, in bounded batches, keeping the
newest ``keep_last`` of every job and every running or pending run; and hosts gone for
``keep_hosts_days`` and idempotency records older than ``keep_idempotency_days``.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any

from jobhost_contracts import BackgroundJobDeclaration, JobContext, JobRegistration, hookimpl
from pydantic import BaseModel, BeforeValidator, ConfigDict, ValidationError
from returns.result import Failure, Result, Success
from sqlalchemy.exc import SQLAlchemyError

from jobhost.config import redact_text, refusal
from jobhost.store import Store

__all__ = ["JOB_NAME", "RetentionSettings", "RunRetention", "jobhost_jobs"]

JOB_NAME = "jobhost.run-retention"
_SECTION = "jobhost"
# Days beyond ~27 centuries would overflow the cut-off date: a typo, said as one.
_MAX_DAYS = 36_500
_MAX_COUNT = 1_000_000


def _whole(minimum: int, maximum: int) -> Any:
    def check(value: object) -> object:
        if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= maximum:
            raise ValueError(f"must be a whole number from {minimum} to {maximum}")
        return value

    return BeforeValidator(check)


def _typed(kind: type[Any], allowed: str) -> Any:
    def check(value: object) -> object:
        if not isinstance(value, kind):
            raise ValueError(allowed)
        return value

    return BeforeValidator(check)


_Days = Annotated[int, _whole(1, _MAX_DAYS)]
_Text = Annotated[str, _typed(str, "must be a string")]


class RetentionSettings(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)

    keep_days: _Days = 30
    keep_last: Annotated[int, _whole(0, _MAX_COUNT)] = 50
    keep_hosts_days: _Days = 7
    # Unused, accepted so that earlier settings load: manual requests are runs now.
    keep_requests_days: _Days = 30
    keep_idempotency_days: _Days = 90
    batch_size: Annotated[int, _whole(1, _MAX_COUNT)] = 500
    cron: _Text = "23 4 * * *"
    timezone: _Text = "UTC"
    enabled: Annotated[bool, _typed(bool, "must be true or false")] = True


@hookimpl
def jobhost_jobs(settings: Mapping[str, Mapping[str, Any]]) -> list[JobRegistration]:
    config = _read(settings.get(_SECTION, {}))
    declaration = BackgroundJobDeclaration(
        name=JOB_NAME,
        module="jobhost",
        cron=config.cron,
        timezone=config.timezone,
        enabled=config.enabled,
        configuration_source=_SECTION,
        description=f"Delete run rows older than {config.keep_days} days, keeping the newest "
        f"{config.keep_last} of every job; hosts gone {config.keep_hosts_days} days, idempotency "
        f"records after {config.keep_idempotency_days} days.",
    )
    return [JobRegistration(declaration, RunRetention(config))]


class RunRetention:
    """Purges the store of the host that runs it (handed over, see ``UsesStore``)."""

    def __init__(self, config: RetentionSettings) -> None:
        self.config = config
        self._store: Store | None = None

    def use_store(self, store: Store) -> None:
        self._store = store

    def execute(self, context: JobContext) -> Result[dict[str, int], str]:
        store = self._store
        if store is None:
            return Failure("the run retention job runs only in a jobhost host, on its store")
        now, cancellation = datetime.now(UTC), context.cancellation
        try:
            counts = store.purge(
                now=now,
                ages={
                    "runs": timedelta(days=self.config.keep_days),
                    "hosts": timedelta(days=self.config.keep_hosts_days),
                    "idempotency_records": timedelta(days=self.config.keep_idempotency_days),
                },
                keep_last=self.config.keep_last,
                batch_size=self.config.batch_size,
                should_stop=lambda: cancellation.cancelled,
            )
        except SQLAlchemyError as error:
            return Failure(f"purge failed: {redact_text(str(error).splitlines()[0])}")
        deleted = counts.pop("runs")
        context.logger.info(
            "deleted %d run rows, %d hosts, %d idempotency records",
            deleted,
            counts["hosts"],
            counts["idempotency_records"],
        )
        return Success({"deleted": deleted, **counts})


def _read(section: Mapping[str, Any]) -> RetentionSettings:
    allowed = sorted(RetentionSettings.model_fields)
    unknown = sorted(str(key) for key in section if key not in RetentionSettings.model_fields)
    if unknown:
        raise ValueError(
            f"[modules.jobhost] {unknown[0]}: not a setting of the run retention job; "
            f"allowed: {', '.join(allowed)}"
        )
    try:
        return RetentionSettings.model_validate(dict(section))
    except ValidationError as error:
        first = error.errors(include_url=False)[0]
        raise ValueError(
            f"[modules.jobhost] {first['loc'][0]} = {first['input']!r}: {refusal(first)}"
        ) from None
