"""Backfills: an operator's replay of a past range of one job's occurrences, kept in the store.

``backfills`` holds one row per backfill: the job, the range ``[range_from, range_to)``, the mode,
who asked and why, how many of its runs may be in flight at once (``concurrency``), its state
(``running``, ``cancelled``, ``done``) and when it was made and ended. ``backfill_items`` holds one
row per selected occurrence: ``pending`` until a host claims it, ``claimed`` (with the first run's
id) while its runs go on, then ``succeeded`` or ``failed`` by its run's final outcome. A
backfill's run is the next attempt of its occurrence; ``runs.backfill_id`` names the backfill.

Revision ID: 0009
Revises: 0008
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "backfills",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("job_name", sa.String(length=200), nullable=False),
        sa.Column("range_from", sa.DateTime(timezone=True), nullable=False),
        sa.Column("range_to", sa.DateTime(timezone=True), nullable=False),
        sa.Column("mode", sa.String(length=16), nullable=False),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("actor", sa.String(length=200), nullable=False),
        sa.Column("concurrency", sa.Integer(), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_backfills"),
    )
    op.create_index("ix_backfills_state", "backfills", ["state"])
    op.create_table(
        "backfill_items",
        sa.Column("backfill_id", sa.String(length=64), nullable=False),
        sa.Column("occurrence", sa.DateTime(timezone=True), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("run_id", sa.String(length=64), nullable=True),
        sa.PrimaryKeyConstraint("backfill_id", "occurrence", name="pk_backfill_items"),
    )
    op.create_index("ix_backfill_items_state", "backfill_items", ["state"])
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("backfill_id", sa.String(length=64), nullable=True))
        batch.create_index("ix_runs_backfill_id", ["backfill_id"])


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.drop_index("ix_runs_backfill_id")
        batch.drop_column("backfill_id")
    op.drop_index("ix_backfill_items_state", table_name="backfill_items")
    op.drop_table("backfill_items")
    op.drop_index("ix_backfills_state", table_name="backfills")
    op.drop_table("backfills")
