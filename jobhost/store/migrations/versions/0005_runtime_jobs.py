"""Runtime jobs and their change log.

- ``runtime_jobs``: jobs created through ``/api/v1`` or ``jobhost jobs put``: kind, definition
  (canonical JSON) and a version that grows with every change (the API's ETag);
- ``job_changes``: who created, changed, paused, resumed, triggered or removed what, when, with
  the definition before and after; hosts watch its newest id to reload their runtime jobs.

Revision ID: 0005
Revises: 0004
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "runtime_jobs",
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("kind", sa.String(length=64), nullable=False),
        sa.Column("definition", sa.Text(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("created_by", sa.String(length=200), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_by", sa.String(length=200), nullable=False),
        sa.PrimaryKeyConstraint("name", name="pk_runtime_jobs"),
    )
    op.create_table(
        "job_changes",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("actor", sa.String(length=200), nullable=False),
        sa.Column("action", sa.String(length=16), nullable=False),
        sa.Column("job_name", sa.String(length=200), nullable=False),
        sa.Column("before", sa.Text(), nullable=True),
        sa.Column("after", sa.Text(), nullable=True),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_job_changes"),
    )
    op.create_index("ix_job_changes_job_name_id", "job_changes", ["job_name", "id"])


def downgrade() -> None:
    op.drop_index("ix_job_changes_job_name_id", table_name="job_changes")
    op.drop_table("job_changes")
    op.drop_table("runtime_jobs")
