"""The engine at scale, on both stores: a turn costs what is due, and one bad job costs only itself.

Statements are counted with SQLAlchemy's cursor events, so "cost" here is the work a turn asks
of the store (statements and rows), not a timing.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import pytest
from sqlalchemy import event, select, text
from sqlalchemy.engine import Engine

from jobhost.records import ScheduleRecord
from jobhost.store import reading
from jobhost.store.actions import request_run
from jobhost.store.claims import next_wakeups
from jobhost.store.schema import runs, schedules
from tests.support import ManualClock

PER_SECOND = 40
DAILY = 10_000 - PER_SECOND


@dataclass
class _Statements:
    texts: list[str] = field(default_factory=list)
    rows: int = 0


@contextmanager
def _counting(engine: Engine) -> Iterator[_Statements]:
    seen = _Statements()

    def before(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        seen.texts.append(statement)

    def after(_conn: Any, cursor: Any, *_: Any) -> None:
        seen.rows += max(cursor.rowcount, 0) if cursor.description is None else 0

    event.listen(engine, "before_cursor_execute", before)
    event.listen(engine, "after_cursor_execute", after)
    try:
        yield seen
    finally:
        event.remove(engine, "before_cursor_execute", before)
        event.remove(engine, "after_cursor_execute", after)


def _big_catalog() -> list[dict[str, Any]]:
    return [
        *({"name": f"sample.daily-{i:05d}", "cron": "0 3 * * *"} for i in range(DAILY)),
        *({"name": f"sample.second-{i:02d}", "interval": "1s"} for i in range(PER_SECOND)),
    ]


def test_ten_thousand_declared_jobs_keep_up_with_zero_backlog(
    replicas: Any, clock: ManualClock
) -> None:
    (host,) = replicas(_big_catalog(), worker_pool_size=64)
    engine: Engine = host.engine
    started: dict[str, list[datetime]] = {}
    for _ in range(5):
        clock.advance(seconds=1)
        claims = host.tick(slots=64)
        assert len(claims) == PER_SECOND, "every per-second job, each turn"
        for claim in claims:
            assert claim.occurrence is not None
            started.setdefault(claim.job_name, []).append(claim.occurrence)
            host.finish(claim)
        with reading(engine) as connection:
            wake = next_wakeups(connection)
        assert wake.lag(clock()) == 0, "nothing due is left behind"
    assert all(len(o) == len(set(o)) == 5 for o in started.values())
    assert len(started) == PER_SECOND


def test_a_turn_with_nothing_due_reads_no_schedule_rows(replicas: Any, clock: ManualClock) -> None:
    (host,) = replicas(_big_catalog(), worker_pool_size=64)
    clock.advance(seconds=1)
    for claim in host.tick(slots=64):
        host.finish(claim)
    clock.advance(milliseconds=100)  # between two occurrences: nothing is due
    with _counting(host.engine) as seen:
        assert host.tick(slots=64) == []
    joined = "\n".join(seen.texts)
    assert len(seen.texts) <= 6, joined
    # Every read of the schedules goes through the due index, with a limit.
    for statement in seen.texts:
        if "FROM schedules" in statement:
            assert "due_at" in statement and "LIMIT" in statement.upper(), statement
    # Nothing is written on an idle turn.
    assert not any(s.lstrip().upper().startswith(("UPDATE", "INSERT")) for s in seen.texts)


def test_a_due_turn_writes_the_whole_batch_in_a_few_statements(
    replicas: Any, clock: ManualClock
) -> None:
    (host,) = replicas(_big_catalog(), worker_pool_size=64)
    clock.advance(seconds=1)
    with _counting(host.engine) as seen:
        claims = host.tick(slots=64)
    assert len(claims) == PER_SECOND
    writes = [s for s in seen.texts if s.lstrip().upper().startswith(("UPDATE", "INSERT"))]
    # One insert of the run rows, one update of the schedules (executemany), whatever the count.
    assert len(writes) <= 3, writes
    tokens = _tokens(host.engine)
    assert all(tokens[c.job_name] == c.fencing_token == 1 for c in claims)


def test_a_failing_statement_for_one_job_loses_no_other_claim(
    replicas: Any, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    jobs = [{"name": f"sample.job-{i}", "cron": "* * * * *"} for i in range(4)]
    (host,) = replicas(jobs)
    _refuse_updates_of(host.engine, "sample.job-2")
    clock.now = datetime(2026, 5, 4, 10, 0, 1, tzinfo=UTC)
    with caplog.at_level(logging.ERROR, logger="jobhost.firing"):
        claims = host.tick()
    assert sorted(c.job_name for c in claims) == ["sample.job-0", "sample.job-1", "sample.job-3"]
    # The claims are committed: their run rows are in the ledger, running, with their tokens.
    assert _running(host.engine) == {c.run_id for c in claims}
    assert "job sample.job-2 set aside for" in caplog.text
    assert "claiming it failed" in caplog.text
    for claim in claims:
        assert host.finish(claim) == "succeeded"
    # The next minute: the others run again; the failing job is left alone for a while.
    clock.now = datetime(2026, 5, 4, 10, 1, 1, tzinfo=UTC)
    again = host.tick()
    assert sorted(c.job_name for c in again) == ["sample.job-0", "sample.job-1", "sample.job-3"]


def test_a_corrupt_schedule_row_is_set_aside_and_the_others_run(
    replicas: Any, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    jobs = [{"name": f"sample.job-{i}", "cron": "* * * * *"} for i in range(3)]
    (host,) = replicas(jobs)
    if host.engine.dialect.name == "sqlite":
        # SQLite keeps whatever text a hand edit writes; PostgreSQL's types refuse it.
        with host.engine.begin() as connection:
            connection.execute(
                text("UPDATE schedules SET fencing_token = 'x7' WHERE job_name = 'sample.job-1'")
            )
    else:
        with host.engine.begin() as connection:
            connection.execute(
                text("UPDATE schedules SET fencing_token = -5 WHERE job_name = 'sample.job-1'")
            )
    clock.now = datetime(2026, 5, 4, 10, 0, 1, tzinfo=UTC)
    with caplog.at_level(logging.ERROR, logger="jobhost.firing"):
        claims = host.tick()
    assert sorted(c.job_name for c in claims) == ["sample.job-0", "sample.job-2"]
    (line,) = [r.getMessage() for r in caplog.records if "set aside" in r.getMessage()]
    assert line.startswith("job sample.job-1 set aside: its schedule row is corrupt")
    assert "fencing_token" in line


def test_a_manual_request_is_taken_when_every_slot_is_busy(
    replicas: Any, clock: ManualClock
) -> None:
    jobs = [{"name": f"sample.job-{i}", "interval": "1s"} for i in range(5)]
    (host,) = replicas([*jobs, {"name": "sample.by-hand", "interval": "1d", "enabled": False}])
    clock.advance(seconds=1)
    with host.engine.begin() as connection:
        request_run(connection, "sample.by-hand", "alice", "now please", clock())
    # Saturated: no slot for scheduled work, one kept for a person's request.
    result = host.ticker.tick(clock(), 0, 1)
    assert [(c.job_name, c.source) for c, _ in result.claims] == [("sample.by-hand", "manual")]
    # A request also goes before due schedules when slots are scarce.
    with host.engine.begin() as connection:
        request_run(connection, "sample.job-4", "bob", None, clock())
    clock.advance(seconds=1)
    first = host.ticker.tick(clock(), 1, 0)
    assert [(c.job_name, c.source) for c, _ in first.claims] == [("sample.job-4", "manual")]


def test_a_host_that_falls_behind_reports_its_lag(replicas: Any, clock: ManualClock) -> None:
    jobs = [{"name": f"sample.job-{i}", "interval": "1s"} for i in range(10)]
    (host,) = replicas(jobs)
    clock.advance(seconds=1)
    result = host.ticker.tick(clock(), 2, 0)  # two slots for ten due jobs
    assert len(result.claims) == 2
    clock.advance(seconds=5)
    behind = host.ticker.tick(clock(), 0, 0)
    assert behind.saturated
    assert behind.lag >= 5


def _refuse_updates_of(engine: Engine, job: str) -> None:
    """A database trigger that fails every update of one job's schedule row."""
    with engine.begin() as connection:
        if engine.dialect.name == "sqlite":
            connection.execute(
                text(
                    "CREATE TRIGGER refuse_one BEFORE UPDATE ON schedules "
                    f"WHEN NEW.job_name = '{job}' "
                    "BEGIN SELECT RAISE(ABORT, 'refused by a test trigger'); END"
                )
            )
            return
        connection.execute(
            text(
                "CREATE FUNCTION refuse_one() RETURNS trigger AS $$ BEGIN "
                f"IF NEW.job_name = '{job}' THEN RAISE EXCEPTION 'refused by a test trigger'; "
                "END IF; RETURN NEW; END $$ LANGUAGE plpgsql"
            )
        )
        connection.execute(
            text(
                "CREATE TRIGGER refuse_one BEFORE UPDATE ON schedules "
                "FOR EACH ROW EXECUTE FUNCTION refuse_one()"
            )
        )


def _running(engine: Engine) -> set[str]:
    with reading(engine) as connection:
        return set(
            connection.execute(select(runs.c.id).where(runs.c.outcome == "running")).scalars()
        )


def _tokens(engine: Engine) -> dict[str, int]:
    with reading(engine) as connection:
        rows = connection.execute(select(schedules)).mappings()
        return {r.job_name: r.fencing_token for r in map(ScheduleRecord.from_row, rows)}
