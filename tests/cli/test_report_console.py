"""``jobhost report`` for people: a summary, one line per job, filters, sorting, statuses."""

from __future__ import annotations

import io
from datetime import timedelta

import pytest

from jobhost.operations.render import stdout_style
from jobhost.store.actions import pause_job
from tests.cli.operator_support import Operator, now

LONG = "sample.a-job-whose-name-is-much-longer-than-any-column-of-the-report-allows"
URL = "https://billing.example.invalid/api/v2/" + "reconciliation/" * 6 + "close-day"
JOBS = [
    {"name": "sample.ok", "interval": "1h"},
    {"name": "sample.broken", "interval": "1h"},
    {"name": "sample.slow", "interval": "1h"},
    {"name": "sample.paused", "interval": "1h"},
    {"name": "sample.off", "interval": "1h", "enabled": False},
    {"name": LONG, "cron": "0 4 * * *", "timezone": "Europe/Berlin"},
]


def _catalog(operator: Operator) -> None:
    operator.configure(JOBS)
    operator.sync()
    t = now()
    operator.add_host("h-1", seen=t, skew=0.1)
    operator.add_run("sample.ok", "succeeded", started=t - timedelta(minutes=10))
    operator.add_run(
        "sample.broken", "failed", started=t - timedelta(minutes=5), error=f"POST {URL} failed"
    )
    operator.add_run("sample.slow", "succeeded", started=t - timedelta(minutes=50))
    operator.add_run(
        "sample.slow",
        "running",
        started=t - timedelta(minutes=3),
        host="h-1",
        lease_expires_at=t + timedelta(minutes=1),
    )
    # Paused long ago: its stored next fire is far behind, which is no news for a paused job.
    operator.set_schedule("sample.paused", next_occurrence=t - timedelta(hours=5))
    with operator.engine.begin() as connection:
        pause_job(connection, "sample.paused", "alice", "INC-9", t - timedelta(hours=6))


def test_json_adds_a_summary_and_a_status_per_job(operator: Operator) -> None:
    _catalog(operator)
    done, report = operator.json("report")
    assert done.returncode == 0, done.stderr
    statuses = {job["name"]: job["status"] for job in report["jobs"]}
    assert statuses == {
        "sample.ok": "ok",
        "sample.broken": "failing",
        "sample.slow": "running",
        "sample.paused": "paused",
        "sample.off": "disabled",
        LONG: "ok",
    }
    summary = report["summary"]
    assert summary["jobs"] == 6 and summary["live_hosts"] == 1
    assert summary["by_status"]["ok"] == 2 and summary["by_status"]["failing"] == 1
    assert summary["max_clock_skew_seconds"] == 0.1
    paused = next(job for job in report["jobs"] if job["name"] == "sample.paused")
    assert [reason.split(":")[0] for reason in paused["mismatch"]] == ["paused"]
    slow = next(job for job in report["jobs"] if job["name"] == "sample.slow")
    assert slow["last_run"]["outcome"] == "running"

    done, failing = operator.json("report", "--failing")
    assert [job["name"] for job in failing["jobs"]] == ["sample.broken"]
    assert failing["summary"]["jobs"] == 6
    # The JSON lists the selection in its order, the summary still counts every job.
    done, first = operator.json("report", "--sort", "state", "--limit", "2")
    assert [job["name"] for job in first["jobs"]] == ["sample.broken", "sample.slow"]
    assert first["summary"] == report["summary"]


def test_one_line_per_job_with_filters_and_sorting(sqlite_operator: Operator) -> None:
    operator = sqlite_operator
    _catalog(operator)
    text = operator.jobhost("report", "--all").stdout
    lines = text.splitlines()
    assert lines[0].startswith("jobhost report at ") and "6 jobs, 1 live host" in lines[0]
    assert "ok 2" in lines[1] and "failing 1" in lines[1] and "paused 1" in lines[1]
    # Piped, the name column is as wide as the longest name: every name is whole.
    assert max(len(line) for line in lines) <= len(LONG) + 60
    assert "\x1b[" not in text
    by_name = {line.split()[0]: line for line in lines if line.startswith("sample.")}
    assert by_name["sample.broken"].split()[1] == "failing"
    assert "failed" in by_name["sample.broken"] and "ago" in by_name["sample.broken"]
    assert by_name["sample.paused"].split()[1:3] == ["paused", "paused"]
    assert "running 3m" in by_name["sample.slow"]
    whole = next(line for line in lines if line.startswith(LONG))
    assert whole.split()[1] == "ok"
    assert len([line for line in lines if line.startswith("sample.")]) == len(JOBS)
    assert "nothing is firing it" not in text

    states = operator.jobhost("report", "--state", "failing", "--state", "running").stdout
    assert _names(states) == ["sample.broken", "sample.slow"]
    assert "6 jobs, 1 live host, 2 shown" in states
    assert _names(operator.jobhost("report", "--sort", "state", "--limit", "2").stdout) == [
        "sample.broken",
        "sample.slow",
    ]
    assert _names(operator.jobhost("report", "--module", "nope").stdout) == []
    bad = operator.jobhost("report", "--state", "happy")
    assert bad.returncode == 2 and "'happy' is not one of" in bad.stderr


