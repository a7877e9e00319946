"""Where a change came from, and wrong credentials counted across replicas.

- ``job_changes.surface``: ``cli``, ``api`` or ``dashboard`` (NULL for changes recorded before
  this revision, or by the host itself); ``job_changes.address``: the HTTP client's address as
  ``trusted_proxies`` decides it (NULL from the command line).
- ``wrong_guesses``: wrong credentials per key (a client address, or every address) and minute,
  the brake every replica reads through the store.

Revision ID: 0017
Revises: 0016
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Nullable with no default: both databases add them without rewriting the log.
    op.add_column("job_changes", sa.Column("surface", sa.String(length=16), nullable=True))
    op.add_column("job_changes", sa.Column("address", sa.String(length=200), nullable=True))
    op.create_table(
        "wrong_guesses",
        sa.Column("key", sa.String(length=200), nullable=False),
        sa.Column("minute", sa.BigInteger(), nullable=False),
        sa.Column("count", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("key", "minute", name="pk_wrong_guesses"),
    )


def downgrade() -> None:
    op.drop_table("wrong_guesses")
    # In place on both databases (SQLite since 3.35), as 0016 drops its column.
    op.execute("ALTER TABLE job_changes DROP COLUMN address")
    op.execute("ALTER TABLE job_changes DROP COLUMN surface")
