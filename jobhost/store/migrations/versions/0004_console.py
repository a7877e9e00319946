"""The operator's console: the report's reads by index, and an audit of dashboard actions.

- ``runs (job_name, coalesce(started_at, queued_at))``: a job's newest ledger rows, in the
  ledger's own order, read without sorting the job's history (the report, the timeline);
- ``runs (job_name, outcome, finished_at)``: a job's last success by index;
- ``console_actions``: every trigger, pause and resume asked for from the dashboard, with who,
  why, from where, and what came of it.

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index(
        "ix_runs_job_name_newest",
        "runs",
        ["job_name", sa.text("coalesce(started_at, queued_at)")],
    )
    op.create_index(
        "ix_runs_job_name_outcome_finished_at", "runs", ["job_name", "outcome", "finished_at"]
    )
    op.create_table(
        "console_actions",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("actor", sa.String(length=200), nullable=False),
        sa.Column("action", sa.String(length=16), nullable=False),
        sa.Column("job_name", sa.String(length=200), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("client", sa.String(length=200), nullable=True),
        sa.Column("result", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_console_actions"),
    )
    op.create_index("ix_console_actions_job_name_at", "console_actions", ["job_name", "at"])


def downgrade() -> None:
    op.drop_index("ix_console_actions_job_name_at", table_name="console_actions")
    op.drop_table("console_actions")
    op.drop_index("ix_runs_job_name_outcome_finished_at", table_name="runs")
    op.drop_index("ix_runs_job_name_newest", table_name="runs")
