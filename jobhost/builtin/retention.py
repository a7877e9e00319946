"""``jobhost.run-retention``: the host's own ledger purge, declared like any module's job.

It deletes run rows older than ``keep_days`` in bounded batches, always keeping the newest
``keep_last`` rows of every job, and never touching a run that is still running or pending.
Settings live in ``[modules.jobhost]``: ``keep_days`` (30), ``keep_last`` (50), ``batch_size``
(500), ``cron`` (``"23 4 * * *"``), ``timezone`` (UTC).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from jobhost_contracts import (
    BackgroundJobDeclaration,
    JobContext,
    JobRegistration,
    hookimpl,
)
from returns.result import Failure, Result, Success
from sqlalchemy import delete, func, select
from sqlalchemy.exc import SQLAlchemyError

__all__ = ["JOB_NAME", "RetentionSettings", "RunRetention", "jobhost_jobs", "purge_runs"]

JOB_NAME = "jobhost.run-retention"
_SECTION = "jobhost"
_KEYS = {"keep_days", "keep_last", "batch_size", "cron", "timezone", "enabled"}


@dataclass(frozen=True)
class RetentionSettings:
    keep_days: int = 30
    keep_last: int = 50
    batch_size: int = 500
    cron: str = "23 4 * * *"
    timezone: str = "UTC"
    enabled: bool = True


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
        f"{config.keep_last} of every job.",
    )
    return [JobRegistration(declaration, RunRetention(config))]


class RunRetention:
    """The executor: opens the host's store and purges it in batches."""

    def __init__(self, config: RetentionSettings) -> None:
        self.config = config

    def execute(self, context: JobContext) -> Result[dict[str, int], str]:
        from jobhost.config import load_settings, redact_text
        from jobhost.store import create_store_engine

        engine = create_store_engine(load_settings().database_url)
        try:
            deleted = purge_runs(
                engine,
                now=datetime.now(UTC),
                keep_days=self.config.keep_days,
                keep_last=self.config.keep_last,
                batch_size=self.config.batch_size,
                should_stop=lambda: context.cancellation.cancelled,
            )
        except SQLAlchemyError as error:
            return Failure(f"purge failed: {redact_text(str(error).splitlines()[0])}")
        finally:
            engine.dispose()
        context.logger.info("deleted %d run rows", deleted)
        return Success({"deleted": deleted})


def purge_runs(
    engine: Any,
    *,
    now: datetime,
    keep_days: int,
    keep_last: int,
    batch_size: int,
    should_stop: Any = lambda: False,
) -> int:
    """Delete old run rows batch by batch; return how many went."""
    from jobhost.store.schema import runs

    cutoff = now - timedelta(days=keep_days)
    rank = (
        func.row_number()
        .over(partition_by=runs.c.job_name, order_by=(runs.c.queued_at.desc(), runs.c.id.desc()))
        .label("rank")
    )
    ranked = select(runs.c.id, runs.c.queued_at, runs.c.outcome, rank).subquery()
    doomed = (
        select(ranked.c.id)
        .where(
            ranked.c.rank > keep_last,
            ranked.c.queued_at < cutoff,
            ranked.c.outcome.not_in(["running", "pending"]),
        )
        .limit(batch_size)
    )
    total = 0
    while not should_stop():
        with engine.begin() as connection:
            ids = list(connection.execute(doomed).scalars())
            if not ids:
                break
            connection.execute(delete(runs).where(runs.c.id.in_(ids)))
        total += len(ids)
    return total


def _read(section: Mapping[str, Any]) -> RetentionSettings:
    unknown = sorted(set(section) - _KEYS)
    if unknown:
        raise ValueError(
            f"[modules.jobhost] {unknown[0]}: not a setting of the run retention job; "
            f"allowed: {', '.join(sorted(_KEYS))}"
        )
    values = {**RetentionSettings().__dict__, **section}
    for key in ("keep_days", "keep_last", "batch_size"):
        value = values[key]
        minimum = 0 if key == "keep_last" else 1
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise ValueError(
                f"[modules.jobhost] {key} = {value!r}: must be a whole number >= {minimum}"
            )
    for key in ("cron", "timezone"):
        if not isinstance(values[key], str):
            raise ValueError(f"[modules.jobhost] {key} = {values[key]!r}: must be a string")
    if not isinstance(values["enabled"], bool):
        raise ValueError(
            f"[modules.jobhost] enabled = {values['enabled']!r}: must be true or false"
        )
    return RetentionSettings(**values)
