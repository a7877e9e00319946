"""Counts of closed minutes for the runs-by-outcome chart.

- ``run_outcome_minutes``: runs finished in each minute by outcome, for every job (job name
  ``''``) and for each job whose chart was shown; written by the chart's reader the first time a
  minute that can no longer change is asked for, never by the firing path.
- ``run_outcome_spans``: the minutes of each job whose counts are kept.
- ``run_outcome_purges``: one row counting the retention purge's batches, so a reader never
  writes counts made before a purge deleted some of their runs.

The tables start empty: the first chart of each range counts its runs once.

Revision ID: 0014
Revises: 0013
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "run_outcome_minutes",
        sa.Column("job_name", sa.String(length=200), nullable=False),
        sa.Column("minute", sa.DateTime(timezone=True), nullable=False),
        sa.Column("outcome", sa.String(length=16), nullable=False),
        sa.Column("runs", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("job_name", "minute", "outcome", name="pk_run_outcome_minutes"),
    )
    op.create_table(
        "run_outcome_spans",
        sa.Column("job_name", sa.String(length=200), nullable=False),
        sa.Column("filled_from", sa.DateTime(timezone=True), nullable=False),
        sa.Column("filled_to", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("job_name", name="pk_run_outcome_spans"),
    )
    purges = op.create_table(
        "run_outcome_purges",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("purges", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_run_outcome_purges"),
    )
    op.bulk_insert(purges, [{"id": 1, "purges": 0}])


def downgrade() -> None:
    op.drop_table("run_outcome_purges")
    op.drop_table("run_outcome_spans")
    op.drop_table("run_outcome_minutes")
