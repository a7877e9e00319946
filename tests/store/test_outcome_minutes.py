"""The runs-by-outcome chart answered from kept counts of closed minutes, on both stores: after
inserts, late finishes, a retention purge and across minute and slice boundaries it gives what
counting the runs one by one gives."""

from __future__ import annotations

import random
import uuid
from datetime import UTC, datetime, timedelta

from sqlalchemy import func, select, update
from sqlalchemy.engine import Engine

from jobhost.store import reading
from jobhost.store.outcome_counts import FINISHED_OUTCOMES, SETTLE_MARGIN, outcome_counts
from jobhost.store.purge import purge
from jobhost.store.schema import run_outcome_minutes, runs

# In the past of the database's clock, which bounds what the reader may close on PostgreSQL.
T0 = datetime(2026, 5, 4, 10, 0, tzinfo=UTC)
JOBS = ("a.one", "b.two", "c.three")


def test_kept_minutes_give_the_direct_count_through_late_finishes_and_a_purge(
    engine: Engine,
) -> None:
    chance = random.Random(7)
    _seed(engine, chance, T0, T0 + timedelta(hours=3), 400)
    # Runs on the minute and slice boundaries of the windows below.
    for at in (T0 + timedelta(minutes=30), T0 + timedelta(hours=1), T0 + timedelta(seconds=7.5)):
        _run(engine, "a.one", "failed", at)
    long_run = _run(engine, "b.two", "running", None, started=T0 + timedelta(minutes=20))

    now = T0 + timedelta(hours=3)
    _agree(engine, now)
    assert _kept(engine) > 0, "closed minutes are kept once asked for"

    # A run that was running all along finishes late, in a minute long past the margin: the
    # minutes after its start were never closed, so the chart still agrees.
    _finish(engine, long_run, "succeeded", T0 + timedelta(minutes=40))
    _agree(engine, now)

    # The retention purge deletes old runs (keeping the newest of each job): the kept counts
    # lose them in the same transaction.
    kept_before = _kept_runs(engine)
    gone = purge(
        engine,
        now=T0 + timedelta(days=1, minutes=75),
        ages={"runs": timedelta(days=1)},
        keep_last=5,
        batch_size=50,
    )["runs"]
    assert gone > 0
    assert _kept_runs(engine) < kept_before
    _agree(engine, now)

    # Later: more runs, finishing at or after the minutes already closed.
    later = T0 + timedelta(hours=5)
    _seed(engine, chance, now - SETTLE_MARGIN, later, 200)
    _agree(engine, later)


def test_the_counted_and_the_kept_answers_agree_with_the_live_count(engine: Engine) -> None:
    _seed(engine, random.Random(3), T0, T0 + timedelta(hours=1), 100)
    now = T0 + timedelta(hours=1)
    with reading(engine) as connection:
        live = outcome_counts(connection, T0, now, 12)
        kept = outcome_counts(connection, T0, now, 12, now=now)
        again = outcome_counts(connection, T0, now, 12, now=now)
    assert kept == live == again == _direct(engine, T0, now, 12, None)


def _agree(engine: Engine, now: datetime) -> None:
    """Every window shape the dashboard asks for, and some off the minute, agree twice (once
    filling the kept minutes, once reading them) with a direct count, for every job and each."""
    windows = [
        (now - timedelta(hours=1), 12),
        (now - timedelta(hours=3), 24),
        (now - timedelta(hours=2, seconds=13.25), 7),
        (now - timedelta(minutes=3), 3),
    ]
    for start, slices in windows:
        for job in (None, *JOBS):
            expected = _direct(engine, start, now, slices, job)
            for _ in range(2):
                with reading(engine) as connection:
                    got = outcome_counts(connection, start, now, slices, job, now=now)
                assert got == expected, (start, slices, job)


def _direct(
    engine: Engine, start: datetime, end: datetime, slices: int, job: str | None
) -> list[dict[str, int]]:
    """Each run placed in its slice one by one, in Python."""
    width = (end - start) / slices
    edges = [start + width * index for index in range(slices + 1)]
    edges[-1] = end
    counts: list[dict[str, int]] = [{} for _ in range(slices)]
    with reading(engine) as connection:
        rows = connection.execute(select(runs.c.job_name, runs.c.outcome, runs.c.finished_at))
        for name, outcome, finished in rows:
            if finished is None or outcome not in FINISHED_OUTCOMES or not start <= finished < end:
                continue
            if job is not None and name != job:
                continue
            index = next(i for i in range(slices) if edges[i] <= finished < edges[i + 1])
            counts[index][outcome] = counts[index].get(outcome, 0) + 1
    return counts


def _seed(engine: Engine, chance: random.Random, first: datetime, last: datetime, n: int) -> None:
    seconds = (last - first).total_seconds()
    rows = []
    for _ in range(n):
        finished = first + timedelta(seconds=chance.uniform(0, seconds))
        outcome = chance.choice(["succeeded"] * 6 + ["failed", "missed", "timed_out", "abandoned"])
        rows.append(_row(chance.choice(JOBS), outcome, finished, None))
    with engine.begin() as connection:
        connection.execute(runs.insert(), rows)


def _run(
    engine: Engine,
    job: str,
    outcome: str,
    finished: datetime | None,
    *,
    started: datetime | None = None,
) -> str:
    row = _row(job, outcome, finished, started)
    with engine.begin() as connection:
        connection.execute(runs.insert().values(**row))
    return str(row["id"])


def _row(
    job: str, outcome: str, finished: datetime | None, started: datetime | None
) -> dict[str, object]:
    started = started or (finished or T0) - timedelta(seconds=2)
    return {
        "id": uuid.uuid4().hex,
        "job_name": job,
        "attempt": 1,
        "source": "schedule",
        "outcome": outcome,
        "host_id": "replica-0",
        "queued_at": started,
        "started_at": started,
        "finished_at": finished,
    }


def _finish(engine: Engine, run_id: str, outcome: str, at: datetime) -> None:
    with engine.begin() as connection:
        connection.execute(
            update(runs).where(runs.c.id == run_id).values(outcome=outcome, finished_at=at)
        )


def _kept(engine: Engine) -> int:
    with reading(engine) as connection:
        return int(
            connection.execute(select(func.count()).select_from(run_outcome_minutes)).scalar_one()
        )


def _kept_runs(engine: Engine) -> int:
    with reading(engine) as connection:
        total = connection.execute(select(func.sum(run_outcome_minutes.c.runs))).scalar()
    return int(total or 0)
