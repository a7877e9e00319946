"""Run results: the executor's ``Success`` value kept with its run.

- ``runs.result``: the value as JSON text of at most 4 kB (a value with no JSON form as its
  ``repr``; a longer one as a note of its length and start), NULL for a run that returned
  nothing, did not succeed, or finished before this revision.

Revision ID: 0016
Revises: 0015
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Nullable with no default: PostgreSQL and SQLite add it without rewriting the ledger.
    op.add_column("runs", sa.Column("result", sa.Text(), nullable=True))


def downgrade() -> None:
    # In place on both databases (SQLite since 3.35): a batch copy of ``runs`` would lose its
    # expression index, which SQLAlchemy cannot reflect.
    op.execute("ALTER TABLE runs DROP COLUMN result")
