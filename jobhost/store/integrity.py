"""Rows a host cannot use: found for ``jobhost health``'s ``store-integrity`` check.

A host sets such a row's job aside and runs the others; this module lets an operator see them,
each with the row and the fix. The check is bounded: it covers what a host reads (every
schedule row, the live runs, the hosts and the signal row), asks the
database for the offending rows in SQL through the indexes a host uses, counts them, and reads
at most ``limit`` of them. On PostgreSQL the column types already refuse a value of the wrong
type, so only words and zone names are checked there. Finished runs and the other tables are
the full audit's (:mod:`jobhost.store.audit`, ``jobhost db check --full``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    ColumnElement,
    Integer,
    Table,
    false,
    func,
    or_,
    select,
    true,
)
from sqlalchemy import column as raw_column
from sqlalchemy.engine import Connection
from sqlalchemy.sql.expression import ColumnClause, Select

from jobhost.records import RUNNING, RunRecord
from jobhost.store.row_checks import WORDS, CorruptRow, bad_zones, locate, mistyped
from jobhost.store.schema import (
    IS_PENDING,
    IS_RUNNING,
    hosts,
    runs,
    schedules,
    signals,
)
from jobhost.store.types import UTCDateTime

__all__ = ["CorruptRow", "IntegrityResult", "check_live_rows", "stuck_runs"]


@dataclass(frozen=True)
class IntegrityResult:
    found: list[CorruptRow]
    """At most ``limit`` rows, each with its problem and fix."""
    total: int
    """How many rows have a problem (``found`` may show fewer)."""
    covered: dict[str, int]
    """What was checked: a kind of row and how many of them, in the order checked."""

    def coverage(self) -> str:
        return ", ".join(f"{count:,} {what}" for what, count in self.covered.items())


def check_live_rows(
    connection: Connection, now: datetime, implausible: timedelta, *, limit: int = 10
) -> IntegrityResult:
    """The rows a host reads that it would set aside or could not judge."""
    typed = connection.dialect.name == "sqlite"
    found: dict[tuple[str, str], CorruptRow] = {}
    covered: dict[str, int] = {}
    total = 0
    for scope in _scopes(connection, now + implausible, typed):
        covered[scope.what] = _count(connection, scope.table, scope.where)
        total += _count(
            connection, scope.table, scope.where & or_(*(rule.when for rule in scope.rules))
        )
        for rule in scope.rules:
            if len(found) >= limit:
                break
            query: Select[Any] = (
                select(*_raw(scope.table))
                .select_from(scope.table)
                .where(scope.where, rule.when)
                .order_by(*scope.table.primary_key.columns)
                .limit(limit)
            )
            for row in connection.execute(query).mappings():
                for problem in rule.describe(dict(row)):
                    found.setdefault((problem.job_name, problem.where), problem)
    return IntegrityResult(list(found.values())[:limit], total, covered)


def stuck_runs(connection: Connection) -> list[RunRecord]:
    """Running runs whose executor ignored cancellation and whose thread still runs."""
    query = select(runs).where(runs.c.outcome == RUNNING, runs.c.error_type == "Stuck")
    return [RunRecord.from_row(r) for r in connection.execute(query).mappings()]


_Describe = Callable[[Mapping[str, Any]], list[CorruptRow]]


@dataclass(frozen=True)
class _Rule:
    when: ColumnElement[bool]
    describe: _Describe


@dataclass(frozen=True)
class _Scope:
    what: str
    table: Table
    where: ColumnElement[bool]
    rules: list[_Rule]


def _scopes(connection: Connection, far: datetime, typed: bool) -> list[_Scope]:
    zones = [r[0] for r in connection.execute(select(schedules.c.timezone).distinct())]
    unknown = bad_zones(zones)
    zone_rule = schedules.c.timezone.in_(unknown) if unknown else false()
    return [
        _Scope(
            "schedule rows",
            schedules,
            true(),
            [_types(schedules, typed, zone_rule), *_schedule_rules(far)],
        ),
        _Scope(
            "live runs",
            runs,
            # Two conditions, not IN: each is answered by its own partial index (0013).
            or_(IS_RUNNING, IS_PENDING),
            [_types(runs, typed), _far_run_lease(far)],
        ),
        _Scope("hosts", hosts, true(), [_types(hosts, typed)]),
        _Scope("signal rows", signals, true(), [_types(signals, typed)]),
    ]


def _types(table: Table, typed: bool, *extra: ColumnElement[bool]) -> _Rule:
    """Values that are not of their column's type (SQLite only: PostgreSQL's types refuse them)
    and words that are not among a column's few."""
    tests: list[ColumnElement[bool]] = list(extra)
    for column in table.columns:
        value: ColumnClause[Any] = raw_column(column.name)
        words = WORDS.get((table.name, column.name))
        if words is not None:
            tests.append(value.not_in(sorted(words)))
        if not typed:
            continue
        # NULL is never a wrong type; typeof() says 'null' for it.
        present = value.is_not(None)
        if isinstance(column.type, UTCDateTime):
            unreadable = (func.typeof(value) != "text") | func.datetime(value).is_(None)
            tests.append(present & unreadable)
        elif isinstance(column.type, Boolean):
            tests.append(value.not_in([0, 1]))
        elif isinstance(column.type, Integer | BigInteger):
            tests.append(present & (func.typeof(value) != "integer"))
    when = or_(*tests) if tests else false()

    def describe(row: Mapping[str, Any]) -> list[CorruptRow]:
        found = mistyped(table, row)
        if found:
            return found
        job, where = locate(table.name, row)
        return [CorruptRow(job, where, "holds a value of the wrong type; fix or delete the row")]

    return _Rule(when, describe)


