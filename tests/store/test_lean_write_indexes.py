"""Migration 0013 writes fewer index entries per fire: the run indexes of waiting and running
rows hold only those rows, two redundant indexes are gone, and ``schedules`` keeps room for HOT
updates on PostgreSQL. The rows survive both ways, and the host's own lookups of pending,
running and backfill runs still read those indexes, their values bound as the host sends them;
on both stores."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from importlib.resources import files
from typing import Any

import psycopg
from alembic import command
from alembic.config import Config
from sqlalchemy import event, insert, text
from sqlalchemy.engine import Engine

from jobhost.store import create_store_engine, upgrade
from jobhost.store.claims import next_wakeups
from jobhost.store.engine import reading
from jobhost.store.integrity import check_live_rows
from jobhost.store.ledger import abandon_expired_runs
from jobhost.store.schema import runs

T0 = datetime(2026, 5, 4, 10, 0, tzinfo=UTC)
PARTIAL = {
    "ix_runs_outcome_not_before": "outcome = 'pending'",
    "ix_runs_outcome_lease_expires_at": "outcome = 'running'",
    "ix_runs_backfill_id": "backfill_id IS NOT NULL",
    "ix_schedules_concurrency_group": "concurrency_group IS NOT NULL",
}
# What 0015 made of two of them: the same rows, with the claim order's columns.
BECAME = {
    "ix_runs_outcome_not_before": "ix_runs_outcome_priority_not_before",
    "ix_runs_backfill_id": "ix_runs_backfill_id_outcome_priority_occurrence",
}
DROPPED = ("ix_runs_job_name_outcome", "ix_schedules_next_occurrence")


def test_the_migration_keeps_every_run_and_makes_the_indexes_partial(store_url: str) -> None:
    engine = create_store_engine(store_url)
    try:
        _migrate(engine, "0012")
        with engine.begin() as connection:
            connection.execute(insert(runs), _ledger())
        assert all(_where(engine).get(name) is None for name in PARTIAL)
        upgrade(engine)
        indexes = _where(engine)
        for name, condition in PARTIAL.items():
            assert condition in _plain(indexes[BECAME.get(name, name)]), name
        assert not set(DROPPED) & set(indexes)
        with reading(engine) as connection:
            found = next_wakeups(connection)
            assert found.retry_at == T0 + timedelta(minutes=5)
            assert found.lease_expiry == T0 + timedelta(minutes=1)
            assert connection.execute(text("SELECT count(*) FROM runs")).scalar() == 4
        if engine.dialect.name == "postgresql":
            assert "fillfactor=50" in _reloptions(engine, "schedules")
        _migrate(engine, "0012", down=True)
        indexes = _where(engine)
        assert all(indexes[name] is None for name in (*PARTIAL, *DROPPED))
        if engine.dialect.name == "postgresql":
            assert "fillfactor" not in _reloptions(engine, "schedules")
    finally:
        engine.dispose()


def test_the_hosts_lookups_of_waiting_and_running_runs_read_the_partial_indexes(
    store_url: str,
) -> None:
    engine = create_store_engine(store_url)
    try:
        upgrade(engine)
        with engine.begin() as connection:
            connection.execute(insert(runs), _ledger())
        with _sent(engine) as statements, engine.begin() as connection:
            next_wakeups(connection)
            abandon_expired_runs(connection, T0 + timedelta(hours=1), implausible=timedelta(days=1))
            check_live_rows(connection, T0, timedelta(days=1))
        plans = [_plan(engine, statement, parameters) for statement, parameters in statements]
        of_runs = [plan for plan in plans if " runs" in plan]
        assert of_runs
        # No lookup reads the ledger whole, and the waiting and running runs come from the
        # partial indexes, in plans kept for any value bound (the condition is in the SQL).
        assert not [plan for plan in of_runs if "Seq Scan on runs" in plan or "SCAN runs" in plan]
        by_text = {
            " ".join(sent.split()): plan for (sent, _), plan in zip(statements, plans, strict=True)
        }
        for marker, names in (
            ("runs.not_before IS NOT NULL", ("priority_not_before", "lease_expires_at")),
            ("runs.lease_expires_at <", ("lease_expires_at",)),  # dead hosts' runs
            # The live rows' check: any index that starts with the outcome serves it (SQLite
            # takes the covering one on outcome since 0015); the ledger is never read whole.
            ("FROM runs WHERE runs.outcome = 'running' OR", ()),
        ):
            found = [plan for sent, plan in by_text.items() if marker in sent]
            assert found, marker
            for plan in found:
                assert all(f"ix_runs_outcome_{name}" in plan for name in names), (marker, plan)
    finally:
        engine.dispose()


def _ledger() -> list[dict[str, Any]]:
    """A finished run, a running one, a pending retry, and a finished run of a backfill."""
    base = {
        "job_name": "a.job",
        "source": "schedule",
        "queued_at": T0,
        "host_id": "h1",
        "lease_expires_at": None,
        "not_before": None,
        "backfill_id": None,
    }
    return [
        base | {"id": "r1", "occurrence": T0, "attempt": 1, "outcome": "succeeded"},
        base
        | {
            "id": "r2",
            "occurrence": T0 + timedelta(seconds=1),
            "attempt": 1,
            "outcome": "running",
            "lease_expires_at": T0 + timedelta(minutes=1),
        },
        base
        | {
            "id": "r3",
            "occurrence": T0,
            "attempt": 2,
            "outcome": "pending",
            "not_before": T0 + timedelta(minutes=5),
        },
        base
        | {
            "id": "r4",
            "occurrence": T0 - timedelta(days=1),
            "attempt": 1,
            "outcome": "failed",
            "backfill_id": "b1",
        },
    ]


def _migrate(engine: Engine, revision: str, *, down: bool = False) -> None:
    with engine.begin() as connection:
        config = Config()
        config.set_main_option("script_location", str(files("jobhost.store") / "migrations"))
        config.attributes["connection"] = connection
        (command.downgrade if down else command.upgrade)(config, revision)


def _where(engine: Engine) -> dict[str, str | None]:
    """Each index of ``runs`` and ``schedules`` by name: its definition when partial, else None."""
    with engine.connect() as connection:
        if engine.dialect.name == "postgresql":
            rows = connection.execute(
                text(
                    "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = current_schema()"
                    " AND tablename IN ('runs', 'schedules')"
                )
            )
        else:
            rows = connection.execute(
                text(
                    "SELECT name, sql FROM sqlite_master WHERE type = 'index'"
                    " AND tbl_name IN ('runs', 'schedules')"
                )
            )
        return {
            str(name): (str(sql) if sql and " WHERE " in str(sql).upper() else None)
            for name, sql in rows
        }


def _plain(definition: str | None) -> str:
    """An index condition as written in the migration, whatever the database's own spelling."""
    spelled = (definition or "").replace("(", "").replace(")", "").replace("::text", "")
    return spelled.replace("character varying", "").replace("::", "")


