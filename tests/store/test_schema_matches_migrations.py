"""The tables and indexes ``jobhost.store`` declares are those its migrations make, on both
stores: what alembic's autogenerate would write to bring the one to the other is nothing but
the indexes the schema says only a migration makes."""

from __future__ import annotations

import warnings
from typing import Any

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext

# The modules whose tables join the schema's metadata when imported.
import jobhost.store.runlogs
import jobhost.store.runtime
import jobhost.store.sessions  # noqa: F401
from jobhost.store import create_store_engine, upgrade
from jobhost.store.schema import metadata

MIGRATION_ONLY = {
    # Partial (0013, 0015) and expression (0004) indexes: not declared, see
    # jobhost/store/schema.py.
    "ix_runs_outcome_priority_not_before",
    "ix_runs_outcome_lease_expires_at",
    "ix_runs_backfill_id_outcome_priority_occurrence",
    "ix_schedules_concurrency_group",
    "ix_runs_job_name_newest",
}


def test_the_migrated_store_is_what_the_schema_declares(store_url: str) -> None:
    engine = create_store_engine(store_url)
    try:
        upgrade(engine)
        with engine.connect() as connection:
            context = MigrationContext.configure(
                connection,
                opts={"compare_type": False, "include_object": _declared_or_table},
            )
            with warnings.catch_warnings():
                # SQLite's reflection skips (and names) the expression index.
                warnings.filterwarnings("ignore", "Skipped unsupported reflection of expression")
                differences = compare_metadata(context, metadata)
    finally:
        engine.dispose()
    assert differences == []


def _declared_or_table(obj: Any, name: str | None, kind: str, reflected: bool, _: Any) -> bool:
    return not (kind == "index" and name in MIGRATION_ONLY)
