"""Fewer index entries written per fire: each run row is inserted once and updated once when it
finishes, each schedule row twice (claimed, then summarised), and every index the row is in
takes a new entry each time (the finishing update changes ``outcome``, so it is never HOT).

- ``runs (job_name, outcome)`` is dropped: ``ix_runs_job_name_outcome_finished_at`` begins with
  the same two columns and answers the same lookups.
- ``runs (outcome, not_before)`` holds only ``pending`` rows (the retries and manual runs
  waiting to be claimed, the only rows read through it), ``runs (outcome, lease_expires_at)``
  only ``running`` rows (the runs whose leases are watched), and ``runs (backfill_id)`` only
  rows of a backfill: a scheduled run is in none of them once it has finished.
- ``schedules (next_occurrence)`` is dropped: the loop reads due rows by ``due_at``, and the
  start-up repair that filters on ``next_occurrence`` reads the catalog once.
- ``schedules (concurrency_group)`` holds only jobs in a group.
- On PostgreSQL, ``schedules`` keeps half of each page free, so the summary update after a run
  (which changes no indexed column) is written beside the row (a HOT update) with no index entry.

Revision ID: 0013
Revises: 0012
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None

_PENDING = sa.text("outcome = 'pending'")
_RUNNING = sa.text("outcome = 'running'")
_IN_BACKFILL = sa.text("backfill_id IS NOT NULL")
_IN_GROUP = sa.text("concurrency_group IS NOT NULL")


def upgrade() -> None:
    op.drop_index("ix_runs_job_name_outcome", table_name="runs")
    _partial("ix_runs_outcome_not_before", "runs", ["outcome", "not_before"], _PENDING)
    _partial("ix_runs_outcome_lease_expires_at", "runs", ["outcome", "lease_expires_at"], _RUNNING)
    _partial("ix_runs_backfill_id", "runs", ["backfill_id"], _IN_BACKFILL)
    op.drop_index("ix_schedules_next_occurrence", table_name="schedules")
    _partial("ix_schedules_concurrency_group", "schedules", ["concurrency_group"], _IN_GROUP)
    if op.get_bind().dialect.name == "postgresql":
        # Pages written from now on keep the room; existing ones gain it as rows move.
        op.execute("ALTER TABLE schedules SET (fillfactor = 50)")


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("ALTER TABLE schedules RESET (fillfactor)")
    _whole("ix_schedules_concurrency_group", "schedules", ["concurrency_group"])
    op.create_index("ix_schedules_next_occurrence", "schedules", ["next_occurrence"])
    _whole("ix_runs_backfill_id", "runs", ["backfill_id"])
    _whole("ix_runs_outcome_lease_expires_at", "runs", ["outcome", "lease_expires_at"])
    _whole("ix_runs_outcome_not_before", "runs", ["outcome", "not_before"])
    op.create_index("ix_runs_job_name_outcome", "runs", ["job_name", "outcome"])


def _partial(name: str, table: str, columns: list[str], where: sa.TextClause) -> None:
    op.drop_index(name, table_name=table)
    op.create_index(name, table, columns, postgresql_where=where, sqlite_where=where)


def _whole(name: str, table: str, columns: list[str]) -> None:
    op.drop_index(name, table_name=table)
    op.create_index(name, table, columns)
