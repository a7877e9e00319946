"""Applying the schema migrations, and telling whether a store is current.

``jobhost db upgrade`` and the start of ``jobhost run`` both come here. The upgrade holds a lock
for its whole length (an advisory lock on PostgreSQL, the write lock on SQLite), so replicas that
start together apply each migration once and the others find the schema current.
"""

from __future__ import annotations

from importlib.resources import files

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import text
from sqlalchemy.engine import Connection, Engine

from jobhost.store.engine import is_postgres

__all__ = ["current_revision", "head_revision", "is_current", "upgrade"]

# Any constant works, as long as every jobhost process agrees on it.
_ADVISORY_LOCK_KEY = 0x6A6F62686F7374


def upgrade(engine: Engine) -> tuple[str | None, str]:
    """Bring the schema to the newest revision; return (revision before, revision after)."""
    with engine.begin() as connection:
        if is_postgres(engine):
            connection.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _ADVISORY_LOCK_KEY})
        before = _current(connection)
        config = _config()
        config.attributes["connection"] = connection
        command.upgrade(config, "head")
        return before, _current(connection) or ""


def current_revision(engine: Engine) -> str | None:
    with engine.connect() as connection:
        return _current(connection)


def head_revision() -> str:
    head = ScriptDirectory.from_config(_config()).get_current_head()
    assert head is not None, "the package ships no migrations"
    return head


def is_current(engine: Engine) -> bool:
    return current_revision(engine) == head_revision()


def _current(connection: Connection) -> str | None:
    return MigrationContext.configure(connection).get_current_revision()


def _config() -> Config:
    config = Config()
    config.set_main_option("script_location", str(files("jobhost.store") / "migrations"))
    return config
