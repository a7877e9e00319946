"""Run logs: what a job wrote through its logger during one run, kept with the run.

``run_logs`` holds one row per kept line: the run, the line's number among every line the run wrote
(``seq``), when (``at_us``: microseconds since the Unix epoch, UTC; a busy host writes thousands of
lines a second, and an integer costs a fraction of a time's conversion), the level, the (redacted,
bounded) message, and where the line stood in the run's output in bytes (``offset``, ``size``), so
a reader tells how many lines and bytes were dropped between two kept lines from the gap in their
numbers and offsets.

Revision ID: 0008
Revises: 0007
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "run_logs",
        sa.Column("run_id", sa.String(length=64), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("at_us", sa.BigInteger(), nullable=False),
        sa.Column("level", sa.String(length=16), nullable=False),
        sa.Column("message", sa.Text(), nullable=False),
        sa.Column("offset", sa.BigInteger(), nullable=False),
        sa.Column("size", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("run_id", "seq", name="pk_run_logs"),
    )


def downgrade() -> None:
    op.drop_table("run_logs")
