"""Manual requests wait in ``runs``, as every other piece of work does.

- ``runs.priority``: the order in which pending runs are claimed, lowest first: 0 for a manual
  run (a person waits), 1 for a retry, 2 for a backfilled occurrence.
- ``runs.beside_limit``: ``jobhost trigger --now`` starts the run even in a full concurrency
  group (the column moves here from ``run_requests``).
- ``runs.attempt_base``: how many attempts of the run's occurrence came before its lane began (0
  for the schedule's own runs; for a backfill's, the attempts before the backfill's first), so
  a backfilled occurrence has a retry budget of its own.
- ``run_requests`` goes. A pending request becomes a pending manual run whose id is the
  request's (with no ``not_before``: due at once for every host, whatever its clock), so a
  command or page still following it finds it; a refused request becomes a
  ``skipped`` manual run with the refusal as its reason; a started or queued request already
  has its run.

Downgrade moves the pending manual runs that no claim has looked at back into a new
``run_requests``; the skipped rows of refused requests stay in the ledger.

Revision ID: 0015
Revises: 0014
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column(
        "runs", sa.Column("priority", sa.SmallInteger(), nullable=False, server_default="1")
    )
    op.add_column(
        "runs",
        sa.Column("beside_limit", sa.Boolean(), nullable=False, server_default=sa.false()),
    )
    op.add_column(
        "runs", sa.Column("attempt_base", sa.Integer(), nullable=False, server_default="0")
    )
    op.execute(
        """
        INSERT INTO runs (id, job_name, occurrence, attempt, source, outcome, reason,
                          idempotency_key, requested_by, queued_at, not_before, priority,
                          beside_limit)
        SELECT id, job_name, NULL, 1, 'manual', 'pending', reason,
               job_name || ':manual:' || id, requested_by, requested_at, NULL, 0,
               beside_limit
        FROM run_requests WHERE status IN ('pending', 'claimed')
        """
    )
    op.execute(
        """
        INSERT INTO runs (id, job_name, occurrence, attempt, source, outcome, reason,
                          host_id, requested_by, queued_at, finished_at, priority)
        SELECT id, job_name, NULL, 1, 'manual', 'skipped',
               COALESCE(message, 'refused') || COALESCE('; asked: ' || reason, ''),
               claimed_by, requested_by, requested_at, requested_at, 0
        FROM run_requests WHERE status = 'refused'
        """
    )
    op.drop_index("ix_run_requests_status", table_name="run_requests")
    op.drop_table("run_requests")


def downgrade() -> None:
    op.create_table(
        "run_requests",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("job_name", sa.String(length=200), nullable=False),
        sa.Column("requested_by", sa.String(length=200), nullable=False),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("requested_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("run_id", sa.String(length=64), nullable=True),
        sa.Column("claimed_by", sa.String(length=200), nullable=True),
        sa.Column("message", sa.Text(), nullable=True),
        sa.Column("beside_limit", sa.Boolean(), nullable=False, server_default=sa.false()),
        sa.PrimaryKeyConstraint("id", name="pk_run_requests"),
    )
    op.create_index("ix_run_requests_status", "run_requests", ["status"], unique=False)
    fresh = "outcome = 'pending' AND priority = 0 AND not_before IS NULL"
    op.execute(
        f"""
        INSERT INTO run_requests (id, job_name, requested_by, reason, requested_at, status,
                                  beside_limit)
        SELECT id, job_name, COALESCE(requested_by, 'unknown'), reason, queued_at, 'pending',
               beside_limit
        FROM runs WHERE {fresh}
        """
    )
    op.execute(f"DELETE FROM runs WHERE {fresh}")
    # Both databases drop a column in place (SQLite since 3.35): a batch copy of ``runs`` would
    # lose its expression index, which SQLAlchemy cannot reflect.
    op.execute("ALTER TABLE runs DROP COLUMN attempt_base")
    op.execute("ALTER TABLE runs DROP COLUMN beside_limit")
    op.execute("ALTER TABLE runs DROP COLUMN priority")
