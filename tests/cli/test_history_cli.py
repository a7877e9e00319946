"""``jobhost history NAME``: one job's ledger newest first, missed and skipped rows included."""

from __future__ import annotations

from datetime import timedelta

from tests.cli.operator_support import Operator, now

TRACE = "0af7651916cd43dd8448eb211c80319c"


def _ledger(operator: Operator) -> dict[str, str]:
    operator.configure([{"name": "sample.nightly", "cron": "0 3 * * *"}])
    operator.sync()
    t = now().replace(microsecond=0)
    day = timedelta(days=1)
    return {
        "old-success": operator.add_run(
            "sample.nightly", "succeeded", started=t - 4 * day, occurrence=t - 4 * day
        ),
        "failure": operator.add_run(
            "sample.nightly",
            "failed",
            started=t - 3 * day,
            occurrence=t - 3 * day,
            error="disk full",
            trace_id=TRACE,
        ),
        "missed": operator.add_run(
            "sample.nightly",
            "missed",
            started=t - day,  # recorded when the pause ended
            occurrence=t - 2 * day,
            reason="paused",
        ),
        "skipped": operator.add_run(
            "sample.nightly",
            "skipped",
            started=t - day + timedelta(seconds=1),
            occurrence=t - day,
            reason="overlap: the previous run was still running",
        ),
        "manual": operator.add_run(
            "sample.nightly", "succeeded", started=t - timedelta(hours=1), source="manual"
        ),
    }


def test_history_lists_every_row_newest_first_with_reasons(operator: Operator) -> None:
    ids = _ledger(operator)
    done, history = operator.json("history", "sample.nightly")
    assert done.returncode == 0, done.stderr
    assert history["job"] == "sample.nightly"
    assert [run["run_id"] for run in history["runs"]] == [
        ids["manual"],
        ids["skipped"],
        ids["missed"],
        ids["failure"],
        ids["old-success"],
    ]
    missed = history["runs"][2]
    assert (missed["outcome"], missed["reason"], missed["attempt"]) == ("missed", "paused", 0)
    assert missed["started_at"] is None and missed["occurrence"].endswith("Z")
    failure = history["runs"][3]
    assert (failure["error"], failure["trace_id"], failure["duration_ms"]) == (
        "disk full",
        TRACE,
        2000,
    )
    assert history["runs"][0]["occurrence"] is None
    assert history["runs"][0]["source"] == "manual"

    text = operator.jobhost("history", "sample.nightly").stdout
    assert max(len(line) for line in text.splitlines()) <= 80
    assert "\x1b[" not in text
    for needle in ("missed", "reason: paused", "skipped", "error: Failure: disk full", TRACE):
        assert needle in text, needle
    assert text.index("(manual)") < text.index("skipped") < text.index("missed")


def test_outcome_and_limit_filters_and_retired_jobs(operator: Operator) -> None:
    ids = _ledger(operator)
    done, missed = operator.json("history", "sample.nightly", "--outcome", "missed")
    assert done.returncode == 0, done.stderr
    assert [run["run_id"] for run in missed["runs"]] == [ids["missed"]]
    done, newest = operator.json("history", "sample.nightly", "--limit", "2")
    assert [run["run_id"] for run in newest["runs"]] == [ids["manual"], ids["skipped"]]

    # A job no module declares any more still has its history.
    operator.add_run("sample.retired", "succeeded", started=now() - timedelta(days=30))
    done, retired = operator.json("history", "sample.retired")
    assert done.returncode == 0, done.stderr
    assert [run["outcome"] for run in retired["runs"]] == ["succeeded"]


def test_an_unknown_outcome_or_job_is_a_usage_error(sqlite_operator: Operator) -> None:
    sqlite_operator.configure([{"name": "sample.nightly", "cron": "0 3 * * *"}])
    sqlite_operator.sync()
    bad = sqlite_operator.jobhost("history", "sample.nightly", "--outcome", "exploded")
    assert bad.returncode == 2
    assert "'exploded' is not one of" in bad.stderr
    unknown = sqlite_operator.jobhost("history", "sample.nightlx")
    assert unknown.returncode == 2
    assert "did you mean sample.nightly" in unknown.stderr
