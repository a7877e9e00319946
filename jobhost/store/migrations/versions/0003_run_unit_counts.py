"""Fan-out counts on the run ledger: units total, succeeded, failed, already done.

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

_COLUMNS = ("units_total", "units_succeeded", "units_failed", "units_skipped_already_done")


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        for name in _COLUMNS:
            batch.add_column(sa.Column(name, sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        for name in reversed(_COLUMNS):
            batch.drop_column(name)