def test_by_default_the_text_lists_only_the_jobs_that_are_not_ok(operator: Operator) -> None:
    _catalog(operator)
    text = operator.jobhost("report").stdout
    assert _names(text) == ["sample.broken", "sample.off", "sample.paused", "sample.slow"]
    assert "6 jobs, 1 live host, 4 shown" in text
    assert "ok 2  failing 1" in text, "the summary still counts every job"
    assert "2 ok jobs not listed (--all lists them)" in text
    assert "h-1" in text, "the live hosts are still listed"
    # A status or a job asked for by name is shown, ok or not; the JSON keeps every job.
    assert _names(operator.jobhost("report", "--state", "ok").stdout) == [LONG, "sample.ok"]
    assert "sample.ok " in operator.jobhost("report", "--job", "sample.ok").stdout
    assert len(operator.json("report")[1]["jobs"]) == len(JOBS)
    # The limit counts the jobs listed, after the ok ones are left out.
    limited = operator.jobhost("report", "--sort", "state", "--limit", "1").stdout
    assert _names(limited) == ["sample.broken"]
    long = operator.jobhost("report", "--long").stdout
    assert "sample.broken" in long and "sample.ok" not in long
    everything = operator.jobhost("report", "--all").stdout
    assert len(_names(everything)) == len(JOBS) and "not listed" not in everything


def test_long_and_job_show_the_detail_block_without_mid_word_wrapping(
    sqlite_operator: Operator,
) -> None:
    operator = sqlite_operator
    _catalog(operator)
    slow = operator.jobhost("report", "--job", "sample.slow").stdout
    assert "running since " in slow and "on h-1" in slow
    assert " in - on " not in slow
    assert "status   running" in slow
    paused = operator.jobhost("report", "--job", "sample.paused").stdout
    assert "next     paused" in paused
    assert "next-fire-past" not in paused
    long = operator.jobhost("report", "--long", "--all").stdout
    assert any(line.startswith(LONG) for line in long.splitlines())
    assert "..." not in long.replace("running since ... on", "")
    # The URL in the error is longer than a line: it overflows whole rather than breaking.
    assert any(line.strip() == URL for line in long.splitlines())


def _names(text: str) -> list[str]:
    return [line.split()[0] for line in text.splitlines() if line.startswith("sample.")]


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_no_color_turns_colour_off_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.stdout", _Terminal())
    monkeypatch.delenv("NO_COLOR", raising=False)
    assert stdout_style().colour is True
    monkeypatch.setenv("NO_COLOR", "1")
    assert stdout_style().colour is False


def test_trigger_prints_its_outcome_once(sqlite_operator: Operator) -> None:
    operator = sqlite_operator
    operator.configure([{"name": "sample.works", "interval": "1h"}])
    done = operator.jobhost("trigger", "sample.works")
    assert done.returncode == 0, done.stderr
    assert (done.stdout + done.stderr).count("succeeded") == 1
    assert done.stdout.startswith("succeeded: sample.works run ")


def test_grep_failing_finds_a_long_named_job_on_its_one_line(operator: Operator) -> None:
    failing = "billing.reconcile-every-ledger-of-every-tenant-before-close"
    operator.configure([{"name": n, "interval": "1h"} for n in (failing, "sample.ok")])
    operator.sync()
    t = now()
    operator.add_run(failing, "failed", started=t - timedelta(minutes=5), error="boom")
    operator.add_run("sample.ok", "succeeded", started=t - timedelta(minutes=5))
    done = operator.jobhost("report")
    assert done.returncode == 0, done.stderr
    # Piped, no name is cut: the line is as wide as the name needs.
    assert all(len(line) <= len(failing) + 60 for line in done.stdout.splitlines())
    # What `jobhost report | grep failing` prints: the summary, and the job's one line.
    grepped = [line for line in done.stdout.splitlines() if "failing" in line]
    assert len(grepped) == 2 and grepped[0].lstrip().startswith("ok 1  failing 1")
    assert grepped[1].split()[:2] == [failing, "failing"]
    assert " failed " in grepped[1] and grepped[1].endswith(" ago")
    full = operator.json("report")[1]
    assert failing in [job["name"] for job in full["jobs"]]
    detailed = operator.jobhost("report", "--long").stdout.splitlines()
    assert any(line.startswith(failing + " ") for line in detailed)
