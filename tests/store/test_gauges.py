"""The gauges of what health knows: they agree with ``jobhost report``, on both stores, and a
scrape reads the store at most once per ``metrics_refresh``, never once per job."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from sqlalchemy import update

from jobhost.config import Settings
from jobhost.firing.host import HostStatus
from jobhost.operations.gauges import JobGauges, register_gauges
from jobhost.operations.jobs import pause_jobs
from jobhost.operations.report import STATUSES, build_report
from jobhost.store import Store, create_store_engine, database_now, ledger, upgrade
from jobhost.store.schema import schedules
from jobhost.web import prometheus_reader
from tests.store.conftest import Replica
from tests.support import ManualClock, sample_catalog


def _jobs(due: datetime) -> list[dict[str, Any]]:
    return [
        {"name": "s.ok", "cron": "* * * * *"},
        {"name": "s.fails", "cron": "* * * * *", "behaviour": "fail"},
        {"name": "s.held", "cron": "* * * * *"},
        {"name": "s.off", "cron": "* * * * *", "enabled": False},
        {"name": "s.late", "cron": "* * * * *"},
        {
            "name": "s.nightly",
            "cron": f"{due.minute} {due.hour} * * *",
            "critical": True,
            "misfire": "skip",
            "misfire_grace": "1s",
        },
    ]


@pytest.fixture
def scene(
    sample_settings: Callable[..., Settings], clock: ManualClock, telemetry: Any
) -> Iterator[SimpleNamespace]:
    """A store with jobs ok, failing, paused, disabled, behind, and a critical job overdue,
    whose clock (the database's, on PostgreSQL) is the test's, give or take the test's run."""
    clock.now = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(hours=2)
    settings = sample_settings(
        _jobs(clock.now + timedelta(hours=1)), overdue_grace="10m", metrics_refresh="30s"
    )
    catalog = sample_catalog(settings)
    engine = create_store_engine(settings.database_url)
    upgrade(engine)
    replica = Replica(settings, catalog, engine, clock, telemetry[0], "host-0")
    replica.ticker.sync(clock())
    pause_jobs(Store(engine, clock), catalog, ["s.held"], actor="ops", reason="test")
    clock.now = datetime.now(UTC)
    for claim in replica.tick():
        replica.finish(claim)
    with engine.begin() as connection:
        now = database_now(connection, clock)
        # Nothing fires s.late any more: its next fire is an hour behind.
        connection.execute(
            update(schedules)
            .where(schedules.c.job_name == "s.late")
            .values(next_occurrence=now - timedelta(hours=1), due_at=now + timedelta(days=1))
        )
        ledger.register_host(
            connection,
            host_id="host-0",
            hostname="gauges-test",
            pid=1,
            version="0",
            now=now,
            host_clock=now + timedelta(seconds=2.5),
            heartbeat_seconds=60,
        )
    host = SimpleNamespace(
        host_id="host-0",
        settings=settings,
        catalog=catalog,
        store=Store(engine, clock),
        clock=clock,
        status=HostStatus(store_ok=True, stuck=1),
    )
    yield host
    engine.dispose()


def test_the_gauges_count_jobs_by_status_as_the_report_does(scene: SimpleNamespace) -> None:
    metrics = _scrape(scene)
    report = build_report(scene.settings, scene.catalog, scene.store)
    by_status = {job.name: job.status for job in report.jobs}
    assert by_status == {
        "s.ok": "ok",
        "s.fails": "failing",
        "s.held": "paused",
        "s.off": "disabled",
        "s.late": "behind",
        "s.nightly": "overdue",
    }
    for status in STATUSES:
        expected = sum(1 for value in by_status.values() if value == status)
        assert metrics[f'jobhost_jobs{{status="{status}"}}'] == expected, status
    assert metrics["jobhost_live_hosts"] == 1
    assert metrics["jobhost_critical_jobs_overdue"] == 1
    assert metrics['jobhost_job_overdue{critical="true",job="s.nightly"}'] == 1
    assert not [
        name for name in metrics if name.startswith("jobhost_job_overdue") and "s.ok" in name
    ]
    # s.fails failed its one occurrence: failing, a streak of one; s.ok has no series.
    assert metrics['jobhost_job_failing{critical="false",job="s.fails"}'] == 1
    assert metrics['jobhost_job_failure_streak{critical="false",job="s.fails"}'] == 1
    assert not [name for name in metrics if "failing{" in name and "s.fails" not in name]
    assert metrics["jobhost_clock_skew_seconds"] == pytest.approx(2.5, abs=0.01)
    assert metrics["jobhost_store_up"] == 1
    assert metrics["jobhost_stuck_runs"] == 1


def test_without_the_job_label_no_gauge_names_a_job(scene: SimpleNamespace) -> None:
    scene.settings = scene.settings.model_copy(update={"metrics_job_label": False})
    metrics = _scrape(scene)
    assert metrics["jobhost_critical_jobs_overdue"] == 1
    assert not [name for name in metrics if "job=" in name]


def test_with_a_dashboard_url_the_job_gauges_carry_it(scene: SimpleNamespace) -> None:
    scene.settings = scene.settings.model_copy(
        update={"dashboard_url": "https://ops.example.com/jobhost"}
    )
    metrics = _scrape(scene)
    link = 'dashboard_url="https://ops.example.com/jobhost"'
    assert metrics[f'jobhost_job_failing{{critical="false",{link},job="s.fails"}}'] == 1
    assert metrics[f'jobhost_job_overdue{{critical="true",{link},job="s.nightly"}}'] == 1


def test_a_scrape_reads_the_store_once_per_refresh_interval(scene: SimpleNamespace) -> None:
    ticks = [0.0]
    gauges = JobGauges(scene, monotonic=lambda: ticks[0])
    # Each read of the store makes new figures; a cached answer is the same object.
    first = gauges.figures()
    assert first is not None
    assert all(gauges.figures() is first for _ in range(5))
    ticks[0] = 29.0
    assert gauges.figures() is first
    ticks[0] = 30.0
    figures = gauges.figures()
    assert figures is not None and figures is not first
    assert figures.by_status["failing"] == 1


def test_an_unreachable_store_leaves_the_store_figures_out(scene: SimpleNamespace) -> None:
    scene.store = Store(create_store_engine("postgresql+psycopg://nobody@127.0.0.1:1/none"))
    scene.status.store_ok = False
    metrics = _scrape(scene)
    assert metrics["jobhost_store_up"] == 0
    assert not [name for name in metrics if name.startswith(("jobhost_jobs", "jobhost_live"))]


def _scrape(host: SimpleNamespace) -> dict[str, float]:
    """The gauges' Prometheus exposition, as {series: value} without the scope labels."""
    reader, render = prometheus_reader()
    provider = MeterProvider(metric_readers=[reader])
    register_gauges(provider.get_meter("jobhost"), host)
    try:
        text = render().decode()
    finally:
        provider.shutdown()
    found: dict[str, float] = {}
    for line in text.splitlines():
        match = re.match(r"(jobhost_[a-z_]+)(?:\{(.*)\})? (\S+)$", line)
        if match is None:
            continue
        labels = [
            part
            for part in re.findall(r'[a-z_]+="[^"]*"', match.group(2) or "")
            if not part.startswith("otel_scope_")
        ]
        name = match.group(1) + ("{" + ",".join(sorted(labels)) + "}" if labels else "")
        found[name] = float(match.group(3))
    return found
