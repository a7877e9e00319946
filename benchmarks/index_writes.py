"""What a fire's writes cost PostgreSQL, by schema revision: ``python benchmarks/index_writes.py``.

Replays the rows a fire writes — the run inserted ``running`` and the schedule claimed (one
transaction per batch of ``--batch`` fires), then the run finished and the schedule summarised
(one transaction per batch) — on ``--jobs`` schedule rows, once on a database at
``--baseline`` (0012: before the partial run indexes) and once at the newest revision, in turn,
``--rounds`` times. It prints, per fire, the CPU of the PostgreSQL backend that served it (from
``/proc``: the server must run on this machine), the schedule updates PostgreSQL wrote as HOT
(no index entry), and the index bytes after. The statements are the shapes the store sends, one
row each, so the figure isolates the tables' and indexes' cost from the host's batching.
Everything is printed, nothing asserted; each database is dropped at the end.
"""

from __future__ import annotations

import argparse
import os
import sys
import uuid
from datetime import UTC, datetime, timedelta
from importlib.resources import files
from statistics import median

from _scale_system import Postgres, cpu_seconds
from alembic import command
from alembic.config import Config
from sqlalchemy import create_engine, text
from sqlalchemy.engine import Connection, Engine

T0 = datetime(2026, 1, 1, tzinfo=UTC)
_CLAIM = (
    "INSERT INTO runs (id, job_name, occurrence, attempt, source, outcome, host_id,"
    " fencing_token, idempotency_key, queued_at, started_at, lease_expires_at)"
    " VALUES (:id, :job, :t, 1, 'schedule', 'running', 'h1', :i, :key, :t, :t, :lease)",
    "UPDATE schedules SET next_occurrence = :next, due_at = :next, missed_through = NULL,"
    " lease_owner = 'h1', lease_expires_at = :lease, lease_run_id = :id,"
    " fencing_token = fencing_token + 1 WHERE job_name = :job",
)
_FINISH = (
    "UPDATE runs SET outcome = 'succeeded', started_at = coalesce(:t, started_at),"
    " finished_at = :t, lease_expires_at = NULL, error_type = NULL, error_message = NULL,"
    " trace_id = :trace WHERE id = :id AND host_id = 'h1' AND outcome = 'running'",
    "UPDATE schedules SET last_run_id = CAST(:id AS varchar), last_outcome = 'succeeded',"
    " last_started_at = :t, last_finished_at = :t, last_error = NULL, last_success_at = :t,"
    " lease_owner = CASE WHEN lease_run_id = CAST(:id AS varchar) THEN NULL ELSE lease_owner END,"
    " lease_expires_at = CASE WHEN lease_run_id = CAST(:id AS varchar) THEN NULL"
    " ELSE lease_expires_at END,"
    " lease_run_id = CASE WHEN lease_run_id = CAST(:id AS varchar) THEN NULL"
    " ELSE lease_run_id END,"
    " due_at = CASE WHEN paused IS false AND next_occurrence < due_at THEN next_occurrence"
    " ELSE due_at END WHERE job_name = :job",
)


def main() -> None:
    arguments = _arguments()
    postgres = Postgres(arguments.postgres_url)
    figures: dict[str, list[float]] = {}
    print(
        f"{arguments.fires} fires on {arguments.jobs} schedules, batches of {arguments.batch}; "
        f"load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}"
    )
    try:
        for _ in range(arguments.rounds):
            for revision in (arguments.baseline, "head"):
                engine = _database(postgres, revision, arguments.jobs)
                try:
                    ms, hot, updates, sizes = _replay(engine, arguments)
                finally:
                    engine.dispose()
                figures.setdefault(revision, []).append(ms)
                print(
                    f"  {revision:>5}: backend CPU {ms:.3f} ms per fire, schedule updates HOT "
                    f"{hot}/{updates}, index bytes runs {sizes[0]:,} schedules {sizes[1]:,}",
                    flush=True,
                )
    finally:
        postgres.drop_all()
        postgres.engine.dispose()
    before, after = median(figures[arguments.baseline]), median(figures["head"])
    print(
        f"median backend CPU per fire: {arguments.baseline} {before:.3f} ms, head {after:.3f} ms, "
        f"head / {arguments.baseline} {after / before:.2f}x; load average "
        f"{' '.join(f'{x:.1f}' for x in os.getloadavg())}"
    )


