"""The dashboard's session versions: a sign-out moves a person's version on, ending each of
their sessions on every replica.

Revision ID: 0006
Revises: 0005
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "console_sessions",
        sa.Column("who", sa.String(length=200), nullable=False),
        sa.Column("version", sa.BigInteger(), nullable=False),
        sa.Column("changed_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("who", name="pk_console_sessions"),
    )


def downgrade() -> None:
    op.drop_table("console_sessions")