def _reloptions(engine: Engine, table: str) -> str:
    with engine.connect() as connection:
        found = connection.execute(
            text(
                "SELECT reloptions FROM pg_class WHERE relname = :table"
                " AND relnamespace = current_schema()::regnamespace"
            ),
            {"table": table},
        ).scalar()
    return str(found or "")


@contextmanager
def _sent(engine: Engine) -> Iterator[list[tuple[str, Any]]]:
    """The SELECTs sent on ``engine`` while the block runs, with their parameters."""
    seen: list[tuple[str, Any]] = []

    def note(*args: Any) -> None:
        statement, parameters = args[2], args[3]
        if statement.lstrip().upper().startswith("SELECT"):
            seen.append((statement, parameters))

    event.listen(engine, "before_cursor_execute", note)
    try:
        yield seen
    finally:
        event.remove(engine, "before_cursor_execute", note)


def _plan(engine: Engine, statement: str, parameters: Any) -> str:
    """The plan the database makes for ``statement`` with its values bound. On PostgreSQL the
    plan is the generic one a prepared statement keeps (what a host reuses after a few turns),
    with the table scan priced out (a test's few rows would otherwise be read whole)."""
    with engine.begin() as connection:
        if engine.dialect.name == "sqlite":
            found = connection.exec_driver_sql(f"EXPLAIN QUERY PLAN {statement}", parameters)
            return "\n".join(str(row[-1]) for row in found)
        connection.execute(text("SET LOCAL enable_seqscan = off"))
        connection.execute(text("SET LOCAL plan_cache_mode = force_generic_plan"))
        names = list(dict.fromkeys(re.findall(r"%\((\w+)\)s", statement)))
        numbered = re.sub(r"%\((\w+)\)s", lambda m: f"${names.index(m[1]) + 1}", statement)
        connection.exec_driver_sql(f"PREPARE lookup AS {numbered}".replace("%%", "%"))
        # The values are written into EXECUTE's arguments; the plan stays the prepared one.
        driver = connection.connection.driver_connection
        arguments = f"({', '.join('%s' for _ in names)})" if names else ""
        with psycopg.ClientCursor(driver) as cursor:
            cursor.execute(f"EXPLAIN EXECUTE lookup{arguments}", [parameters[n] for n in names])
            found = cursor.fetchall()
            cursor.execute("DEALLOCATE lookup")
        return "\n".join(str(row[-1]) for row in found)
