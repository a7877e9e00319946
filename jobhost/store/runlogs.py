"""Run logs: the lines a job wrote during a run (migration 0008); the ledger writes them, this
module reads them.

A run keeps the first and the last of its lines. Each kept line carries its number among every
line the run wrote (``seq``) and its place in the output in bytes (``offset``, ``size``), so a
gap says how many lines and bytes were dropped there. One row holds consecutive lines of one
run (one flush's), from the row's ``seq``, each line's time, level, size and message in
``body`` as a compact JSON array: a row per line cost more than the lines themselves.
"""

from __future__ import annotations

import json
from collections.abc import Collection
from typing import Any

from sqlalchemy import BigInteger, Column, Integer, String, Table, Text, select
from sqlalchemy.engine import Connection

from jobhost.records import Dropped, LogLine
from jobhost.store.schema import metadata

__all__ = ["last_lines", "read_lines", "run_logs"]

run_logs = Table(
    "run_logs",
    metadata,
    Column("run_id", String(64), primary_key=True),
    Column("seq", Integer, primary_key=True),
    Column("lines", Integer, nullable=False),
    Column("offset", BigInteger, nullable=False),
    Column("body", Text, nullable=False),
)


def read_lines(
    connection: Connection, run_id: str, *, after: int = 0, limit: int = 10_000
) -> list[LogLine | Dropped]:
    """``run_id``'s kept lines numbered above ``after``, in order, with a :class:`Dropped` where
    lines are missing (also before the first one, when lines after ``after`` were dropped)."""
    rows = connection.execute(
        select(run_logs)
        .where(run_logs.c.run_id == run_id, run_logs.c.seq + run_logs.c.lines - 1 > after)
        .order_by(run_logs.c.seq)
    )
    lines: list[LogLine] = []
    for row in rows:
        lines.extend(line for line in _lines(row) if line.seq > after)
        if len(lines) >= limit:
            break
    rows.close()
    lines = lines[:limit]
    previous: LogLine | None = None
    if lines and after > 0 and lines[0].seq > after + 1:
        before = connection.execute(
            select(run_logs)
            .where(run_logs.c.run_id == run_id, run_logs.c.seq <= after)
            .order_by(run_logs.c.seq.desc())
            .limit(1)
        ).first()
        if before is not None:
            previous = [line for line in _lines(before) if line.seq <= after][-1]
    return _with_gaps(lines, previous, after)


def last_lines(
    connection: Connection, run_ids: Collection[str], *, count: int
) -> dict[str, list[LogLine | Dropped]]:
    """The last ``count`` kept lines of each run, in order, with the gaps among them."""
    found: dict[str, list[LogLine | Dropped]] = {}
    for run_id in run_ids:
        rows = connection.execute(
            select(run_logs).where(run_logs.c.run_id == run_id).order_by(run_logs.c.seq.desc())
        )
        newest_first: list[LogLine] = []
        for row in rows:
            newest_first.extend(reversed(_lines(row)))
            if len(newest_first) > count:
                break
        rows.close()
        lines = list(reversed(newest_first[: count + 1]))
        if not lines:
            continue
        previous = lines.pop(0) if len(lines) > count else None
        found[run_id] = _with_gaps(lines, previous, 0 if previous is None else previous.seq)
    return found


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


def _lines(row: Any) -> list[LogLine]:
    seq, offset, out = row.seq, row.offset, []
    for at_us, level, size, message in json.loads(row.body):
        out.append(LogLine(row.run_id, seq, at_us, level, message, offset, size))
        seq += 1
        offset += size
    return out
