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

from jobhost.errors import SchemaTooNewError
from jobhost.store.engine import is_postgres, reading

__all__ = [
    "check_not_newer",
    "current_revision",
    "head_revision",
    "is_current",
    "known_revisions",
    "upgrade",
]

# Any constant works, as long as every jobhost process agrees on it.
_ADVISORY_LOCK_KEY = 0x6A6F62686F7374


def upgrade(engine: Engine) -> tuple[str | None, str]:
    """Bring the schema to the newest revision; return (revision before, revision after)."""
    with engine.begin() as connection:
        if is_postgres(engine):
            # A migration of a large table may take longer than any one request's statement.
            connection.execute(text("SET LOCAL statement_timeout = 0"))
            connection.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _ADVISORY_LOCK_KEY})
        before = _current(connection)
        # Alembic would fail on a revision it does not ship, with a traceback and no advice.
        check_not_newer(before)
        config = _config()
        config.attributes["connection"] = connection
        command.upgrade(config, "head")
        return before, _current(connection) or ""


def current_revision(engine: Engine) -> str | None:
    # A read: on SQLite it must not wait for (or block) a writer.
    with reading(engine) as connection:
        return _current(connection)


def head_revision() -> str:
    head = ScriptDirectory.from_config(_config()).get_current_head()
    assert head is not None, "the package ships no migrations"
    return head


def is_current(engine: Engine) -> bool:
    """Whether the schema is this version's newest; raises SchemaTooNewError when it is newer."""
    current = current_revision(engine)
    check_not_newer(current)
    return current == head_revision()


def known_revisions() -> frozenset[str]:
    """Every revision this version ships."""
    return frozenset(
        script.revision for script in ScriptDirectory.from_config(_config()).walk_revisions()
    )


def check_not_newer(current: str | None) -> None:
    """Raise :class:`SchemaTooNewError` for a revision this version does not know."""
    if current is not None and current not in known_revisions():
        raise SchemaTooNewError(current, head_revision())


def _current(connection: Connection) -> str | None:
    return MigrationContext.configure(connection).get_current_revision()


def _config() -> Config:
    config = Config()
    config.set_main_option("script_location", str(files("jobhost.store") / "migrations"))
    return config
