"""The engine at scale: due schedules found by index, catalog versions, per-host lag.

- ``schedules.due_at`` is when a row next needs a host (its next occurrence; for a paused job,
  the next occurrence to record missed; empty while disabled or orphaned) and is indexed, so a
  turn of the loop reads only the due rows; ``next_occurrence`` is indexed for the report;
- ``schedules.catalog_version`` names the catalog whose trigger the row holds, and
  ``hosts.catalog_version`` / ``hosts.synced_at`` say which catalog each live host runs and
  when it last wrote it to the store (the newest sync wins a trigger; see semantics.md);
- ``hosts.schedule_lag_seconds`` is how far behind its oldest due, unclaimed occurrence the
  host found the store at its last heartbeat;
- ``runs`` gains indexes for live runs per job and for expired leases.

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("schedules") as batch:
        batch.add_column(sa.Column("catalog_version", sa.String(length=64), nullable=True))
        batch.add_column(sa.Column("due_at", sa.DateTime(timezone=True), nullable=True))
    # Existing rows: due when their next occurrence is (a paused row then records its misses).
    op.execute(
        "UPDATE schedules SET due_at = next_occurrence "
        "WHERE enabled AND NOT orphaned AND next_occurrence IS NOT NULL"
    )
    with op.batch_alter_table("hosts") as batch:
        batch.add_column(sa.Column("catalog_version", sa.String(length=64), nullable=True))
        batch.add_column(sa.Column("synced_at", sa.DateTime(timezone=True), nullable=True))
        batch.add_column(sa.Column("schedule_lag_seconds", sa.Float(), nullable=True))
    op.create_index("ix_schedules_next_occurrence", "schedules", ["next_occurrence"])
    op.create_index("ix_schedules_due_at", "schedules", ["due_at"])
    op.create_index("ix_runs_job_name_outcome", "runs", ["job_name", "outcome"])
    op.create_index("ix_runs_outcome_lease_expires_at", "runs", ["outcome", "lease_expires_at"])


def downgrade() -> None:
    op.drop_index("ix_runs_outcome_lease_expires_at", table_name="runs")
    op.drop_index("ix_runs_job_name_outcome", table_name="runs")
    op.drop_index("ix_schedules_due_at", table_name="schedules")
    op.drop_index("ix_schedules_next_occurrence", table_name="schedules")
    with op.batch_alter_table("hosts") as batch:
        batch.drop_column("schedule_lag_seconds")
        batch.drop_column("synced_at")
        batch.drop_column("catalog_version")
    with op.batch_alter_table("schedules") as batch:
        batch.drop_column("due_at")
        batch.drop_column("catalog_version")
