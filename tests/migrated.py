"""Migrating a test's empty store at the cost of its SQL, not of Alembic's Python.

The first empty store of each backend in a pytest process is migrated by ``jobhost``'s own
``upgrade`` while every statement it sends is recorded; later empty stores get the same
statements, in the same order, in one transaction. The result is the schema and revision the
migrations make, because it is what they sent. A store that already has tables is upgraded for
real. Tests about migrating (fresh stores, revisions, ``db upgrade``) call ``upgrade`` itself.
"""

from __future__ import annotations

import threading
from typing import Any

from sqlalchemy import event, inspect
from sqlalchemy.engine import Engine

from jobhost.store import upgrade

__all__ = ["migrate"]

_Statement = tuple[str, Any, bool]
_recorded: dict[str, list[_Statement]] = {}
_lock = threading.Lock()


def migrate(engine: Engine) -> None:
    """Bring ``engine``'s store to the newest revision (see the module's docstring)."""
    dialect = engine.dialect.name
    if inspect(engine).get_table_names():
        upgrade(engine)
        return
    with _lock:
        statements = _recorded.get(dialect)
        if statements is None:
            _recorded[dialect] = _record(engine)
            return
    _replay(engine, statements)


def _record(engine: Engine) -> list[_Statement]:
    seen: list[_Statement] = []

    def sent(
        _conn: Any, _cursor: Any, statement: str, parameters: Any, _context: Any, many: bool
    ) -> None:
        seen.append((statement, parameters, many))

    event.listen(engine, "before_cursor_execute", sent)
    try:
        upgrade(engine)
    finally:
        event.remove(engine, "before_cursor_execute", sent)
    return seen


def _replay(engine: Engine, statements: list[_Statement]) -> None:
    # The driver's own connection: the statements include the transaction's start as the
    # product sends it (BEGIN IMMEDIATE on SQLite), which SQLAlchemy would begin again.
    connection = engine.raw_connection()
    try:
        cursor = connection.cursor()
        for statement, parameters, many in statements:
            if many:
                cursor.executemany(statement, parameters)
            elif parameters:
                cursor.execute(statement, parameters)
            else:
                cursor.execute(statement)
        connection.commit()
    finally:
        connection.close()
