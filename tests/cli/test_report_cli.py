"""``jobhost report``: every job with its triggers, state, runs and mismatch reasons, then hosts."""

from __future__ import annotations

import re
from datetime import timedelta

from jobhost.store.actions import pause_job
from tests.cli.operator_support import Operator, codes, now

JOBS = [
    {"name": "sample.override", "cron": "0 3 * * *"},
    {"name": "sample.no-next", "interval": "1h"},
    {"name": "sample.late", "interval": "1h"},
    {"name": "sample.leased", "cron": "0 2 * * *"},
    {"name": "sample.paused", "cron": "0 5 * * *", "timezone": "Europe/Berlin"},
    {"name": "sample.new", "cron": "30 6 * * *", "timezone": "America/New_York"},
    {"name": "sample.quiet", "cron": "0 0 * * *", "enabled": False},
]

JOB_KEYS = {
    "name",
    "module",
    "description",
    "critical",
    "enabled",
    "paused",
    "state",
    "declared_trigger",
    "effective_trigger",
    "next_fire_utc",
    "next_fire_local",
    "last_run",
    "recent_outcomes",
    "mismatch",
    "status",
    "concurrency_group",
    "waiting_for",
}


def _every_reason(operator: Operator) -> None:
    operator.configure(
        JOBS, overrides={"sample.override": {"cron": "0 4 * * *"}}, extra_plugin=True
    )
    operator.sync(leave_out=["sample.new"])
    t = now()
    operator.set_schedule("sample.no-next", next_occurrence=None, trigger_expression="2h")
    operator.set_schedule(
        "sample.late", next_occurrence=t - timedelta(hours=2), created_at=t - timedelta(hours=5)
    )
    operator.add_run("sample.late", "succeeded", started=t - timedelta(hours=4))
    operator.add_run(
        "sample.late",
        "missed",
        started=t - timedelta(minutes=30),
        occurrence=t - timedelta(hours=1),
        reason="paused",
    )
    operator.set_schedule(
        "sample.leased",
        lease_owner="gone-host",
        lease_expires_at=t - timedelta(minutes=2),
        lease_run_id="r-dead",
    )
    with operator.engine.begin() as connection:
        pause_job(connection, "sample.paused", "alice", "investigating INC-7", t)
    operator.add_orphan("sample.gone")


def test_json_report_names_every_mismatch_reason(operator: Operator) -> None:
    _every_reason(operator)
    # The full comparison of this installation's catalog with the store (store-differs).
    done, report = operator.json("report", "--check-catalog")
    assert done.returncode == 0, done.stderr
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z", report["generated_at"])
    assert report["hosts"] == []
    jobs = {job["name"]: job for job in report["jobs"]}
    assert list(jobs) == sorted(jobs)
    assert all(set(job) == JOB_KEYS for job in jobs.values())

    override = jobs["sample.override"]
    assert codes(override) == ["override", "no-live-host"]
    assert "cron '0 4 * * *' (UTC) instead of cron '0 3 * * *' (UTC)" in override["mismatch"][0]
    assert override["declared_trigger"] == {
        "kind": "cron",
        "expression": "0 3 * * *",
        "timezone": "UTC",
    }
    assert override["effective_trigger"] == {
        "kind": "cron",
        "expression": "0 4 * * *",
        "timezone": "UTC",
        "source": "override",
    }
    assert override["next_fire_utc"].endswith("T04:00:00Z")

    no_next = jobs["sample.no-next"]
    assert codes(no_next) == ["store-differs", "no-next-fire", "no-live-host"]
    assert "the store has every 2h, the catalog every 1h" in no_next["mismatch"][0]
    late = jobs["sample.late"]
    assert codes(late) == ["next-fire-past", "overdue", "no-live-host"]
    assert "has no success after it within its grace 30m" in late["mismatch"][1]
    # The missed row is the newest outcome, but not an attempt: last_run is the success.
    assert late["recent_outcomes"] == ["missed", "succeeded"]
    assert late["last_run"]["outcome"] == "succeeded"
    assert late["last_run"]["duration_ms"] == 2000
    assert set(late["last_run"]) == {
        "run_id",
        "outcome",
        "started_at",
        "finished_at",
        "duration_ms",
        "error",
        "backfill_id",
    }
    assert late["last_run"]["backfill_id"] is None
    leased = jobs["sample.leased"]
    assert codes(leased) == ["lease-expired", "no-live-host"]
    assert "gone-host" in leased["mismatch"][0]

    paused = jobs["sample.paused"]
    assert (paused["state"], paused["paused"], paused["enabled"]) == ("paused", True, True)
    assert codes(paused) == ["paused", "no-live-host"]
    assert "by alice" in paused["mismatch"][0]
    assert "investigating INC-7" in paused["mismatch"][0]
    assert re.fullmatch(r".*T0[34]:00:00Z", paused["next_fire_utc"])
    assert paused["next_fire_local"].endswith(("T05:00:00+01:00", "T05:00:00+02:00"))

    never_synced = jobs["sample.new"]
    assert never_synced["state"] == "enabled"
    assert never_synced["next_fire_local"].split("T")[1].startswith("06:30:00-0")
    assert never_synced["last_run"] is None
    assert codes(never_synced) == ["no-live-host"]

    quiet = jobs["sample.quiet"]
    assert (quiet["state"], quiet["next_fire_utc"], quiet["mismatch"]) == ("disabled", None, [])
    unconfigured = jobs["extra.needs-config"]
    assert unconfigured["state"] == "disabled"
    assert codes(unconfigured) == ["not-configured"]
    assert "[modules.extra]" in unconfigured["mismatch"][0]

    gone = jobs["sample.gone"]
    assert (gone["state"], gone["declared_trigger"]) == ("orphaned", None)
    assert gone["effective_trigger"]["expression"] == "1h"
    assert codes(gone) == ["orphaned"]


