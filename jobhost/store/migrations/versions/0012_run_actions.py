"""Operator actions on one run, and one change log for every surface.

- ``runs`` gains ``cancel_requested_by``, ``cancel_requested_at`` and ``cancel_reason``: an
  operator's request to cancel a running run (``jobhost cancel``, the API, the dashboard). The
  run's host sees it on its next turn and cancels the run cooperatively; the columns stay as
  the record of who cancelled it and why.
- ``console_actions`` (the dashboard's own audit since 0004) is folded into ``job_changes``:
  the dashboard now writes only through the operator-action path. Rows the change log already
  holds (the same job, action, actor and reason: since 0005 the dashboard wrote both) are not
  copied twice; the others are copied with their client and result in ``after``, then the
  table is dropped.

Revision ID: 0012
Revises: 0011
"""

from __future__ import annotations

import json

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

_console = sa.table(
    "console_actions",
    sa.column("id"),
    sa.column("at"),
    sa.column("actor"),
    sa.column("action"),
    sa.column("job_name"),
    sa.column("reason"),
    sa.column("client"),
    sa.column("result"),
)
_changes = sa.table(
    "job_changes",
    sa.column("at"),
    sa.column("actor"),
    sa.column("action"),
    sa.column("job_name"),
    sa.column("before"),
    sa.column("after"),
    sa.column("reason"),
)


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("cancel_requested_by", sa.String(length=200), nullable=True))
        batch.add_column(sa.Column("cancel_requested_at", sa.DateTime(timezone=True)))
        batch.add_column(sa.Column("cancel_reason", sa.Text(), nullable=True))
    _fold_console_actions()
    op.drop_index("ix_console_actions_job_name_at", table_name="console_actions")
    op.drop_table("console_actions")


def downgrade() -> None:
    op.create_table(
        "console_actions",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("actor", sa.String(length=200), nullable=False),
        sa.Column("action", sa.String(length=16), nullable=False),
        sa.Column("job_name", sa.String(length=200), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("client", sa.String(length=200), nullable=True),
        sa.Column("result", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_console_actions"),
    )
    op.create_index("ix_console_actions_job_name_at", "console_actions", ["job_name", "at"])
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("cancel_reason")
        batch.drop_column("cancel_requested_at")
        batch.drop_column("cancel_requested_by")


def _fold_console_actions() -> None:
    connection = op.get_bind()
    logged = {
        tuple(row)
        for row in connection.execute(
            sa.select(_changes.c.job_name, _changes.c.action, _changes.c.actor, _changes.c.reason)
        )
    }
    rows = connection.execute(sa.select(_console).order_by(_console.c.at)).mappings().all()
    copied = [
        {
            # The stored value as it is: the same column type on both sides.
            "at": row["at"],
            "actor": row["actor"],
            "action": row["action"],
            "job_name": row["job_name"],
            "before": None,
            "after": json.dumps(
                {"client": row["client"], "result": row["result"], "surface": "dashboard"},
                sort_keys=True,
            ),
            "reason": row["reason"],
        }
        for row in rows
        if (row["job_name"], row["action"], row["actor"], row["reason"]) not in logged
    ]
    if copied:
        connection.execute(_changes.insert(), copied)
