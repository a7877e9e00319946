"""``jobhost failures``: failed, timed-out, abandoned and stuck runs of every job, newest first,
read from the store alone, on both stores."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import update

from jobhost.store.schema import runs
from tests.cli.operator_support import Operator, now


def _ledger(operator: Operator) -> dict[str, str]:
    operator.configure(
        [
            {"name": "sample.nightly", "cron": "0 3 * * *"},
            {"name": "sample.hourly", "interval": "1h"},
        ]
    )
    operator.sync()
    t = now().replace(microsecond=0)
    hour = timedelta(hours=1)
    ids = {
        "old": operator.add_run(
            "sample.nightly", "failed", started=t - 50 * hour, error="HTTP 503 from billing"
        ),
        "ok": operator.add_run("sample.nightly", "succeeded", started=t - 40 * hour),
        "failed": operator.add_run(
            "sample.nightly", "failed", started=t - 5 * hour, error="disk full\nat /var/lib"
        ),
        "timed-out": operator.add_run(
            "sample.hourly", "timed_out", started=t - 3 * hour, attempt=2, error="took 60s"
        ),
        "abandoned": operator.add_run(
            "sample.nightly", "abandoned", started=t - 2 * hour, error="its host died"
        ),
        "stuck": operator.add_run(
            "sample.hourly",
            "running",
            started=t - hour,
            lease_expires_at=t - timedelta(minutes=5),
        ),
    }
    operator.add_run("sample.hourly", "missed", started=t - 4 * hour, occurrence=t - 4 * hour)
    with operator.engine.begin() as connection:
        connection.execute(
            update(runs).where(runs.c.id == ids["timed-out"]).values(error_type="TimeoutError")
        )
    return ids


def test_failures_of_every_job_newest_first_with_streaks(operator: Operator) -> None:
    ids = _ledger(operator)
    done, found = operator.json("failures")
    assert done.returncode == 0, done.stderr
    rows = found["failures"]
    assert [row["run_id"] for row in rows] == [
        ids["stuck"],
        ids["abandoned"],
        ids["timed-out"],
        ids["failed"],
        ids["old"],
    ]
    assert [row["outcome"] for row in rows] == [
        "stuck",
        "abandoned",
        "timed_out",
        "failed",
        "failed",
    ]
    # sample.nightly: abandoned and failed since its success; sample.hourly: one timed out.
    assert [row["streak"] for row in rows] == [1, 2, 1, 2, 2]
    failed = rows[3]
    assert (failed["job"], failed["error_type"], failed["error"]) == (
        "sample.nightly",
        "Failure",
        "disk full",
    )
    assert rows[2]["attempt"] == 2 and rows[2]["error_type"] == "TimeoutError"
    assert found["next_cursor"] is None and found["searched_to"] is None

    text = operator.jobhost("failures").stdout
    lines = text.splitlines()
    assert len(lines) == 5
    assert "stuck" in lines[0] and "sample.hourly" in lines[0]
    assert "failed" in lines[3] and "streak 2" in lines[3] and "Failure: disk full" in lines[3]
    assert "/var/lib" not in text  # the first line of a message only
    # Within 80 columns: the time without year and seconds, the run id's first 8 characters,
    # the attempt and the streak past 1 only; --wide: every field whole.
    assert all(len(line) <= 80 for line in lines)
    assert lines[3].startswith(f"{_finished(found, 3):%m-%d %H:%MZ}  {ids['failed'][:8]}  failed")
    assert "attempt" not in lines[3] and ids["failed"] not in text
    assert "attempt 2" in lines[2] and "streak" not in lines[2]
    wide = operator.jobhost("failures", "--wide").stdout.splitlines()
    assert f"{_finished(found, 3):%Y-%m-%d %H:%M:%SZ}  failed" in wide[3]
    assert f"attempt 1  streak 2  run {ids['failed']}  Failure: disk full" in wide[3]


def _finished(found: dict[str, Any], index: int) -> datetime:
    return datetime.fromisoformat(found["failures"][index]["finished_at"].replace("Z", "+00:00"))


def test_a_long_name_and_error_are_cut_to_80_columns_and_whole_when_wide(
    operator: Operator,
) -> None:
    name = "sample.reconcile-every-ledger-of-every-tenant-before-the-books-close"
    error = "POST https://billing.example.invalid/" + "reconciliation/" * 8 + "close failed"
    operator.configure([{"name": name, "interval": "1h"}])
    operator.sync()
    t = now().replace(microsecond=0)
    for hours in (3, 2, 1):
        operator.add_run(name, "failed", started=t - timedelta(hours=hours), error=error)
    (line,) = operator.jobhost("failures").stdout.splitlines()
    assert len(line) == 80 and line.endswith("...")
    # One line for the three, the job's start and end kept around the cut, with the count.
    assert "  sample.r...ks-close \N{MULTIPLICATION SIGN} 3  streak 3  Fail" in line
    (wide,) = operator.jobhost("failures", "--wide").stdout.splitlines()
    assert f"{name} \N{MULTIPLICATION SIGN} 3  attempt 1  streak 3  run " in wide
    assert wide.endswith(f"Failure: {error}")
    # Notes are wrapped to 80 columns too.
    none = operator.jobhost("failures", "--grep", "no such text in any error at all")
    assert none.returncode == 0
    assert all(len(text) <= 80 for text in none.stdout.splitlines())


def test_since_job_grep_and_limit_narrow_the_list(operator: Operator) -> None:
    ids = _ledger(operator)
    done, recent = operator.json("failures", "--since", "4h")
    assert done.returncode == 0, done.stderr
    assert [r["run_id"] for r in recent["failures"]] == [
        ids["stuck"],
        ids["abandoned"],
        ids["timed-out"],
    ]
    done, nightly = operator.json("failures", "--job", "sample.nightly")
    assert [r["run_id"] for r in nightly["failures"]] == [
        ids["abandoned"],
        ids["failed"],
        ids["old"],
    ]
    done, grep = operator.json("failures", "--grep", "http 503")
    assert [r["run_id"] for r in grep["failures"]] == [ids["old"]]
    done, by_type = operator.json("failures", "--grep", "timeouterror")
    assert [r["run_id"] for r in by_type["failures"]] == [ids["timed-out"]]
    done, two = operator.json("failures", "--limit", "2")
    assert [r["run_id"] for r in two["failures"]] == [ids["stuck"], ids["abandoned"]]
    assert two["next_cursor"]
    since_date = (now() - timedelta(days=30)).date().isoformat()
    done, dated = operator.json("failures", "--since", since_date)
    assert done.returncode == 0 and len(dated["failures"]) == 5

    none = operator.jobhost("failures", "--grep", "no such text")
    assert none.returncode == 0
    assert (
        " ".join(none.stdout.split())
        == "no failed, timed-out, abandoned or stuck run with 'no such text' in its error"
        " left open (--all shows resolved ones)"
    )


def test_bad_options_and_unknown_jobs_are_usage_errors(sqlite_operator: Operator) -> None:
    sqlite_operator.configure([{"name": "sample.nightly", "cron": "0 3 * * *"}])
    sqlite_operator.sync()
    unknown = sqlite_operator.jobhost("failures", "--job", "sample.nightlx")
    assert unknown.returncode == 2
    assert "did you mean sample.nightly" in unknown.stderr
    for since in ("yesterday", "-2h", "2026-13-01", "2026-11-28T06:00:00"):
        bad = sqlite_operator.jobhost("failures", "--since", since)
        assert bad.returncode == 2, since
        assert "--since" in bad.stderr, bad.stderr
    empty = sqlite_operator.jobhost("failures", "--grep", "  ")
    assert empty.returncode == 2 and "--grep" in empty.stderr
    limit = sqlite_operator.jobhost("failures", "--limit", "0")
    assert limit.returncode == 2
    fine = sqlite_operator.jobhost("failures")
    assert fine.returncode == 0
    assert " ".join(fine.stdout.split()) == (
        "no failed, timed-out, abandoned or stuck run left open (--all shows resolved ones)"
    )


def test_it_reads_the_store_without_loading_plugins(sqlite_operator: Operator) -> None:
    sqlite_operator.configure([{"name": "sample.nightly", "cron": "0 3 * * *"}])
    sqlite_operator.add_run("sample.nightly", "failed", error="boom")
    # A plugin that cannot be imported: a command that loads plugins would fail.
    text = sqlite_operator.config.read_text().replace(
        "plugins = [", 'plugins = ["/nonexistent/plugin.py", '
    )
    sqlite_operator.config.write_text(text)
    done, found = sqlite_operator.json("failures")
    assert done.returncode == 0, done.stderr
    assert [row["error"] for row in found["failures"]] == ["boom"]
