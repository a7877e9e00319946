"""Concurrency groups: a limit per group, each job's group, and who waits for a slot.

- ``concurrency_groups``: one row per group with its limit (``slots``), written by each host's
  start from ``[concurrency_limits]``; the claim locks these rows while it counts slots;
- ``schedules.concurrency_group``: the group the job runs in (None: none);
- ``schedules.group_waiting_since`` / ``runs.group_waiting_since``: when a due occurrence, a
  retry or a manual run first found its group full (None: not waiting);
- ``run_requests.beside_limit``: ``jobhost trigger --now`` starts the run even in a full group.

Revision ID: 0007
Revises: 0006
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "concurrency_groups",
        sa.Column("name", sa.String(length=100), nullable=False),
        sa.Column("slots", sa.Integer(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("name", name="pk_concurrency_groups"),
    )
    with op.batch_alter_table("schedules") as batch:
        batch.add_column(sa.Column("concurrency_group", sa.String(length=100), nullable=True))
        batch.add_column(
            sa.Column("group_waiting_since", sa.DateTime(timezone=True), nullable=True)
        )
    op.create_index(
        "ix_schedules_concurrency_group", "schedules", ["concurrency_group"], unique=False
    )
    with op.batch_alter_table("runs") as batch:
        batch.add_column(
            sa.Column("group_waiting_since", sa.DateTime(timezone=True), nullable=True)
        )
    with op.batch_alter_table("run_requests") as batch:
        batch.add_column(
            sa.Column("beside_limit", sa.Boolean(), nullable=False, server_default=sa.false())
        )


def downgrade() -> None:
    with op.batch_alter_table("run_requests") as batch:
        batch.drop_column("beside_limit")
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("group_waiting_since")
    op.drop_index("ix_schedules_concurrency_group", table_name="schedules")
    with op.batch_alter_table("schedules") as batch:
        batch.drop_column("group_waiting_since")
        batch.drop_column("concurrency_group")
    op.drop_table("concurrency_groups")
