"""Initial schema: schedules, the run ledger, hosts, manual run requests, job state.

Times are stored in UTC (timestamptz on PostgreSQL, naive UTC text on SQLite).

Revision ID: 0001
Revises:
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "hosts",
        sa.Column("id", sa.String(length=200), nullable=False),
        sa.Column("hostname", sa.String(length=255), nullable=False),
        sa.Column("pid", sa.Integer(), nullable=False),
        sa.Column("version", sa.String(length=64), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_seen_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("host_clock_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("heartbeat_seconds", sa.Integer(), nullable=False),
        sa.Column("stopped_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_hosts")),
    )
    op.create_table(
        "job_idempotency",
        sa.Column("job_name", sa.String(length=200), nullable=False),
        sa.Column("key", sa.String(length=300), nullable=False),
        sa.Column("run_id", sa.String(length=64), nullable=True),
        sa.Column("fencing_token", sa.BigInteger(), nullable=False),
        sa.Column("recorded_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("job_name", "key", name=op.f("pk_job_idempotency")),
    )
    op.create_table(
        "job_state",
        sa.Column("job_name", sa.String(length=200), nullable=False),
        sa.Column("key", sa.String(length=200), nullable=False),
        sa.Column("value", sa.Text(), nullable=False),
        sa.Column("fencing_token", sa.BigInteger(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("job_name", "key", name=op.f("pk_job_state")),
    )
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
        sa.PrimaryKeyConstraint("id", name=op.f("pk_run_requests")),
    )
    op.create_index("ix_run_requests_status", "run_requests", ["status"], unique=False)
    op.create_table(
        "runs",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("job_name", sa.String(length=200), nullable=False),
        sa.Column("occurrence", sa.DateTime(timezone=True), nullable=True),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("source", sa.String(length=16), nullable=False),
        sa.Column("outcome", sa.String(length=16), nullable=False),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("host_id", sa.String(length=200), nullable=True),
        sa.Column("fencing_token", sa.BigInteger(), nullable=True),
        sa.Column("idempotency_key", sa.String(length=300), nullable=True),
        sa.Column("requested_by", sa.String(length=200), nullable=True),
        sa.Column("queued_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("not_before", sa.DateTime(timezone=True), nullable=True),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("lease_expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("error_type", sa.String(length=200), nullable=True),
        sa.Column("error_message", sa.Text(), nullable=True),
        sa.Column("trace_id", sa.String(length=32), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_runs")),
        sa.UniqueConstraint(
            "job_name", "occurrence", "attempt", name="uq_runs_job_occurrence_attempt"
        ),
    )
    op.create_index("ix_runs_job_name_queued_at", "runs", ["job_name", "queued_at"], unique=False)
    op.create_index("ix_runs_outcome_not_before", "runs", ["outcome", "not_before"], unique=False)
    op.create_table(
        "schedules",
        sa.Column("job_name", sa.String(length=200), nullable=False),
        sa.Column("module", sa.String(length=200), nullable=False),
        sa.Column("trigger_kind", sa.String(length=16), nullable=True),
        sa.Column("trigger_expression", sa.String(length=200), nullable=True),
        sa.Column("timezone", sa.String(length=64), nullable=False),
        sa.Column("trigger_source", sa.String(length=16), nullable=False),
        sa.Column("enabled", sa.Boolean(), nullable=False),
        sa.Column("orphaned", sa.Boolean(), nullable=False),
        sa.Column("paused", sa.Boolean(), nullable=False),
        sa.Column("paused_by", sa.String(length=200), nullable=True),
        sa.Column("paused_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("paused_reason", sa.Text(), nullable=True),
        sa.Column("next_occurrence", sa.DateTime(timezone=True), nullable=True),
        sa.Column("interval_anchor", sa.DateTime(timezone=True), nullable=True),
        sa.Column("missed_through", sa.DateTime(timezone=True), nullable=True),
        sa.Column("lease_owner", sa.String(length=200), nullable=True),
        sa.Column("lease_expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("lease_run_id", sa.String(length=64), nullable=True),
        sa.Column("fencing_token", sa.BigInteger(), nullable=False),
        sa.Column("last_run_id", sa.String(length=64), nullable=True),
        sa.Column("last_outcome", sa.String(length=16), nullable=True),
        sa.Column("last_started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("last_success_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("job_name", name=op.f("pk_schedules")),
    )
    signals = op.create_table(
        "signals",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("version", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_signals")),
    )
    op.bulk_insert(signals, [{"id": 1, "version": 0}])


def downgrade() -> None:
    op.drop_table("signals")
    op.drop_table("schedules")
    op.drop_index("ix_runs_outcome_not_before", table_name="runs")
    op.drop_index("ix_runs_job_name_queued_at", table_name="runs")
    op.drop_table("runs")
    op.drop_index("ix_run_requests_status", table_name="run_requests")
    op.drop_table("run_requests")
    op.drop_table("job_state")
    op.drop_table("job_idempotency")
    op.drop_table("hosts")
