"""Rows a host cannot use, each with the row and the fix: ``jobhost health``'s ``store-integrity``
check and ``jobhost db check`` (:func:`health_rows`, beside the other reads those ask for).

The check is bounded: it covers what a host reads (every schedule row, the live runs, the hosts
and the signal row), counts the offending rows in SQL through the indexes a host uses, and reads
at most ``limit`` of them. On PostgreSQL the column types refuse a value of the wrong type, so
only words and zone names are checked there.

The full audit (``--full``) reads every row of every table raw (a hand edit or a broken restore
on SQLite can leave any text in any column), streaming batches and keeping only counts, each
batch reported as checked so a caller can say how far it got.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

from jobhost_contracts import TriggerSource
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
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.sql.expression import ColumnClause, Select

from jobhost.records import PENDING, RUNNING, TERMINAL_OUTCOMES, HostRecord, RunRecord
from jobhost.store.engine import UTCDateTime, database, reading
from jobhost.store.ledger import hosts_at
from jobhost.store.outcome_counts import outcome_counts
from jobhost.store.reports import read_runs
from jobhost.store.schema import (
    IS_PENDING,
    IS_RUNNING,
    hosts,
    job_idempotency,
    job_state,
    runs,
    schedules,
    signals,
)
from jobhost.store.snapshot import catalog_versions
from jobhost.triggers import load_zone

__all__ = [
    "AuditStep",
    "CorruptRow",
    "HealthRows",
    "IntegrityResult",
    "audit_store",
    "check_live_rows",
    "health_rows",
]


@dataclass(frozen=True, slots=True)
class CorruptRow:
    job_name: str
    where: str
    """``schedules``, ``runs <id>``, ``hosts``, ..."""
    problem: str

    def line(self) -> str:
        return f"{self.job_name} ({self.where}): {self.problem}"


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


@dataclass(frozen=True)
class HealthRows:
    """What the health checks, ``jobhost db check``, the report's note on catalog versions, the
    dashboard's chart and the readers of the hosts read of the store, in one transaction: each
    part empty unless asked."""

    integrity: IntegrityResult
    stuck: list[RunRecord]
    """Running runs whose executor ignored cancellation and whose thread still runs."""
    oldest_due: datetime | None
    """The earliest ``due_at`` of any schedule: how far behind every host together is."""
    hosts: list[HostRecord]
    versions: dict[str, int]
    """See :func:`~jobhost.store.snapshot.catalog_versions`."""
    counts: list[dict[str, int]]
    """The chart's runs by outcome, in slices of the span before ``now``."""


_UNCHECKED = IntegrityResult([], 0, {})


def health_rows(
    connection: Connection,
    now: datetime,
    implausible: timedelta | None = None,
    *,
    checks: bool = False,
    hosts: Literal["alive", "all"] | None = None,
    versions: bool = False,
    chart: tuple[timedelta, int] | None = None,
) -> HealthRows:
    """With ``implausible``, the live rows checked (:func:`check_live_rows`); with ``checks``,
    the stuck runs and the oldest due occurrence; with ``hosts``, the hosts alive at ``now``
    (``"all"``: every host); with ``versions``, the catalog versions; with ``chart`` (span,
    slices), the outcome counts."""
    stuck = select(runs).where(runs.c.outcome == RUNNING, runs.c.error_type == "Stuck")
    return HealthRows(
        check_live_rows(connection, now, implausible) if implausible is not None else _UNCHECKED,
        read_runs(connection, stuck) if checks else [],
        connection.execute(select(func.min(schedules.c.due_at))).scalar() if checks else None,
        hosts_at(connection, now, alive_only=hosts == "alive") if hosts else [],
        catalog_versions(connection) if versions else {},
        outcome_counts(connection, now - chart[0], now, chart[1], now=now) if chart else [],
    )


def check_live_rows(
    connection: Connection, now: datetime, implausible: timedelta, *, limit: int = 10
) -> IntegrityResult:
    typed = database(connection).typed
    found: dict[tuple[str, str], CorruptRow] = {}
    covered: dict[str, int] = {}
    total = 0
    for scope in _scopes(connection, now + implausible, typed):
        bad = or_(*(rule.when for rule in scope.rules))
        counted = select(func.count(), func.count().filter(bad)).select_from(scope.table)
        rows, wrong = connection.execute(counted.where(scope.where)).one()
        covered[scope.what], total = int(rows), total + int(wrong)
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
    unknown = _bad_zones(zones)
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
    """Values not of their column's type (SQLite only) and words not among a column's few."""
    tests: list[ColumnElement[bool]] = list(extra)
    for column in table.columns:
        value: ColumnClause[Any] = raw_column(column.name)
        words = _WORDS.get((table.name, column.name))
        if words is not None:
            tests.append(value.not_in(sorted(words)))
        if typed:
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
        found = _mistyped(table, row)
        if found:
            return found
        job, where = _locate(table.name, row)
        return [CorruptRow(job, where, "holds a value of the wrong type; fix or delete the row")]

    return _Rule(when, describe)