def test_text_report_fits_80_columns_without_colour_off_a_terminal(operator: Operator) -> None:
    _every_reason(operator)
    done = operator.jobhost("report", "--long", "--all")
    assert done.returncode == 0, done.stderr
    text = done.stdout
    assert "\x1b[" not in text
    assert max(len(line) for line in text.splitlines()) <= 80
    for code in (
        "override",
        "no-next-fire",
        "next-fire-past",
        "overdue",
        "lease-expired",
        "orphaned",
        "paused",
        "no-live-host",
        "not-configured",
    ):
        assert f"!        {code}: " in text, code
    assert "no live host: nothing fires the jobs" in text
    assert "(Europe/Berlin)" in text


def test_live_hosts_with_their_clock_skew_and_one_job(operator: Operator) -> None:
    operator.configure([{"name": "sample.one", "cron": "0 3 * * *"}])
    operator.sync()
    t = now()
    operator.add_host("h-live", seen=t, skew=0.25)
    operator.add_host("h-dead", seen=t - timedelta(minutes=10))
    operator.add_host("h-stopped", seen=t, stopped=True)
    done, report = operator.json("report", "--job", "sample.one")
    assert done.returncode == 0, done.stderr
    assert [host["id"] for host in report["hosts"]] == ["h-live"]
    assert set(report["hosts"][0]) == {
        "id",
        "hostname",
        "pid",
        "version",
        "started_at",
        "last_seen_at",
        "clock_skew_seconds",
        "catalog_version",
        "synced_at",
        "schedule_lag_seconds",
    }
    assert report["hosts"][0]["clock_skew_seconds"] == 0.25
    assert [job["name"] for job in report["jobs"]] == ["sample.one"]
    assert report["jobs"][0]["mismatch"] == []

    text = operator.jobhost("report")
    assert "h-live" in text.stdout and "+0.250s" in text.stdout
    assert "h-dead" not in text.stdout


def test_an_unknown_job_and_an_invalid_catalog(sqlite_operator: Operator) -> None:
    operator = sqlite_operator
    operator.configure(
        [{"name": "sample.one", "cron": "0 3 * * *"}],
        modules={"extra": {"broken": True}},
        extra_plugin=True,
    )
    unknown = operator.jobhost("report", "--job", "sample.onx", "--check-catalog")
    assert unknown.returncode == 2
    assert "did you mean sample.one" in unknown.stderr
    # The report is still printed from what loaded; the exit status says the catalog is bad.
    operator.add_orphan("extra.broken", module="extra")
    done, report = operator.json("report", "--check-catalog")
    assert done.returncode == 3
    assert "extra.broken" in done.stderr and "cron" in done.stderr
    jobs = {job["name"]: job for job in report["jobs"]}
    assert set(jobs) == {"sample.one", "extra.needs-config", "extra.broken"}
    # A stored job whose declaration has problems is not orphaned: it is invalid.
    assert jobs["extra.broken"]["state"] == "enabled"
    assert codes(jobs["extra.broken"]) == ["invalid"]
    assert "cron" in jobs["extra.broken"]["mismatch"][0]
