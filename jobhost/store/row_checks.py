"""What a stored value should have been: the per-row judgement shared by the bounded
``store-integrity`` check and the full audit (``jobhost db check --full``).

Rows are read raw (no type conversion), because a hand edit or a broken restore on SQLite can
leave any text in any column; PostgreSQL's column types refuse most such values themselves.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import BigInteger, Boolean, Integer, Table

from jobhost.records import PENDING, RUNNING, TERMINAL_OUTCOMES
from jobhost.store.schema import (
    hosts,
    job_idempotency,
    job_state,
    runs,
    schedules,
    signals,
)
from jobhost.store.types import UTCDateTime
from jobhost.triggers import load_zone

__all__ = ["ALL_TABLES", "WORDS", "CorruptRow", "bad_zones", "locate", "mistyped"]

ALL_TABLES: tuple[Table, ...] = (
    schedules,
    runs,
    hosts,
    job_state,
    job_idempotency,
    signals,
)

WORDS: dict[tuple[str, str], frozenset[str]] = {
    ("schedules", "trigger_kind"): frozenset({"cron", "interval"}),
    ("schedules", "trigger_source"): frozenset({"declaration", "override", "api"}),
    ("schedules", "last_outcome"): TERMINAL_OUTCOMES | {RUNNING},
    ("runs", "outcome"): TERMINAL_OUTCOMES | {RUNNING, PENDING},
    ("runs", "source"): frozenset({"schedule", "catch-up", "manual", "retry"}),
}
"""Text columns that hold one of a few words."""


@dataclass(frozen=True, slots=True)
class CorruptRow:
    job_name: str
    where: str
    """``schedules``, ``runs <id>``, ``hosts``, ..."""
    problem: str

    def line(self) -> str:
        return f"{self.job_name} ({self.where}): {self.problem}"


def mistyped(table: Table, row: Mapping[str, Any]) -> list[CorruptRow]:
    """The values of one raw ``row`` of ``table`` that are not of their column's type."""
    found: list[CorruptRow] = []
    for column in table.columns:
        value = row.get(column.name)
        if value is None:
            continue
        expected = _expected(table.name, column, value)
        if expected is not None:
            job, where = locate(table.name, row)
            found.append(
                CorruptRow(
                    job,
                    where,
                    f"{column.name} is {str(value)[:60]!r}, not {expected}; fix or delete the "
                    "row (the hosts set its job aside meanwhile)",
                )
            )
    return found


def bad_zones(zones: list[object]) -> list[str]:
    """The stored zone names no zone database knows."""
    bad: list[str] = []
    for zone in zones:
        try:
            load_zone(str(zone))
        except LookupError:
            bad.append(str(zone))
    return bad


def locate(table: str, row: Mapping[str, Any]) -> tuple[str, str]:
    """(job or host, where) of a raw row, for the line an operator reads."""
    job = str(row.get("job_name") or "-")
    if table == "schedules":
        return job, "schedules"
    if table == "runs":
        return job, f"{table} {row.get('id')}"
    if table in {"job_state", "job_idempotency"}:
        return job, f"{table} {row.get('key')}"
    return f"host {row.get('id')}" if table == "hosts" else "-", table


def _expected(table: str, column: Any, value: object) -> str | None:
    """What ``value`` should have been, or None when it is fine."""
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
    words = WORDS.get((table, column.name))
    if words is not None and value not in words:
        return f"one of {', '.join(sorted(words))}"
    if table == "schedules" and column.name == "timezone" and bad_zones([value]):
        return "a time zone name (e.g. Europe/Berlin)"
    return None
