"""The summary keeps, per job of a catalog, what its declaration alone decides (how its
triggers show, its override and not-configured reasons, its grace): a job read again from those
and a job read the first time say the same, and a changed catalog or settings is not answered
from what an older one decided. On both stores, from one snapshot, so every report compared is
of the same instant."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from jobhost.operations.report import JobReport, report_from
from jobhost.store.snapshot import read_snapshot
from tests.cli.operator_support import Operator, now

JOBS: list[dict[str, Any]] = [
    {"name": "sample.fine", "interval": "1h"},
    {"name": "sample.berlin", "cron": "*/15 * * * *", "timezone": "Europe/Berlin"},
    {"name": "sample.failing", "cron": "0 * * * *", "timezone": "UTC"},
    {"name": "sample.overdue", "interval": "1h"},
    {"name": "sample.behind", "interval": "5m"},
    {"name": "sample.paused", "interval": "1h"},
    {"name": "sample.disabled", "interval": "1h", "enabled": False},
    {"name": "sample.overridden", "interval": "1h"},
]


@pytest.fixture
def operator(store_url: str, tmp_path: Path) -> Iterator[Operator]:
    made = Operator(store_url, tmp_path)
    made.configure(JOBS, overrides={"sample.overridden": {"interval": "2h"}}, extra_plugin=True)
    made.sync()
    at = now()
    days_ago = at - timedelta(days=3)
    made.set_schedule("sample.overdue", created_at=days_ago, interval_anchor=days_ago)
    made.add_run("sample.fine", "succeeded", started=at - timedelta(minutes=20))
    made.add_run("sample.failing", "failed", started=at - timedelta(minutes=40), error="503")
    made.set_schedule("sample.behind", next_occurrence=at - timedelta(hours=2))
    made.set_schedule("sample.paused", paused=True, paused_by="ops", paused_at=at)
    made.add_orphan("sample.gone")
    yield made
    made.close()


def test_a_job_read_again_says_what_it_said_the_first_time(operator: Operator) -> None:
    settings, catalog = operator.settings, operator.catalog()
    snapshot = read_snapshot(operator.engine, catalog.jobs)

    first = report_from(settings, catalog, snapshot)
    again = report_from(settings, catalog, snapshot)
    # A catalog built anew: every job is read the first time again.
    fresh = report_from(operator.settings, operator.catalog(), snapshot)

    assert again == first
    assert fresh == first
    codes = {job.name: [m.code for m in job.mismatches] for job in first.jobs}
    assert codes["sample.overridden"][0] == "override", codes
    assert codes["extra.needs-config"][0] == "not-configured", codes
    assert "overdue" in codes["sample.overdue"], codes
    assert "next-fire-past" in codes["sample.behind"], codes
    assert codes["sample.gone"] == ["orphaned"], codes
    assert all("no-live-host" in codes[name] for name in ("sample.fine", "sample.failing"))


def test_the_same_jobs_under_other_settings_are_judged_by_those(operator: Operator) -> None:
    settings, catalog = operator.settings, operator.catalog()
    snapshot = read_snapshot(operator.engine, catalog.jobs)
    assert "overdue" in _codes(report_from(settings, catalog, snapshot).jobs, "sample.overdue")

    patient = settings.model_copy(update={"overdue_grace": timedelta(days=30)})
    configured = settings.model_copy(update={"modules": {**settings.modules, "extra": {}}})

    assert "overdue" not in _codes(report_from(patient, catalog, snapshot).jobs, "sample.overdue")
    assert "not-configured" not in _codes(
        report_from(configured, catalog, snapshot).jobs, "extra.needs-config"
    )


def test_a_catalog_changed_since_is_shown_as_it_is_now(operator: Operator) -> None:
    settings, catalog = operator.settings, operator.catalog()
    snapshot = read_snapshot(operator.engine, catalog.jobs)
    before = _job(report_from(settings, catalog, snapshot).jobs, "sample.overridden")

    operator.configure(JOBS, extra_plugin=True, migrate=False)
    settings, catalog = operator.settings, operator.catalog()
    after = _job(report_from(settings, catalog, snapshot).jobs, "sample.overridden")

    assert before.effective_trigger.expression == "2h"
    assert before.mismatches[0].code == "override"
    assert after.effective_trigger.expression == "1h"
    assert [m.code for m in after.mismatches][:1] == ["store-differs"]


def _job(jobs: list[JobReport], name: str) -> JobReport:
    return next(job for job in jobs if job.name == name)


def _codes(jobs: list[JobReport], name: str) -> list[str]:
    return [m.code for m in _job(jobs, name).mismatches]
