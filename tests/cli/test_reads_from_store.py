"""Read-only commands answer from the store alone: no plugin is loaded, none need import.

A store synced by a catalog holds each job's effective declaration; the configuration is then
replaced by one whose only plugin cannot be imported (the application's module package is not
installed here, as on a bastion or a laptop). Every read command still answers, from the store.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.cli.operator_support import Operator
from tests.toml_values import toml_value

NIGHTLY = {
    "name": "sample.nightly",
    "cron": "30 2 * * *",
    "timezone": "Europe/Berlin",
    "dst_gap": "skip",
    "critical": True,
    "description": "Closes the day's billing",
    "timeout": "10m",
    "max_attempts": 3,
    "backoff": "1m",
    "overlap": "allow",
    "max_concurrent": 2,
    "misfire": "skip",
    "misfire_grace": "5m",
}
EVERY = {"name": "sample.every", "interval": "15m"}
ABSENT_PLUGIN = "jobhost_absent_application_modules"


def _synced(operator: Operator) -> Operator:
    operator.configure([NIGHTLY, EVERY])
    operator.sync()
    operator.add_run("sample.nightly", "failed", error="ledger closed")
    # From here on the application's modules are not installed: the one plugin named in the
    # settings does not import.
    operator.config.write_text(
        f"database_url = {toml_value(operator.url)}\nplugins = {toml_value([ABSENT_PLUGIN])}\n"
    )
    return operator


def _ok(operator: Operator, *args: str) -> Any:
    done, data = operator.json(*args)
    assert done.returncode == 0, done.stderr
    assert ABSENT_PLUGIN not in done.stderr
    return data


def test_report_shows_each_job_as_the_store_holds_it(operator: Operator) -> None:
    _synced(operator)
    jobs = {job["name"]: job for job in _ok(operator, "report")["jobs"]}
    assert set(jobs) == {"sample.nightly", "sample.every"}
    nightly = jobs["sample.nightly"]
    assert nightly["description"] == "Closes the day's billing"
    assert nightly["critical"] is True
    assert nightly["state"] == "enabled"
    assert nightly["effective_trigger"]["dst_policy"] == "dst_gap=skip"
    assert nightly["last_run"]["outcome"] == "failed"
    assert nightly["status"] == "failing"
    assert jobs["sample.every"]["effective_trigger"]["expression"] == "15m"

    one = _ok(operator, "report", "--job", "sample.nightly")
    assert [job["name"] for job in one["jobs"]] == ["sample.nightly"]
    assert one["jobs"][0]["critical"] is True


def test_history_next_and_jobs_show_answer_from_the_store(operator: Operator) -> None:
    _synced(operator)
    runs = _ok(operator, "history", "sample.nightly")["runs"]
    assert [(run["outcome"], run["error"]) for run in runs] == [("failed", "ledger closed")]

    done = operator.jobhost(
        "next", "sample.nightly", "--after", "2026-03-28T12:00:00Z", "-n", "2", "--json"
    )
    assert done.returncode == 0, done.stderr
    assert "dst_gap=skip" in done.stderr
    # 02:30 does not exist in Berlin on 29 March 2026: under dst_gap=skip that day is missed.
    assert [item["utc"] for item in json.loads(done.stdout)] == [
        "2026-03-30T00:30:00Z",
        "2026-03-31T00:30:00Z",
    ]

    shown = _ok(operator, "jobs", "show", "sample.nightly")
    assert shown["description"] == "Closes the day's billing"
    assert shown["critical"] is True
    assert shown["job_source"] == "module"
    assert shown["dst_policy"] == "dst_gap=skip, dst_repeat=once"
    assert shown["trigger"] == "cron '30 2 * * *' (Europe/Berlin; dst_gap=skip)"
    assert shown["policies"] | {"retry_on": None} == {
        "misfire": "skip",
        "catch_up_limit": 10,
        "misfire_grace": "5m",
        "overlap": "allow",
        "max_concurrent": 2,
        "timeout": "10m",
        "lease": None,
        "overdue_after": None,
        "max_attempts": 3,
        "backoff": "1m",
        "backoff_max": "1h",
        "jitter": 0.0,
        "retry_on": None,
    }
    listed = {job["name"]: job for job in _ok(operator, "jobs", "list")["jobs"]}
    assert listed["sample.every"]["trigger"] == "every 15m"


def test_operator_actions_and_health_need_no_plugin(operator: Operator) -> None:
    _synced(operator)
    paused = operator.jobhost("pause", "sample.every", "--reason", "maintenance")
    assert paused.returncode == 0, paused.stderr
    assert operator.schedule("sample.every").paused  # type: ignore[union-attr]
    resumed = operator.jobhost("resume", "sample.every", "--reason", "done")
    assert resumed.returncode == 0, resumed.stderr
    assert not operator.schedule("sample.every").paused  # type: ignore[union-attr]

    queued = _ok(operator, "trigger", "sample.every", "--no-wait")
    assert queued["outcome"] == "queued"
    assert [r.job_name for r in operator.requests()] == ["sample.every"]

    done, health = operator.json("health", "--no-hosts")
    assert ABSENT_PLUGIN not in done.stderr
    checks = {check["name"]: check for check in health["checks"]}
    assert checks["catalog"]["ok"] is True
    assert "2 jobs" in checks["catalog"]["detail"]
    # The critical flag comes from the store: the critical job's failed last run fails health.
    assert done.returncode == 1
    assert checks["critical-jobs-last-run"]["ok"] is False
    assert "sample.nightly" in checks["critical-jobs-last-run"]["detail"]
    assert [name for name, check in checks.items() if not check["ok"]] == ["critical-jobs-last-run"]


def test_an_unknown_job_is_still_refused_with_suggestions(operator: Operator) -> None:
    _synced(operator)
    done = operator.jobhost("history", "sample.nightlyy")
    assert done.returncode == 2
    assert "sample.nightly" in done.stderr


def test_check_catalog_compares_this_installations_catalog_with_the_store(
    operator: Operator,
) -> None:
    operator.configure([NIGHTLY, EVERY])
    operator.sync()
    operator.configure([NIGHTLY, {**EVERY, "interval": "5m"}])
    plain = _ok(operator, "report")
    every = {job["name"]: job for job in plain["jobs"]}["sample.every"]
    assert every["effective_trigger"]["expression"] == "15m"
    assert not any(m.startswith("store-differs") for m in every["mismatch"])

    done, checked = operator.json("report", "--check-catalog")
    assert done.returncode == 0, done.stderr
    every = {job["name"]: job for job in checked["jobs"]}["sample.every"]
    assert any(m.startswith("store-differs") for m in every["mismatch"])
    assert "the store holds" in done.stderr

    _synced(operator)
    broken = operator.jobhost("report", "--check-catalog")
    assert broken.returncode == 3
    assert ABSENT_PLUGIN in broken.stderr


@pytest.mark.parametrize("command", [["report"], ["history", "sample.nightly"]])
def test_a_read_imports_neither_alembic_nor_any_plugin(
    sqlite_operator: Operator, command: list[str]
) -> None:
    _synced(sqlite_operator)
    probe = (
        "print('LOADED', sorted(m for m in sys.modules if m.split('.')[0] in "
        "('alembic', 'sample_jobs', 'jobhost_absent_application_modules') "
        "or m.startswith('jobhost.plugins') or m == 'jobhost.catalog.build'), file=sys.stderr)"
    )
    done = sqlite_operator.probed(probe, *command)
    assert done.returncode == 0, done.stderr
    assert "LOADED []" in done.stderr, done.stderr


def test_a_finished_command_leaves_the_collector_nothing_to_walk_on_the_way_out(
    sqlite_operator: Operator,
) -> None:
    _synced(sqlite_operator)
    # Python's shutdown collects what the collector tracks; after the command, that is only
    # what was made since it ended, not the report, the store's tables and every module.
    probe = "print('TRACKED', len(gc.get_objects()), file=sys.stderr)"
    done = sqlite_operator.probed(probe, "report", "--json")
    assert done.returncode == 0, done.stderr
    assert [job["name"] for job in json.loads(done.stdout)["jobs"]] == [
        "sample.every",
        "sample.nightly",
    ]
    tracked = int(done.stderr.rsplit("TRACKED", 1)[1])
    assert tracked < 100, done.stderr