def _schedule_rules(far: datetime) -> list[_Rule]:
    c = schedules.c
    live = c.enabled.is_(True) & c.orphaned.is_(False) & c.paused.is_(False)
    rules: list[tuple[ColumnElement[bool], Callable[[Mapping[str, Any]], str]]] = [
        (
            c.fencing_token < 0,
            lambda row: f"fencing_token is {row['fencing_token']}, below 0; set it to 0 or more",
        ),
        (
            (c.trigger_kind == "interval") & c.interval_anchor.is_(None),
            lambda _: (
                "interval_anchor is not a time; set it to the job's last occurrence (or "
                "restart a host to let it re-anchor the job at its next occurrence)"
            ),
        ),
        (
            c.lease_expires_at > far,
            lambda row: (
                f"lease_expires_at {_when(row['lease_expires_at'])} is further ahead "
                "than any renewal sets (the hosts treat it as expired); set it to NULL"
            ),
        ),
        (
            live & c.trigger_kind.is_not(None) & c.next_occurrence.is_(None),
            lambda _: (
                "next_occurrence is not a time; restart a host to recompute it from the trigger"
            ),
        ),
    ]
    return [_Rule(when, _schedule(problem)) for when, problem in rules]


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
    # Bare names: the driver's values, no type conversion.
    return [raw_column(c.name) for c in table.columns]


_ALL_TABLES = (schedules, runs, hosts, job_state, job_idempotency, signals)

_WORDS: dict[tuple[str, str], frozenset[str]] = {
    ("schedules", "trigger_kind"): frozenset({"cron", "interval"}),
    ("schedules", "trigger_source"): frozenset({"declaration", "override", "api"}),
    ("schedules", "last_outcome"): TERMINAL_OUTCOMES | {RUNNING},
    ("runs", "outcome"): TERMINAL_OUTCOMES | {RUNNING, PENDING},
    ("runs", "source"): frozenset(source.value for source in TriggerSource),
}
"""Text columns that hold one of a few words."""


def _mistyped(table: Table, row: Mapping[str, Any]) -> list[CorruptRow]:
    found: list[CorruptRow] = []
    for column in table.columns:
        value = row.get(column.name)
        if value is None:
            continue
        expected = _expected(table.name, column, value)
        if expected is not None:
            job, where = _locate(table.name, row)
            found.append(
                CorruptRow(
                    job,
                    where,
                    f"{column.name} is {str(value)[:60]!r}, not {expected}; fix or delete the "
                    "row (the hosts set its job aside meanwhile)",
                )
            )
    return found


def _bad_zones(zones: list[object]) -> list[str]:
    bad: list[str] = []
    for zone in zones:
        try:
            load_zone(str(zone))
        except LookupError:
            bad.append(str(zone))
    return bad


def _locate(table: str, row: Mapping[str, Any]) -> tuple[str, str]:
    if table == "hosts":
        return f"host {row.get('id')}", table
    key = {"runs": "id", "job_state": "key", "job_idempotency": "key"}.get(table)
    return str(row.get("job_name") or "-"), table if key is None else f"{table} {row.get(key)}"


def _expected(table: str, column: Any, value: object) -> str | None:
    kind = column.type
    if isinstance(kind, UTCDateTime):
        if isinstance(value, datetime):
            return None
        try:
            datetime.fromisoformat(str(value))
        except ValueError:
            return "a time"
        return None
    if isinstance(kind, Boolean):
        return None if value in (0, 1) else "true or false"
    if isinstance(kind, Integer | BigInteger):
        return None if isinstance(value, int) and not isinstance(value, bool) else "a number"
    words = _WORDS.get((table, column.name))
    if words is not None and value not in words:
        return f"one of {', '.join(sorted(words))}"
    if table == "schedules" and column.name == "timezone" and _bad_zones([value]):
        return "a time zone name (e.g. Europe/Berlin)"
    return None


_BATCH = 5_000


@dataclass(frozen=True)
class AuditStep:
    """One batch of one table, checked: ``rows`` so far, ``finished`` on its last."""

    table: str
    rows: int
    finished: bool
    problems: list[CorruptRow]


def audit_store(engine: Engine, *, batch: int = _BATCH) -> Iterator[AuditStep]:
    """Every table in batches, in one read-only transaction held while the caller iterates."""
    with reading(engine) as connection:
        streaming = connection.execution_options(stream_results=True, yield_per=batch)
        for table in _ALL_TABLES:
            result = streaming.execute(select(*_raw(table)).select_from(table)).mappings()
            checked = 0
            for part in result.partitions(batch):
                problems = [problem for row in part for problem in _mistyped(table, dict(row))]
                checked += len(part)
                yield AuditStep(table.name, checked, False, problems)
            yield AuditStep(table.name, checked, True, [])
