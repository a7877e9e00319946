"""The runs-by-outcome chart for each range of the job page, on both stores: one job's counts
are what placing its runs one by one gives, in one statement, and neither the job's chart nor
the installation's sends more statements as the ledger grows in jobs and runs."""

from __future__ import annotations

import random
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import event, select
from sqlalchemy.engine import Engine

from jobhost.store import reading
from jobhost.store.outcome_counts import FINISHED_OUTCOMES, outcome_counts
from jobhost.store.schema import runs

# In the past of the database's clock, which bounds what the installation's chart may close.
NOW = datetime(2026, 5, 4, 10, 0, 20, 500_000, tzinfo=UTC)
RANGES = {
    "1h": (timedelta(hours=1), 12),
    "24h": (timedelta(hours=24), 24),
    "7d": (timedelta(days=7), 28),
    "30d": (timedelta(days=30), 30),
}
JOB = "reports.daily"
OUTCOMES = ["succeeded"] * 5 + ["failed", "timed_out", "missed", "skipped", "abandoned"]


@pytest.mark.parametrize("span", RANGES)
def test_one_jobs_chart_counts_each_run_in_its_slice(engine: Engine, span: str) -> None:
    width, slices = RANGES[span]
    start = NOW - width
    chance = random.Random(span)
    _seed(engine, chance, ("other.job", JOB), NOW - timedelta(days=31), NOW + timedelta(hours=1))
    # On each slice's first instant (counted there), on the range's end (not counted), a
    # microsecond before its start (not counted), unfinished runs (never counted), and a
    # cancelled run (an outcome the chart shows).
    step = width / slices
    edges = [start + step * index for index in range(slices)]
    rows = [_row(JOB, chance.choice(OUTCOMES), at) for at in edges]
    rows += [_row(JOB, "failed", NOW), _row(JOB, "failed", start - timedelta(microseconds=1))]
    rows += [_row(JOB, "running", None), _row(JOB, "pending", None)]
    rows += [_row(JOB, "cancelled", NOW - step / 2)]
    _insert(engine, rows)

    with reading(engine) as connection:
        got = outcome_counts(connection, start, NOW, slices, JOB, now=NOW)
    expected = _direct(engine, start, NOW, slices, JOB)
    assert got == expected
    assert all(got[index] for index in range(slices)), "every slice holds a run"
    assert sum(sum(one.values()) for one in got) > slices


def test_statements_per_chart_do_not_grow_with_jobs_or_runs(engine: Engine) -> None:
    chance = random.Random(11)
    first, last = NOW - timedelta(days=31), NOW
    _seed(engine, chance, (JOB, "a.one", "b.two"), first, last, runs=300)
    small = {(span, job): _statements(engine, span, job) for span in RANGES for job in (JOB, None)}
    names = tuple(f"job.{index:03d}" for index in range(200))
    _seed(engine, chance, (JOB, *names), first, last, runs=6000)
    large = {(span, job): _statements(engine, span, job) for span in RANGES for job in (JOB, None)}

    assert small == large, large
    for span in RANGES:
        # One job's chart: one statement, whatever the range.
        assert large[span, JOB] == (1, 1), span
        # The installation's: its first look keeps a day of minutes per write (four statements
        # each); after that a handful of reads.
        first_look, again = large[span, None]
        assert first_look <= 7 + 4 * max(1, RANGES[span][0].days), (span, first_look)
        assert again <= 6, span


def _statements(engine: Engine, span: str, job: str | None) -> tuple[int, ...]:
    """Statements sent by the chart of ``span``, asked twice (its first look, then again),
    besides the BEGIN of the reading transaction (SQLite's only; every page has one)."""
    width, slices = RANGES[span]
    sent: list[str] = []

    def count(_conn: object, _cursor: object, statement: str, *_: object) -> None:
        if not statement.startswith("BEGIN"):
            sent.append(statement)

    event.listen(engine, "before_cursor_execute", count)
    try:
        counted = []
        for _ in range(2):
            before = len(sent)
            with reading(engine) as connection:
                outcome_counts(connection, NOW - width, NOW, slices, job, now=NOW)
            counted.append(len(sent) - before)
    finally:
        event.remove(engine, "before_cursor_execute", count)
    if job is None:
        _forget_kept(engine)
    return (counted[0], counted[1])


def _forget_kept(engine: Engine) -> None:
    """The installation's first look again after the ledger grew (kept minutes would answer
    the runs added since wrongly)."""
    from jobhost.store.schema import run_outcome_minutes, run_outcome_spans

    with engine.begin() as connection:
        connection.execute(run_outcome_minutes.delete())
        connection.execute(run_outcome_spans.delete())


def _direct(
    engine: Engine, start: datetime, end: datetime, slices: int, job: str
) -> list[dict[str, int]]:
    """Each run of ``job`` placed in its slice one by one, in Python."""
    width = (end - start) / slices
    edges = [start + width * index for index in range(slices + 1)]
    edges[-1] = end
    counts: list[dict[str, int]] = [{} for _ in range(slices)]
    with reading(engine) as connection:
        found = connection.execute(
            select(runs.c.outcome, runs.c.finished_at).where(runs.c.job_name == job)
        )
        for outcome, finished in found:
            if finished is None or outcome not in FINISHED_OUTCOMES or not start <= finished < end:
                continue
            index = next(i for i in range(slices) if edges[i] <= finished < edges[i + 1])
            counts[index][outcome] = counts[index].get(outcome, 0) + 1
    return counts


def _seed(
    engine: Engine,
    chance: random.Random,
    jobs: tuple[str, ...],
    first: datetime,
    last: datetime,
    *,
    runs: int = 1500,
) -> None:
    seconds = (last - first).total_seconds()
    rows = []
    for _ in range(runs):
        finished = first + timedelta(seconds=chance.uniform(0, seconds))
        rows.append(_row(chance.choice(jobs), chance.choice(OUTCOMES), finished))
    # The last hour twice as dense, so the 1 h range has runs in every slice.
    for _ in range(runs // 10):
        finished = NOW - timedelta(seconds=chance.uniform(0, 3600))
        rows.append(_row(chance.choice(jobs), chance.choice(OUTCOMES), finished))
    _insert(engine, rows)


def _insert(engine: Engine, rows: list[dict[str, object]]) -> None:
    with engine.begin() as connection:
        connection.execute(runs.insert(), rows)


def _row(job: str, outcome: str, finished: datetime | None) -> dict[str, object]:
    started = (finished or NOW) - timedelta(seconds=3)
    return {
        "id": uuid.uuid4().hex,
        "job_name": job,
        "attempt": 1,
        "source": "schedule",
        "outcome": outcome,
        "host_id": "replica-0",
        "queued_at": started,
        "started_at": None if outcome == "pending" else started,
        "finished_at": finished,
    }
