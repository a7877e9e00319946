"""Migration 0015 moves manual requests into ``runs``: a pending request becomes the pending
manual run a host then claims, under the request's id; a refused one a skipped run that says
why; a started one keeps only its run. Downgrade moves a pending one back. On both stores."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from importlib.resources import files
from typing import Any

from alembic import command
from alembic.config import Config
from sqlalchemy import text
from sqlalchemy.engine import Engine

from jobhost.store import create_store_engine, upgrade
from jobhost.store.engine import reading
from jobhost.store.reports import get_run

T0 = datetime(2026, 5, 4, 10, 0, tzinfo=UTC)


def test_requests_become_runs_and_a_pending_one_goes_back_on_downgrade(store_url: str) -> None:
    engine = create_store_engine(store_url)
    try:
        _migrate(engine, "0014")
        with engine.begin() as connection:
            for row in _requests():
                connection.execute(
                    text(
                        "INSERT INTO run_requests (id, job_name, requested_by, reason,"
                        " requested_at, status, run_id, claimed_by, message, beside_limit)"
                        " VALUES (:id, :job_name, 'ops', :reason, :requested_at, :status,"
                        " :run_id, :claimed_by, :message, :beside_limit)"
                    ),
                    row,
                )
        upgrade(engine)
        with reading(engine) as connection:
            pending = get_run(connection, "req-pending")
            refused = get_run(connection, "req-refused")
            assert get_run(connection, "req-started") is None  # its run is "run-1", kept as is
            tables = _tables(connection)
        assert "run_requests" not in tables
        assert pending is not None and refused is not None
        assert (pending.outcome, pending.source, pending.attempt) == ("pending", "manual", 1)
        assert (pending.request_status, pending.not_before, pending.priority) == (
            "pending",
            None,
            0,
        )
        assert (pending.reason, pending.requested_by, pending.beside_limit) == ("why", "ops", True)
        assert pending.idempotency_key == "a.job:manual:req-pending"
        assert (refused.outcome, refused.request_status) == ("skipped", "refused")
        assert refused.reason == "refused: run r9 is still running; asked: again"
        _migrate(engine, "0014", down=True)
        with reading(engine) as connection:
            back = connection.execute(
                text("SELECT id, status, beside_limit FROM run_requests")
            ).all()
            left = connection.execute(text("SELECT id FROM runs ORDER BY id")).scalars().all()
        assert [(r[0], r[1], bool(r[2])) for r in back] == [("req-pending", "pending", True)]
        assert left == ["req-refused"]
    finally:
        engine.dispose()


def _requests() -> list[dict[str, Any]]:
    base = {"job_name": "a.job", "run_id": None, "claimed_by": None, "message": None}
    return [
        base
        | {
            "id": "req-pending",
            "reason": "why",
            "requested_at": T0,
            "status": "pending",
            "beside_limit": True,
        },
        base
        | {
            "id": "req-refused",
            "reason": "again",
            "requested_at": T0 + timedelta(seconds=1),
            "status": "refused",
            "claimed_by": "h1",
            "message": "refused: run r9 is still running",
            "beside_limit": False,
        },
        base
        | {
            "id": "req-started",
            "reason": None,
            "requested_at": T0 + timedelta(seconds=2),
            "status": "started",
            "run_id": "run-1",
            "claimed_by": "h1",
            "beside_limit": False,
        },
    ]


def _tables(connection: Any) -> set[str]:
    if connection.dialect.name == "postgresql":
        query = "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()"
    else:
        query = "SELECT name FROM sqlite_master WHERE type = 'table'"
    return {str(name) for name in connection.execute(text(query)).scalars()}


def _migrate(engine: Engine, revision: str, *, down: bool = False) -> None:
    with engine.begin() as connection:
        config = Config()
        config.set_main_option("script_location", str(files("jobhost.store") / "migrations"))
        config.attributes["connection"] = connection
        (command.downgrade if down else command.upgrade)(config, revision)


def test_a_pending_backfill_item_becomes_its_pending_run_at_the_next_attempt(
    store_url: str,
) -> None:
    engine = create_store_engine(store_url)
    try:
        _migrate(engine, "0014")
        with engine.begin() as connection:
            connection.execute(
                text(
                    "INSERT INTO backfills (id, job_name, range_from, range_to, mode, reason,"
                    " actor, concurrency, state, created_at) VALUES ('b1', 'a.job', :t0, :t1,"
                    " 'failed', 'outage', 'ops', 2, 'running', :t0)"
                ),
                {"t0": T0, "t1": T0 + timedelta(days=2)},
            )
            connection.execute(
                text(
                    "INSERT INTO runs (id, job_name, occurrence, attempt, source, outcome,"
                    " queued_at) VALUES ('old', 'a.job', :t0, 1, 'schedule', 'failed', :t0)"
                ),
                {"t0": T0},
            )
            for occurrence, state in ((T0, "pending"), (T0 + timedelta(days=1), "claimed")):
                connection.execute(
                    text(
                        "INSERT INTO backfill_items (backfill_id, occurrence, state)"
                        " VALUES ('b1', :o, :s)"
                    ),
                    {"o": occurrence, "s": state},
                )
        upgrade(engine)
        with reading(engine) as connection:
            moved = connection.execute(
                text(
                    "SELECT attempt, attempt_base, source, outcome, priority, idempotency_key,"
                    " requested_by FROM runs WHERE backfill_id = 'b1'"
                )
            ).all()
            selected = connection.execute(
                text("SELECT selected FROM backfills WHERE id = 'b1'")
            ).scalar()
        assert [tuple(row) for row in moved] == [
            (2, 1, "backfill", "pending", 2, "a.job:2026-05-04T10:00:00Z", "ops")
        ]
        assert selected == 2
    finally:
        engine.dispose()
