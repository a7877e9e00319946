"""``jobhost backfill --dry-run``: the past occurrences a replay takes, by mode; refusals."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from tests.cli.operator_support import Operator

JOBS = [
    {"name": "sample.nightly", "cron": "0 3 * * *"},
    {"name": "sample.berlin", "cron": "30 2 * * *", "timezone": "Europe/Berlin"},
    {"name": "sample.hourly", "interval": "6h"},
    {"name": "sample.manual"},
]
RANGE = ("--from", "2026-11-20", "--to", "2026-11-27")


def night(day: int) -> datetime:
    return datetime(2026, 11, day, 3, tzinfo=UTC)


def iso(day: int) -> str:
    return f"2026-11-{day:02d}T03:00:00Z"


@pytest.fixture
def ledger(operator: Operator) -> Operator:
    """A week of sample.nightly: each night a different story in the ledger."""
    operator.configure(JOBS)
    operator.add_run("sample.nightly", "succeeded", occurrence=night(20))
    operator.add_run("sample.nightly", "failed", occurrence=night(21))
    operator.add_run("sample.nightly", "failed", occurrence=night(22))
    operator.add_run("sample.nightly", "succeeded", occurrence=night(22), attempt=2)
    operator.add_run("sample.nightly", "missed", occurrence=night(23))
    operator.add_run("sample.nightly", "timed_out", occurrence=night(24))
    operator.add_run("sample.nightly", "running", occurrence=night(25))
    # 26: never ran. Another job's failure on the same night is not this job's.
    operator.add_run("sample.berlin", "failed", occurrence=night(26))
    return operator


@pytest.mark.parametrize(
    ("mode", "days"),
    [("missing", [21, 23, 24, 26]), ("failed", [21, 24]), ("all", list(range(20, 27)))],
)
def test_each_mode_selects_from_the_ledger(ledger: Operator, mode: str, days: list[int]) -> None:
    done, result = ledger.json("backfill", "sample.nightly", *RANGE, "--mode", mode, "--dry-run")
    assert done.returncode == 0, done.stderr
    assert result == {
        "job": "sample.nightly",
        "mode": mode,
        "from": "2026-11-20T00:00:00Z",
        "to": "2026-11-27T00:00:00Z",
        "occurrences": [iso(day) for day in days],
    }
    assert f"{len(days)} of 7 occurrence(s)" in done.stderr
    # A dry run runs nothing and records nothing.
    assert len(ledger.runs("sample.nightly")) == 7


def test_the_default_mode_is_missing_one_instant_a_line(ledger: Operator) -> None:
    done = ledger.jobhost("backfill", "sample.nightly", *RANGE, "--dry-run")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [iso(day) for day in (21, 23, 24, 26)]


def test_dates_are_midnight_in_the_jobs_zone(sqlite_operator: Operator) -> None:
    sqlite_operator.configure(JOBS)
    done, result = sqlite_operator.json(
        "backfill", "sample.berlin", "--from", "2026-03-28", "--to", "2026-03-30", "--dry-run"
    )
    assert done.returncode == 0, done.stderr
    # 02:30 does not exist on 29 March in Berlin: the default dst_gap shift fires at 03:00.
    assert result["from"] == "2026-03-27T23:00:00Z"
    assert result["occurrences"] == ["2026-03-28T01:30:00Z", "2026-03-29T01:00:00Z"]


def test_an_interval_counts_from_its_stored_phase(operator: Operator) -> None:
    operator.configure(JOBS)
    operator.sync()
    operator.set_schedule("sample.hourly", interval_anchor=datetime(2026, 1, 1, 1, tzinfo=UTC))
    done, result = operator.json(
        "backfill", "sample.hourly", "--from", "2026-11-28T00:00:00Z",
        "--to", "2026-11-28T12:00+00:00", "--dry-run",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert result["occurrences"] == ["2026-11-28T01:00:00Z", "2026-11-28T07:00:00Z"]


def test_nothing_selected_says_nothing_to_do(ledger: Operator) -> None:
    done = ledger.jobhost(
        "backfill", "sample.nightly", "--from", "2026-11-20", "--to", "2026-11-21", "--dry-run"
    )
    assert (done.returncode, done.stdout) == (0, "")
    assert "nothing to do" in done.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("sample.nightlly", *RANGE), "unknown job 'sample.nightlly'; did you mean sample.nightly"),
        (("sample.nightly", "--from", "2026-11-27", "--to", "2026-11-20"), "must be after"),
        (("sample.nightly", "--from", "2026-11-27", "--to", "2026-11-27"), "must be after"),
        (("sample.nightly", "--from", "2026-11-20", "--to", "2999-01-01"), "reaches the future"),
        (("sample.nightly", "--from", "2026-11-20T00:00", "--to", "2026-11-21"), "has no zone"),
        (("sample.nightly", "--from", "last week", "--to", "2026-11-21"), "--from 'last week'"),
        (("sample.nightly", *RANGE, "--mode", "some"), "use one of missing, failed, all"),
        (("sample.manual", *RANGE), "has no schedule"),
        (("sample.hourly", *RANGE), "no phase in the store yet"),
    ],
)
def test_bad_input_exits_3_naming_the_job_and_the_fix(
    sqlite_operator: Operator, args: tuple[str, ...], message: str
) -> None:
    sqlite_operator.configure(JOBS)
    done = sqlite_operator.jobhost("backfill", *args, "--dry-run")
    assert done.returncode == 3, done.stderr
    assert message in done.stderr
    assert done.stdout == ""


def test_more_than_backfill_limit_exits_3_with_the_count_and_the_fix(operator: Operator) -> None:
    operator.configure(JOBS, backfill_limit=5)
    done = operator.jobhost("backfill", "sample.nightly", *RANGE, "--dry-run")
    assert done.returncode == 3
    assert "the range holds 7 occurrences, more than backfill_limit (5)" in done.stderr
    assert "narrow --from/--to, or raise backfill_limit" in done.stderr
    within = operator.jobhost("backfill", "sample.nightly", "--from", "2026-11-20",
                              "--to", "2026-11-25", "--dry-run")  # fmt: skip
    assert within.returncode == 0, within.stderr
    assert len(within.stdout.splitlines()) == 5


def test_the_trigger_the_hosts_fire_by_wins_over_the_catalogs(operator: Operator) -> None:
    operator.configure(JOBS)
    operator.sync()
    # Another catalog version wrote this row: the hosts fire at 05:00 Berlin time, so did they.
    operator.set_schedule(
        "sample.nightly", trigger_expression="0 5 * * *", timezone="Europe/Berlin"
    )
    done, result = operator.json(
        "backfill", "sample.nightly", "--from", "2026-11-28", "--to", "2026-11-30", "--dry-run"
    )
    assert done.returncode == 0, done.stderr
    assert result["from"] == "2026-11-27T23:00:00Z"
    assert result["occurrences"] == ["2026-11-28T04:00:00Z", "2026-11-29T04:00:00Z"]
