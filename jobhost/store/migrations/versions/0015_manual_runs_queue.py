"""Manual requests and backfilled occurrences wait in ``runs``, as every other piece of work does.

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

- ``backfill_items`` goes. A pending item becomes a pending run of its backfill (source
  ``backfill``, priority 2) at the next attempt of its occurrence, with the attempts before it
  as its ``attempt_base``; a claimed or settled item already has its runs. ``backfills.selected``
  keeps how many occurrences the backfill chose: a cancelled backfill's runs never started are
  deleted, and the count still says they were chosen.
- Pending runs are read by (outcome, priority, not_before), so a host's claim of manual runs
  and retries never reads a backfill's waiting occurrences; a backfill's runs by (backfill_id,
  outcome, priority, occurrence): its waiting occurrences (priority 2) in order, its retries
  (priority 1) and its runs in flight, each a range of its own.

Downgrade moves the pending manual runs that no claim has looked at back into a new
``run_requests``, and the backfills' runs not yet started back into ``backfill_items``; the
skipped rows of refused requests stay in the ledger.

Revision ID: 0015
Revises: 0014
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

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
    op.add_column(
        "backfills", sa.Column("selected", sa.Integer(), nullable=False, server_default="0")
    )
    op.execute(
        "UPDATE backfills SET selected = (SELECT count(*) FROM backfill_items"
        " WHERE backfill_items.backfill_id = backfills.id)"
    )
    _items_to_runs()
    op.drop_index("ix_backfill_items_state", table_name="backfill_items")
    op.drop_table("backfill_items")
    _index(
        "ix_runs_outcome_not_before",
        "ix_runs_outcome_priority_not_before",
        ["outcome", "priority", "not_before"],
        _PENDING,
    )
    _index(
        "ix_runs_backfill_id",
        "ix_runs_backfill_id_outcome_priority_occurrence",
        ["backfill_id", "outcome", "priority", "occurrence"],
        _IN_BACKFILL,
    )


def downgrade() -> None:
    _index(
        "ix_runs_backfill_id_outcome_priority_occurrence",
        "ix_runs_backfill_id",
        ["backfill_id"],
        _IN_BACKFILL,
    )
    _index(
        "ix_runs_outcome_priority_not_before",
        "ix_runs_outcome_not_before",
        ["outcome", "not_before"],
        _PENDING,
    )
    op.create_table(
        "backfill_items",
        sa.Column("backfill_id", sa.String(length=64), nullable=False),
        sa.Column("occurrence", sa.DateTime(timezone=True), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("run_id", sa.String(length=64), nullable=True),
        sa.PrimaryKeyConstraint("backfill_id", "occurrence", name="pk_backfill_items"),
    )
    op.create_index("ix_backfill_items_state", "backfill_items", ["state"])
    # Each occurrence of a backfill: pending while its first run waits, claimed once one ran
    # (settled items read as claimed: the release before settles them by their runs).
    op.execute(
        """
        INSERT INTO backfill_items (backfill_id, occurrence, state, run_id)
        SELECT backfill_id, occurrence,
               CASE WHEN min(outcome) = 'pending' AND max(outcome) = 'pending'
                    AND count(*) = 1 THEN 'pending' ELSE 'claimed' END,
               CASE WHEN count(*) = 1 AND min(outcome) = 'pending' THEN NULL ELSE min(id) END
        FROM runs WHERE backfill_id IS NOT NULL GROUP BY backfill_id, occurrence
        """
    )
    op.execute(
        "DELETE FROM runs WHERE backfill_id IS NOT NULL AND outcome = 'pending'"
        " AND source = 'backfill'"
    )
    with op.batch_alter_table("backfills") as batch:
        batch.drop_column("selected")
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


_PENDING = sa.text("outcome = 'pending'")
_IN_BACKFILL = sa.text("backfill_id IS NOT NULL")


def _index(old: str, new: str, columns: list[str], where: sa.TextClause) -> None:
    op.drop_index(old, table_name="runs")
    op.create_index(new, "runs", columns, postgresql_where=where, sqlite_where=where)


def _items_to_runs() -> None:
    """Each pending item becomes its backfill's pending run at the occurrence's next attempt."""
    connection = op.get_bind()
    items = (
        connection.execute(
            sa.text(
                "SELECT i.backfill_id, i.occurrence, b.job_name, b.mode, b.actor, b.reason,"
                " b.created_at,"
                " (SELECT max(r.attempt) FROM runs r WHERE r.job_name = b.job_name"
                "  AND r.occurrence = i.occurrence) AS last"
                " FROM backfill_items i JOIN backfills b ON b.id = i.backfill_id"
                " WHERE i.state = 'pending'"
            )
        )
        .mappings()
        .all()
    )
    rows = []
    for item in items:
        occurrence = _instant(item["occurrence"])
        key = f"{item['job_name']}:{occurrence.strftime('%Y-%m-%dT%H:%M:%SZ')}"
        base = int(item["last"] or 0)
        rows.append(
            {
                "id": uuid.uuid4().hex,
                "job_name": item["job_name"],
                "occurrence": item["occurrence"],
                "attempt": base + 1,
                "attempt_base": base,
                "key": f"{key}:backfill:{item['backfill_id']}" if item["mode"] == "all" else key,
                "actor": item["actor"],
                "reason": item["reason"],
                "queued_at": item["created_at"],
                "backfill_id": item["backfill_id"],
            }
        )
    if rows:
        connection.execute(
            sa.text(
                "INSERT INTO runs (id, job_name, occurrence, attempt, attempt_base, source,"
                " outcome, idempotency_key, requested_by, reason, queued_at, not_before,"
                " priority, backfill_id) VALUES (:id, :job_name, :occurrence, :attempt,"
                " :attempt_base, 'backfill', 'pending', :key, :actor, :reason, :queued_at,"
                " :queued_at, 2, :backfill_id)"
            ),
            rows,
        )


def _instant(value: object) -> datetime:
    """A stored instant as SQLite (text) or PostgreSQL (aware datetime) hands it over."""
    if isinstance(value, datetime):
        return value.astimezone(UTC)
    return datetime.fromisoformat(str(value)).replace(tzinfo=UTC)