def _schedule_rules(far: datetime) -> list[_Rule]:
    c = schedules.c
    return [
        _Rule(
            c.fencing_token < 0,
            _schedule(
                lambda row: f"fencing_token is {row['fencing_token']}, below 0; set it to 0 or more"
            ),
        ),
        _Rule(
            (c.trigger_kind == "interval") & c.interval_anchor.is_(None),
            _schedule(
                lambda _row: (
                    "interval_anchor is not a time; set it to the job's last occurrence "
                    "(or restart a host to let it re-anchor the job at its next occurrence)"
                )
            ),
        ),
        _Rule(
            c.lease_expires_at > far,
            _schedule(
                lambda row: (
                    f"lease_expires_at {_when(row['lease_expires_at'])} is further ahead "
                    "than any renewal sets (the hosts treat it as expired); set it to NULL"
                )
            ),
        ),
        _Rule(
            c.enabled.is_(True)
            & c.orphaned.is_(False)
            & c.paused.is_(False)
            & c.trigger_kind.is_not(None)
            & c.next_occurrence.is_(None),
            _schedule(
                lambda _row: (
                    "next_occurrence is not a time; restart a host to recompute it from the trigger"
                )
            ),
        ),
    ]


def _far_run_lease(far: datetime) -> _Rule:
    def describe(row: Mapping[str, Any]) -> list[CorruptRow]:
        lease = row["lease_expires_at"]
        problem = (
            "lease_expires_at is not a time"
            if lease is None
            else f"lease_expires_at {_when(lease)} is further ahead than any renewal sets"
        )
        return [
            CorruptRow(
                str(row["job_name"]),
                f"runs {row['id']}",
                f"{problem}; a host records the run abandoned once its host {row['host_id']} is "
                "gone (or set lease_expires_at to the current time)",
            )
        ]

    c = runs.c
    when = (c.outcome == RUNNING) & (c.lease_expires_at.is_(None) | (c.lease_expires_at > far))
    return _Rule(when, describe)


def _schedule(problem: Callable[[Mapping[str, Any]], str]) -> _Describe:
    return lambda row: [CorruptRow(str(row["job_name"]), "schedules", problem(row))]


def _when(value: object) -> str:
    if not isinstance(value, datetime):
        try:
            value = datetime.fromisoformat(str(value))
        except ValueError:
            return repr(str(value)[:40])
    return f"{value:%Y-%m-%dT%H:%M:%SZ}"


def _raw(table: Table) -> list[ColumnClause[Any]]:
    """The table's columns as bare names: the driver's values, no type conversion."""
    return [raw_column(c.name) for c in table.columns]


def _count(connection: Connection, table: Table, where: ColumnElement[bool]) -> int:
    query = select(func.count()).select_from(table).where(where)
    return int(connection.execute(query).scalar_one())
