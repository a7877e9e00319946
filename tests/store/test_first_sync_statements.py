"""A first start writes its catalog in a fixed number of statements whatever the number of jobs
(beyond a hundred), none of them to stamp the catalog version on rows it has just inserted with
it; the rows go in byte for byte (on PostgreSQL by ``COPY``), and a row another host inserted
first is kept."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

import pytest
from sqlalchemy import delete, event, select
from sqlalchemy.engine import Engine
from sqlalchemy.exc import StatementError

from jobhost.firing.tick import Ticker
from jobhost.store import Store, create_store_engine, reading
from jobhost.store.engine import COPY_FROM, copy_ignoring_duplicates
from jobhost.store.schema import schedules
from tests.migrated import migrate
from tests.support import ManualClock, sample_catalog


@contextmanager
def _statements(engine: Engine) -> Iterator[list[str]]:
    seen: list[str] = []

    def record(*args: Any) -> None:
        seen.append(" ".join(str(args[2]).split()))

    event.listen(engine, "before_cursor_execute", record)
    try:
        yield seen
    finally:
        event.remove(engine, "before_cursor_execute", record)


def _first_sync(
    engine: Engine, settings: Any, clock: ManualClock, telemetry: Any
) -> tuple[list[str], Ticker]:
    ticker = Ticker(
        Store(engine),
        sample_catalog(settings).jobs,
        host_id="host-0",
        lease_duration=settings.lease_duration,
        telemetry=telemetry,
    )
    with _statements(engine) as seen:
        ticker.sync(clock())
    return seen, ticker


def _jobs(count: int) -> list[dict[str, Any]]:
    return [
        {"name": f"sample.j{i:04d}", "cron": f"{i % 60} {i // 60 % 24} * * *"} for i in range(count)
    ]


def test_a_first_sync_takes_the_same_statements_for_150_jobs_as_for_600(
    sample_settings: Any, clock: ManualClock, telemetry: Any
) -> None:
    few, many = sample_settings(_jobs(150)), sample_settings(_jobs(600))
    engine = create_store_engine(few.database_url)
    try:
        migrate(engine)
        small, _ = _first_sync(engine, few, clock, telemetry[0])
        with engine.begin() as connection:
            connection.execute(delete(schedules))
        large, ticker = _first_sync(engine, many, clock, telemetry[0])
        with reading(engine) as connection:
            stamped = connection.execute(select(schedules.c.catalog_version)).scalars().all()
    finally:
        engine.dispose()
    assert len(large) == len(small), large
    assert not [text for text in large if text.startswith("UPDATE schedules")], large
    assert len(stamped) == 600 and set(stamped) == {ticker.catalog_version}


_AWKWARD = [
    '{"say": "a \\"quoted\\" word", "path": "C:\\\\jobs"}',
    "tab\there\nnewline\r\\N and \\. alone",
    "zoned: Zürich, 東京, emoji \U0001f600",
    "",
]


def _row(name: str, declaration: str | None, at: datetime) -> dict[str, Any]:
    return {
        "job_name": name,
        "module": "sample",
        "trigger_kind": None,
        "trigger_expression": None,
        "timezone": "UTC",
        "trigger_source": "module",
        "enabled": False,
        "orphaned": False,
        "paused": False,
        "next_occurrence": None,
        "due_at": at,
        "interval_anchor": at,
        "fencing_token": 2**40,
        "catalog_version": "v1",
        "created_at": at,
        "updated_at": at,
        "description": declaration,
        "critical": None,
        "dst_policy": None,
        "job_source": "module",
        "declaration": declaration,
    }


def test_many_rows_go_in_exactly_and_a_row_already_there_is_kept(store_url: str) -> None:
    engine = create_store_engine(store_url)
    at = datetime(2026, 5, 4, 9, 59, 30, 123456, tzinfo=UTC)
    try:
        migrate(engine)
        with engine.begin() as connection:
            first = copy_ignoring_duplicates(
                connection, schedules, [_row("sample.kept", "first", at)], "job_name"
            )
        rows = [_row(f"sample.a{i}", text, at) for i, text in enumerate(_AWKWARD)]
        # Enough rows that PostgreSQL's go by COPY.
        rows += [_row(f"sample.f{i:03d}", f"filler {i}", at) for i in range(COPY_FROM)]
        rows += [_row("sample.none", None, at), _row("sample.kept", "second", at)]
        with engine.begin() as connection:
            # Twice in one transaction: the staging table of the first call is gone.
            half = len(rows) // 2
            inserted = copy_ignoring_duplicates(connection, schedules, rows[:half], "job_name")
            inserted |= copy_ignoring_duplicates(connection, schedules, rows[half:], "job_name")
        with reading(engine) as connection:
            found = {
                r["job_name"]: dict(r) for r in connection.execute(select(schedules)).mappings()
            }
    finally:
        engine.dispose()
    assert first == {"sample.kept"}
    assert inserted == {row["job_name"] for row in rows} - {"sample.kept"}
    assert found["sample.kept"]["declaration"] == "first"
    for row in rows[:-1]:
        stored = found[row["job_name"]]
        assert {key: stored[key] for key in row} == row


def test_a_naive_instant_is_refused_on_the_way_in(store_url: str) -> None:
    engine = create_store_engine(store_url)
    naive = datetime(2026, 5, 4, 9, 59, 30)
    try:
        migrate(engine)
        # SQLAlchemy wraps the error on SQLite; COPY on PostgreSQL raises it as it is.
        refused = pytest.raises((ValueError, StatementError), match="naive datetime")
        with refused, engine.begin() as connection:
            copy_ignoring_duplicates(
                connection,
                schedules,
                [_row(f"s.{i}", None, naive) for i in range(COPY_FROM)],
                "job_name",
            )
    finally:
        engine.dispose()
