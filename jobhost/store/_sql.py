"""Small SQL building blocks that differ between SQLite and PostgreSQL."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Select, Table, Text, bindparam, cast, column, func, select
from sqlalchemy.engine import Connection
from sqlalchemy.exc import DBAPIError, IntegrityError, InterfaceError, OperationalError

from jobhost.store.types import utc_instant

__all__ = [
    "COPY_FROM",
    "built",
    "copy_ignoring_duplicates",
    "execute_isolating",
    "insert_ignoring_duplicates",
    "insert_returning_new",
    "json_rows",
    "locked",
    "rows_json",
    "violated_constraint",
]


def built(connection: Connection, name: str, build: Callable[[str], Any]) -> Any:
    """The statement ``name`` for this connection's dialect, built once per process.

    Hot statements are built with bind parameters and kept: SQLAlchemy memoizes a statement's
    cache key on the object, so a kept statement skips rebuilding and re-keying on every turn.
    """
    key = (name, connection.dialect.name)
    statement = _BUILT.get(key)
    if statement is None:
        statement = _BUILT[key] = build(connection.dialect.name)
    return statement


_BUILT: dict[tuple[str, str], Any] = {}


def locked(connection: Connection, statement: Select[Any]) -> Select[Any]:
    """Lock the selected rows, skipping rows another replica holds (PostgreSQL only).

    SQLite needs nothing: every store transaction there holds the database write lock.
    """
    if connection.dialect.name == "postgresql":
        return statement.with_for_update(skip_locked=True)
    return statement


def insert_ignoring_duplicates(
    connection: Connection, table: Table, rows: Sequence[dict[str, Any]], columns: Sequence[str]
) -> int:
    """Insert ``rows``, silently keeping the existing row where ``columns`` collide.

    One statement for the whole list (SQLAlchemy batches it into multi-row inserts on SQLite;
    see :func:`json_rows` for PostgreSQL), so a first sync of 10,000 jobs is a few round trips,
    not 10,000.
    """
    if not rows:
        return 0

    def build(dialect: str) -> Any:
        module = dialect_module(dialect)
        return (
            module.insert(table)
            .on_conflict_do_nothing(index_elements=list(columns))
            .returning(*table.primary_key.columns)
        )

    # Count the rows RETURNING hands back: drivers do not all report a rowcount for this insert.
    if connection.dialect.name == "postgresql":
        return len(_insert_json(connection, table, rows, columns))
    statement = built(connection, f"insert-ignoring:{table.name}:{','.join(columns)}", build)
    return len(connection.execute(statement, [dict(row) for row in rows]).all())


COPY_FROM = 100
"""The fewest rows :func:`copy_ignoring_duplicates` sends by ``COPY`` on PostgreSQL."""


def copy_ignoring_duplicates(
    connection: Connection, table: Table, rows: Sequence[dict[str, Any]], column: str
) -> set[Any]:
    """Insert many ``rows`` as :func:`insert_ignoring_duplicates` does (a row colliding on the
    unique ``column`` keeps the existing one); return the ``column`` values that went in.

    On PostgreSQL the rows travel by ``COPY`` into a temporary table and move over in one
    ``INSERT ... SELECT ... ON CONFLICT DO NOTHING``: ``COPY`` formats rows in C and streams
    them (an array parameter per column, which psycopg dumps element by element in Python,
    spent two seconds on a first sync of 10,000 jobs before the first statement left). The
    ``ON CONFLICT`` stays on the real table, so hosts starting together on an empty store still
    end with one row per key. Fewer than :data:`COPY_FROM` rows (a runtime job, a backfill's
    job) go in one plain statement: a temporary table is four round trips and a write to the
    system catalog.
    """
    if not rows:
        return set()
    if connection.dialect.name != "postgresql" or len(rows) < COPY_FROM:
        return set(insert_returning_new(connection, table, rows, [column]))
    names = list(rows[0])
    listed = ", ".join(f'"{name}"' for name in names)
    staging = f"jobhost_copy_{table.name}"
    # Only the copied columns, without the table's constraints: a NOT NULL column the rows
    # leave to its server default is filled by the INSERT below, not refused by the COPY.
    connection.exec_driver_sql(
        f'CREATE TEMPORARY TABLE "{staging}" ON COMMIT DROP AS '
        f'SELECT {listed} FROM "{table.name}" WITH NO DATA'
    )
    # COPY bypasses SQLAlchemy's binding: run each column's own bind step (UTCDateTime refuses
    # a naive instant) before psycopg formats the row.
    dialect = connection.dialect
    binds = [table.c[name].type.dialect_impl(dialect).bind_processor(dialect) for name in names]
    cursor = connection.connection.driver_connection.cursor()  # type: ignore[union-attr]
    with cursor.copy(f'COPY "{staging}" ({listed}) FROM STDIN') as copy:
        for row in rows:
            copy.write_row(
                [
                    row[name] if bind is None else bind(row[name])
                    for name, bind in zip(names, binds, strict=True)
                ]
            )
    inserted = connection.exec_driver_sql(
        f'INSERT INTO "{table.name}" ({listed}) SELECT {listed} FROM "{staging}" '
        f'ON CONFLICT ("{column}") DO NOTHING RETURNING "{column}"'
    )
    keys = set(inserted.scalars())
    # Dropped now, not only at commit: a second call in the same transaction creates it again.
    connection.exec_driver_sql(f'DROP TABLE "{staging}"')
    return keys


def insert_returning_new(
    connection: Connection, table: Table, rows: Sequence[dict[str, Any]], columns: Sequence[str]
) -> list[Any]:
    """Insert ``rows`` in one statement; return the primary keys of those that went in.

    A row whose ``columns`` collide with an existing row is left out, not raised: the caller
    drops what the database refused.
    """
    if not rows:
        return []

    def build(dialect: str) -> Any:
        module = dialect_module(dialect)
        (key,) = table.primary_key.columns
        return (
            module.insert(table).on_conflict_do_nothing(index_elements=list(columns)).returning(key)
        )

    if connection.dialect.name == "postgresql":
        return [row[0] for row in _insert_json(connection, table, rows, columns)]
    statement = built(connection, f"insert-new:{table.name}:{','.join(columns)}", build)
    return list(connection.execute(statement, [dict(row) for row in rows]).scalars())


def json_rows(columns: Sequence[tuple[str, Any]]) -> Any:
    """PostgreSQL: rows to select from, decoded from one JSON parameter (see
    :func:`rows_json`), with a column of each ``(name, type)`` in ``columns``.

    A batch statement built on it has the same text whatever the batch size, so psycopg parses
    it once and the server prepares it, where a multi-row VALUES list or an executemany
    changes with every size or sends a statement per row. The rows travel as one string that
    the standard library's C encoder writes: an array parameter per column, which psycopg
    dumps element by element in Python, cost a busy host a sixth of its CPU. (On SQLite, in
    the same process, decoding JSON costs what an executemany's binding does: it keeps those.)
    """
    return (
        func.json_to_recordset(cast(bindparam(_ROWS, type_=Text), JSON))
        .table_valued(*(column(name, kind) for name, kind in columns))
        .render_derived(name="v", with_types=True)
    )


def rows_json(rows: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """The rows as the one parameter of :func:`json_rows`: a JSON list of objects keyed by
    column name, each instant in ISO 8601 in UTC (a naive one is refused, as
    :class:`~jobhost.store.types.UTCDateTime` refuses it)."""
    return {_ROWS: _ENCODER.encode(rows)}


_ROWS = "json_rows"


def _instant(value: object) -> str:
    if not isinstance(value, datetime):
        raise TypeError(f"a {type(value).__name__} cannot be written in a batch of rows")
    return utc_instant(value).isoformat()


_ENCODER = json.JSONEncoder(default=_instant, allow_nan=False, separators=(",", ":"))


def _insert_json(
    connection: Connection, table: Table, rows: Sequence[dict[str, Any]], columns: Sequence[str]
) -> list[Any]:
    """PostgreSQL: insert ``rows`` from JSON (see :func:`json_rows`); the primary keys of the
    rows that went in, those colliding on ``columns`` left out."""
    names = tuple(rows[0])

    def build(_dialect: str) -> Any:
        source = json_rows([(name, table.c[name].type) for name in names])
        return (
            dialect_module("postgresql")
            .insert(table)
            .from_select(list(names), select(*(source.c[name] for name in names)))
            .on_conflict_do_nothing(index_elements=list(columns))
            .returning(*table.primary_key.columns)
        )

    statement = built(
        connection, f"insert-json:{table.name}:{','.join(columns)}:{','.join(names)}", build
    )
    return list(connection.execute(statement, rows_json(rows)).all())


def execute_isolating(
    connection: Connection,
    statement: Any,
    rows: Sequence[dict[str, Any]],
    *,
    isolate: bool = True,
) -> list[dict[str, Any]]:
    """Run ``statement`` for every row; return the rows the database refused.

    The whole batch is tried once; when it is refused for a reason other than the store being
    away (a trigger, a constraint, a corrupt row), each row is tried alone, so one bad row costs
    only itself and the batch's other writes stand. ``isolate=False`` runs the batch plainly
    (no savepoints) for a caller that retries the whole transaction isolated when it fails.
    """
    if not rows:
        return []
    if not isolate:
        connection.execute(statement, list(rows))
        return []
    try:
        with connection.begin_nested():
            connection.execute(statement, list(rows))
        return []
    except DBAPIError as error:
        if _store_away(error):
            raise
    refused: list[dict[str, Any]] = []
    for row in rows:
        try:
            with connection.begin_nested():
                connection.execute(statement, [row])
        except DBAPIError as error:
            if _store_away(error):
                raise
            refused.append(row)
    return refused


def _store_away(error: DBAPIError) -> bool:
    return error.connection_invalidated or isinstance(error, OperationalError | InterfaceError)


def violated_constraint(error: IntegrityError) -> str | None:
    """The name of the unique constraint behind ``error``, or its columns on SQLite."""
    diag = getattr(error.orig, "diag", None)
    name = getattr(diag, "constraint_name", None)
    if name:
        return str(name)
    message = str(error.orig)
    prefix = "UNIQUE constraint failed: "
    if prefix in message:
        return message.split(prefix, 1)[1].strip()
    return None


def dialect_module(dialect: str) -> Any:
    """The dialect package whose ``insert`` knows ON CONFLICT, imported when first needed:
    PostgreSQL's pulls in every PostgreSQL driver's dialect and asyncio, a tenth of a read-only
    command's start-up on an SQLite store."""
    if dialect == "postgresql":
        from sqlalchemy.dialects import postgresql

        return postgresql
    from sqlalchemy.dialects import sqlite

    return sqlite
