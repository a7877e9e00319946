"""A batch of rows written in one statement keeps every value as it was given, on both stores:
on PostgreSQL the rows travel as one JSON parameter, on SQLite as an executemany. An instant
keeps its microseconds and its place in time whatever its offset; quotes, backslashes and
non-ASCII text arrive as they were; a naive instant is refused and nothing is written."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from sqlalchemy import func, select
from sqlalchemy.engine import Engine
from sqlalchemy.exc import StatementError

from jobhost.store.engine import insert_returning_new
from jobhost.store.schema import runs

KEY = ("job_name", "occurrence", "attempt")
TEXT = 'it\'s "quoted", back\\slashed and ünïcode ✓'


def test_a_batch_keeps_instants_to_the_microsecond_and_text_as_given(engine: Engine) -> None:
    berlin = timezone(timedelta(hours=2))
    occurrence = datetime(2026, 6, 1, 12, 30, 15, 123456, tzinfo=berlin)
    rows = [_row("r-1", occurrence, reason=TEXT), _row("r-2", occurrence + timedelta(seconds=1))]
    with engine.begin() as connection:
        assert sorted(insert_returning_new(connection, runs, rows, KEY)) == ["r-1", "r-2"]
        # The same occurrence again: refused by the unique row, left out of the answer.
        again = [_row("r-3", occurrence.astimezone(UTC)), _row("r-4", occurrence + timedelta(1))]
        assert insert_returning_new(connection, runs, again, KEY) == ["r-4"]
    with engine.connect() as connection:
        stored = connection.execute(
            select(runs.c.occurrence, runs.c.reason).where(runs.c.id == "r-1")
        ).one()
    assert stored.occurrence == datetime(2026, 6, 1, 10, 30, 15, 123456, tzinfo=UTC)
    assert stored.reason == TEXT


def test_a_naive_instant_is_refused_and_nothing_of_the_batch_is_written(engine: Engine) -> None:
    # The naive instant has the aware one's wall time: the text SQLite remembers for an
    # instant already bound must not stand in for it.
    good = _row("r-1", datetime(2026, 6, 1, 12, tzinfo=UTC))
    naive = _row("r-2", datetime(2026, 6, 1, 12))
    refused = pytest.raises((ValueError, StatementError), match="naive datetime")
    with refused, engine.begin() as connection:
        insert_returning_new(connection, runs, [good, naive], KEY)
    with engine.connect() as connection:
        assert connection.execute(select(func.count()).select_from(runs)).scalar_one() == 0


def _row(run_id: str, occurrence: datetime, *, reason: str | None = None) -> dict[str, object]:
    return {
        "id": run_id,
        "job_name": "sample.batch",
        "occurrence": occurrence,
        "attempt": 1,
        "source": "schedule",
        "outcome": "succeeded",
        "reason": reason,
        "queued_at": datetime(2026, 6, 1, 10, tzinfo=UTC),
    }
