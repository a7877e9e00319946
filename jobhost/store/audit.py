"""The full audit behind ``jobhost db check --full``: every value of every row of every table,
read raw and judged as the bounded check judges the rows a host reads.

It streams: rows arrive in batches from a server-side cursor (PostgreSQL) or a lazy cursor
(SQLite), and nothing is kept but counts, so its memory does not grow with the ledger. Each
batch is reported as it is checked, so a caller can say how far the audit got if it stops.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Table, select
from sqlalchemy import column as raw_column
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.sql.expression import ColumnClause, Select

from jobhost.store.engine import reading
from jobhost.store.row_checks import ALL_TABLES, CorruptRow, mistyped

__all__ = ["AuditStep", "audit_rows", "audit_store"]

_BATCH = 5_000


@dataclass(frozen=True)
class AuditStep:
    """One batch of one table, checked."""

    table: str
    rows: int
    """Rows of ``table`` checked so far, this batch included."""
    finished: bool
    """The last batch of ``table``."""
    problems: list[CorruptRow]
    """What this batch holds that a host could not use."""


def audit_store(engine: Engine, *, batch: int = _BATCH) -> Iterator[AuditStep]:
    """:func:`audit_rows` in one read-only transaction, held while the caller iterates."""
    with reading(engine) as connection:
        yield from audit_rows(connection, batch=batch)


def audit_rows(connection: Connection, *, batch: int = _BATCH) -> Iterator[AuditStep]:
    """Every table, in batches of ``batch`` rows, as :class:`AuditStep` s."""
    for table in ALL_TABLES:
        yield from _audit_table(connection, table, batch)


def _audit_table(connection: Connection, table: Table, batch: int) -> Iterator[AuditStep]:
    names = [c.name for c in table.columns]
    columns: list[ColumnClause[Any]] = [raw_column(name) for name in names]
    query: Select[Any] = select(*columns).select_from(table)
    streaming = connection.execution_options(stream_results=True, yield_per=batch)
    result = streaming.execute(query)
    checked = 0
    for part in result.partitions(batch):
        problems: list[CorruptRow] = []
        for values in part:
            problems += mistyped(table, dict(zip(names, values, strict=True)))
        checked += len(part)
        yield AuditStep(table.name, checked, False, problems)
    yield AuditStep(table.name, checked, True, [])
