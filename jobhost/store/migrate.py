"""Applying the schema migrations, and telling whether a store is current. The upgrade holds a
lock for its whole length (advisory on PostgreSQL, the write lock on SQLite), so replicas that
start together apply each migration once."""

from __future__ import annotations

import re
from functools import cache
from importlib.resources import files

from sqlalchemy import inspect, text
from sqlalchemy.engine import Connection, Engine

from jobhost.errors import SchemaTooNewError
from jobhost.store.engine import database, lift_deadline, reading

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
        if database(engine).server:
            # A migration of a large table may take longer than any one request's statement,
            # and loading alembic in the middle of the transaction longer than a short lease.
            lift_deadline(connection)  # the client waits as long as the server does
            connection.execute(text("SET LOCAL statement_timeout = 0"))
            connection.execute(text("SET LOCAL idle_in_transaction_session_timeout = 0"))
            connection.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _ADVISORY_LOCK_KEY})
        before = _current(connection)
        # Alembic would fail on a revision it does not ship, with a traceback and no advice.
        if is_current(before):
            # Every restart: alembic, and what it imports, is not loaded.
            return before, head_revision()
        from alembic import command  # only a migration needs alembic
        from alembic.config import Config

        config = Config()
        config.set_main_option("script_location", str(files("jobhost.store") / "migrations"))
        config.attributes["connection"] = connection
        command.upgrade(config, "head")
        return before, _current(connection) or ""


def current_revision(engine: Engine) -> str | None:
    # A read: on SQLite it must not wait for (or block) a writer.
    with reading(engine) as connection:
        return _current(connection)


def head_revision() -> str:
    """The newest revision this version ships (its migrations are numbered linearly)."""
    return max(known_revisions())


@cache
def known_revisions() -> frozenset[str]:
    """Every revision this version ships, from the migrations' file names, without alembic."""
    versions = files("jobhost.store") / "migrations" / "versions"
    found = {
        match.group(1)
        for entry in versions.iterdir()
        if (match := _REVISION_FILE.fullmatch(entry.name)) is not None
    }
    assert found, "the package ships no migrations"
    return frozenset(found)


_REVISION_FILE = re.compile(r"(\d{4})_\w+\.py")


def check_not_newer(current: str | None) -> None:
    """Raise :class:`SchemaTooNewError` for a revision this version does not know."""
    if current is not None and current not in known_revisions():
        raise SchemaTooNewError(current, head_revision())


def is_current(revision: str | None) -> bool:
    """Whether ``revision`` is the newest; :class:`SchemaTooNewError` for one not shipped."""
    check_not_newer(revision)
    return revision == head_revision()


def _current(connection: Connection) -> str | None:
    # Plain SQL on alembic's own table: a read-only command need not import alembic.
    if not inspect(connection).has_table("alembic_version"):
        return None
    found = connection.execute(text("SELECT version_num FROM alembic_version")).scalars().all()
    if len(found) > 1:
        raise RuntimeError(f"the store's alembic_version has {len(found)} rows: {found}")
    return str(found[0]) if found else None
