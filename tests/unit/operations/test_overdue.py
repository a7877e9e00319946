"""The dead-man check counts from the last occurrence that was due, not from the period."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from jobhost.config import Settings
from jobhost.operations.mismatch import JobFacts, job_mismatches
from jobhost.records import ScheduleRecord
from tests.support import SAMPLE_PLUGIN, sample_catalog

WEEKDAYS = {"name": "sample.weekdays", "cron": "0 3 * * mon-fri"}
# Friday 2026-05-08 03:00 UTC is the last weekday occurrence before the weekend.
FRIDAY_RUN = datetime(2026, 5, 8, 3, 2, tzinfo=UTC)


def _codes(job: dict[str, Any], now: datetime, last_success: datetime | None) -> list[str]:
    settings = Settings(
        database_url="sqlite:///unused.db",
        plugins=[SAMPLE_PLUGIN],
        modules={"sample": {"jobs": [job]}},
    )
    spec = sample_catalog(settings).jobs[job["name"]]
    created = datetime(2026, 4, 1, tzinfo=UTC)
    row = ScheduleRecord.from_row(
        {
            "job_name": spec.name,
            "module": "sample",
            "trigger_kind": spec.trigger.kind,
            "trigger_expression": spec.trigger.expression,
            "timezone": spec.trigger.timezone,
            "trigger_source": "declaration",
            "enabled": True,
            "orphaned": False,
            "paused": False,
            "paused_by": None,
            "paused_at": None,
            "paused_reason": None,
            "next_occurrence": now + timedelta(hours=1),
            "interval_anchor": created,
            "missed_through": None,
            "lease_owner": None,
            "lease_expires_at": None,
            "lease_run_id": None,
            "fencing_token": 3,
            "last_run_id": None,
            "last_outcome": "succeeded",
            "last_started_at": last_success,
            "last_finished_at": last_success,
            "last_error": None,
            "last_success_at": last_success,
            "created_at": created,
            "updated_at": created,
        }
    )
    facts = JobFacts(spec.name, spec, row, [], now + timedelta(hours=1), last_success, [])
    return [m.code for m in job_mismatches(facts, settings, now, 1, {})]


def test_a_weekday_job_is_not_overdue_on_sunday() -> None:
    sunday = datetime(2026, 5, 10, 12, 0, tzinfo=UTC)
    assert "overdue" not in _codes(WEEKDAYS, sunday, FRIDAY_RUN)


def test_a_weekday_job_is_overdue_once_mondays_occurrence_has_no_success() -> None:
    monday_late = datetime(2026, 5, 11, 4, 0, tzinfo=UTC)  # 03:00 + the 30 minutes' grace
    assert "overdue" in _codes(WEEKDAYS, monday_late, FRIDAY_RUN)
    monday_early = datetime(2026, 5, 11, 3, 20, tzinfo=UTC)  # still within grace
    assert "overdue" not in _codes(WEEKDAYS, monday_early, FRIDAY_RUN)


def test_an_interval_job_is_overdue_after_a_missed_period_plus_grace() -> None:
    hourly = {"name": "sample.hourly", "interval": "1h"}
    success = datetime(2026, 5, 8, 10, 0, 5, tzinfo=UTC)
    assert "overdue" not in _codes(hourly, success + timedelta(minutes=80), success)
    assert "overdue" in _codes(hourly, success + timedelta(hours=2), success)