def _database(postgres: Postgres, revision: str, jobs: int) -> Engine:
    engine = create_engine(postgres.create(f"index-writes-{uuid.uuid4().hex[:6]}"))
    with engine.begin() as connection:
        config = Config()
        config.set_main_option("script_location", str(files("jobhost.store") / "migrations"))
        config.attributes["connection"] = connection
        command.upgrade(config, revision)
        connection.execute(
            text(
                "INSERT INTO schedules (job_name, module, trigger_kind, trigger_expression,"
                " timezone, trigger_source, enabled, orphaned, paused, next_occurrence, due_at,"
                " fencing_token, created_at, updated_at, declaration) VALUES (:name, 'bench',"
                " 'interval', '1s', 'UTC', 'declaration', true, false, false, :t, :t, 0, :t, :t,"
                " :declaration)"
            ),
            # A declaration of the size the store keeps for a job with its policies.
            [{"name": _job(j), "t": T0, "declaration": "x" * 700} for j in range(jobs)],
        )
    return engine


def _replay(engine: Engine, arguments: argparse.Namespace) -> tuple[float, int, int, list[int]]:
    with engine.connect() as connection:
        pid = int(connection.execute(text("SELECT pg_backend_pid()")).scalar_one())
        connection.commit()
        start = cpu_seconds(pid)
        for first in range(0, arguments.fires, arguments.batch):
            fires = [_fire(i, arguments.jobs) for i in range(first, first + arguments.batch)]
            _batch(connection, _CLAIM, fires)
            _batch(connection, _FINISH, fires)
        used = cpu_seconds(pid) - start
        connection.execute(text("SELECT pg_stat_force_next_flush()"))
        connection.commit()
    with engine.connect() as connection:
        hot, updates = connection.execute(
            text(
                "SELECT n_tup_hot_upd, n_tup_upd FROM pg_stat_user_tables"
                " WHERE relname = 'schedules'"
            )
        ).one()
        sizes = connection.execute(
            text("SELECT pg_indexes_size('runs'), pg_indexes_size('schedules')")
        ).one()
    return used / arguments.fires * 1000, int(hot), int(updates), [int(s) for s in sizes]


def _batch(
    connection: Connection, statements: tuple[str, str], fires: list[dict[str, object]]
) -> None:
    with connection.begin():
        for values in fires:
            for statement in statements:
                connection.execute(text(statement), values)


def _fire(i: int, jobs: int) -> dict[str, object]:
    job, at = _job(i % jobs), T0 + timedelta(seconds=i // jobs)
    return {
        "id": uuid.uuid4().hex,
        "job": job,
        "t": at,
        "i": i,
        "key": f"{job}:{at.isoformat()}",
        "lease": at + timedelta(minutes=1),
        "next": at + timedelta(seconds=1),
        "trace": "a" * 32,
    }


def _job(j: int) -> str:
    return f"bench.job-{j:04d}"


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--fires", type=int, default=6000, help="fires replayed per run (6000)")
    parser.add_argument("--jobs", type=int, default=100, help="schedule rows (100)")
    parser.add_argument("--batch", type=int, default=6, help="fires per transaction (6)")
    parser.add_argument("--rounds", type=int, default=2, help="runs of each revision (2)")
    parser.add_argument("--baseline", default="0012", help="revision compared with head (0012)")
    parser.add_argument(
        "--postgres-url",
        default=os.environ.get("JOBHOST_BENCH_POSTGRES_URL")
        or os.environ.get("JOBHOST_TEST_POSTGRES_URL")
        or "postgresql+psycopg://postgres@127.0.0.1:5432/test",
    )
    return parser.parse_args()


if __name__ == "__main__":
    sys.exit(main())
