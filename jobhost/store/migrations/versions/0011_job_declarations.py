"""Each job's effective declaration in its schedule row, so read-only commands need no plugins.

``description``, ``critical`` and ``dst_policy`` (``dst_gap=skip``: only a policy other than the
default) are columns a report or a health check filters on; ``job_source`` says where the job
comes from (``module``: a module's declaration, ``runtime``: created through ``/api/v1`` or
``jobhost jobs put``); ``declaration`` is the whole effective declaration as JSON (the declared
trigger, the override in force, the policies: misfire, overlap, retries and backoff, timeout,
lease, overdue grace; the plugin that declared it). They are written by every sync of a catalog
(``jobhost run``) and by the runtime-job change path; rows written before this revision hold
NULL until the next sync, and a read shows such a row from its trigger columns alone.

Revision ID: 0011
Revises: 0010
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("schedules") as batch:
        batch.add_column(sa.Column("description", sa.Text(), nullable=True))
        batch.add_column(sa.Column("critical", sa.Boolean(), nullable=True))
        batch.add_column(sa.Column("dst_policy", sa.String(length=64), nullable=True))
        batch.add_column(sa.Column("job_source", sa.String(length=16), nullable=True))
        batch.add_column(sa.Column("declaration", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("schedules") as batch:
        for name in ("declaration", "job_source", "dst_policy", "critical", "description"):
            batch.drop_column(name)
