"""Run logs: what a job wrote through its logger during one run, kept with the run.

``run_logs`` holds a run's kept lines in chunks, one row per run per flush of the host's writer:
the run, the number of the chunk's first line among every line the run wrote (``seq``), how many
consecutive lines it holds (``lines``), where its first line stood in the run's output in bytes
(``offset``), and the lines themselves (``body``: a JSON array of ``[at_us, level, size,
message]``, the time in microseconds since the Unix epoch, UTC, the message redacted and bounded,
the size in bytes as the job wrote it). A reader tells how many lines and bytes were dropped
between two kept lines from the gap in their numbers and offsets. A row per chunk, not per line: a
busy host writes thousands of lines a second.

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
        sa.Column("lines", sa.Integer(), nullable=False),
        sa.Column("offset", sa.BigInteger(), nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("run_id", "seq", name="pk_run_logs"),
    )


def downgrade() -> None:
    op.drop_table("run_logs")
