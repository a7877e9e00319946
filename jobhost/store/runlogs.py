"""Run logs: the lines a job wrote during a run, kept with the run (migration 0008).

A run keeps the first and the last of its lines; the ones between are not stored at all. Each
kept line carries its number among every line the run wrote (``seq``) and where it stood in the
run's output in bytes (``offset``, ``size``), so a gap in the numbers says how many lines and
bytes were dropped there, even for a run whose host was killed before it ended.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlalchemy import BigInteger, Column, Integer, String, Table, Text, delete, select
from sqlalchemy.engine import Connection

from jobhost.store.schema import metadata

__all__ = [
    "Dropped",
    "LogLine",
    "append_lines",
    "delete_run_logs",
    "last_lines",
    "read_lines",
    "run_logs",
    "trim_lines",
]

run_logs = Table(
    "run_logs",
    metadata,
    Column("run_id", String(64), primary_key=True),
    Column("seq", Integer, primary_key=True),
    # Microseconds since the Unix epoch (UTC): cheap to write for every line.
    Column("at_us", BigInteger, nullable=False),
    Column("level", String(16), nullable=False),
    Column("message", Text, nullable=False),
    Column("offset", BigInteger, nullable=False),
    Column("size", Integer, nullable=False),
)


@dataclass(frozen=True, slots=True)
class LogLine:
    """One kept line: its number in the run's output (from 1), where it stood, what it said."""

    run_id: str
    seq: int
    at_us: int
    """When it was written: microseconds since the Unix epoch, UTC."""
    level: str
    message: str
    offset: int
    """Bytes the run wrote before this line."""
    size: int
    """Bytes of this line as the job wrote it (before it was cut)."""

    @property
    def at(self) -> datetime:
        return _EPOCH + timedelta(microseconds=self.at_us)


@dataclass(frozen=True, slots=True)
class Dropped:
    """Lines the bounds left out between two kept lines."""

    lines: int
    bytes: int


def append_lines(connection: Connection, lines: Sequence[LogLine]) -> None:
    """Insert kept lines: one prepared statement for the batch, handed to the driver as plain
    tuples (a busy host writes thousands a second; the per-row work of the generic path would
    cost more than the lines themselves)."""
    if not lines:
        return
    rows = [
        (line.run_id, line.seq, line.at_us, line.level, line.message, line.offset, line.size)
        for line in lines
    ]
    sqlite = connection.dialect.name == "sqlite"
    connection.exec_driver_sql(_INSERT_SQLITE if sqlite else _INSERT_POSTGRES, rows)


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_COLUMNS = 'run_logs (run_id, seq, at_us, level, message, "offset", size)'
_INSERT_SQLITE = f"INSERT INTO {_COLUMNS} VALUES (?, ?, ?, ?, ?, ?, ?)"
_INSERT_POSTGRES = f"INSERT INTO {_COLUMNS} VALUES (%s, %s, %s, %s, %s, %s, %s)"


def trim_lines(connection: Connection, run_id: str, *, above: int, below: int) -> None:
    """Delete ``run_id``'s lines numbered strictly between ``above`` and ``below``: lines of the
    kept tail that later lines pushed out."""
    connection.execute(
        delete(run_logs).where(
            run_logs.c.run_id == run_id, run_logs.c.seq > above, run_logs.c.seq < below
        )
    )


def read_lines(
    connection: Connection, run_id: str, *, after: int = 0, limit: int = 10_000
) -> list[LogLine | Dropped]:
    """``run_id``'s kept lines numbered above ``after``, in order, with a :class:`Dropped` where
    lines are missing (also before the first one, when lines after ``after`` were dropped)."""
    rows = connection.execute(
        select(run_logs)
        .where(run_logs.c.run_id == run_id, run_logs.c.seq > after)
        .order_by(run_logs.c.seq)
        .limit(limit)
    ).all()
    previous: LogLine | None = None
    if rows and after > 0 and rows[0].seq > after + 1:
        before = connection.execute(
            select(run_logs)
            .where(run_logs.c.run_id == run_id, run_logs.c.seq <= after)
            .order_by(run_logs.c.seq.desc())
            .limit(1)
        ).first()
        previous = _line(before) if before is not None else None
    return _with_gaps([_line(row) for row in rows], previous, after)


def last_lines(
    connection: Connection, run_ids: Collection[str], *, count: int
) -> dict[str, list[LogLine | Dropped]]:
    """The last ``count`` kept lines of each run, in order, with the gaps among them."""
    found: dict[str, list[LogLine | Dropped]] = {}
    for run_id in run_ids:
        rows = connection.execute(
            select(run_logs)
            .where(run_logs.c.run_id == run_id)
            .order_by(run_logs.c.seq.desc())
            .limit(count + 1)
        ).all()
        lines = [_line(row) for row in reversed(rows)]
        if not lines:
            continue
        if len(lines) > count:
            previous, lines = lines[0], lines[1:]
            found[run_id] = _with_gaps(lines, previous, previous.seq)
        else:
            found[run_id] = _with_gaps(lines, None, 0)
    return found


def delete_run_logs(connection: Connection, run_ids: Collection[str]) -> int:
    """Delete every line of the given runs; how many went."""
    if not run_ids:
        return 0
    result = connection.execute(delete(run_logs).where(run_logs.c.run_id.in_(list(run_ids))))
    return int(result.rowcount or 0)


def _with_gaps(
    lines: list[LogLine], previous: LogLine | None, after: int
) -> list[LogLine | Dropped]:
    out: list[LogLine | Dropped] = []
    seq = after
    end = previous.offset + previous.size if previous is not None else None
    for line in lines:
        if line.seq > seq + 1:
            # The bytes between are known when the line before the gap is (or from the start).
            start = end if end is not None else (0 if seq == 0 else line.offset)
            out.append(Dropped(line.seq - seq - 1, max(line.offset - start, 0)))
        out.append(line)
        seq, end = line.seq, line.offset + line.size
    return out


def _line(row: object) -> LogLine:
    return LogLine(
        run_id=row.run_id,  # type: ignore[attr-defined]
        seq=row.seq,  # type: ignore[attr-defined]
        at_us=row.at_us,  # type: ignore[attr-defined]
        level=row.level,  # type: ignore[attr-defined]
        message=row.message,  # type: ignore[attr-defined]
        offset=row.offset,  # type: ignore[attr-defined]
        size=row.size,  # type: ignore[attr-defined]
    )
