"""Failures across jobs: the newest failed, timed-out and abandoned runs of every job by index.

- ``runs (outcome, finished_at, id)``: the newest runs of one outcome across all jobs, in the
  order ``jobhost failures`` and the dashboard's Failures page list them (newest first, the id
  breaking ties), and the count of runs by outcome in a time range for the whole installation,
  read without scanning the ledger.

Revision ID: 0010
Revises: 0009
"""

from __future__ import annotations

from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_runs_outcome_finished_at", "runs", ["outcome", "finished_at", "id"])


def downgrade() -> None:
    op.drop_index("ix_runs_outcome_finished_at", table_name="runs")
