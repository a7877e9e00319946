"""Run output as the store keeps it: lines, the chunks they are written in, what was dropped."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta


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


class Chunk(tuple[str, int, int, int, str]):
    """Consecutive lines of one run as one row: ``(run_id, seq, lines, offset, body)``, made by
    :func:`chunk`."""

    __slots__ = ()


def chunk(run_id: str, seq: int, offset: int, lines: Sequence[tuple[int, str, int, str]]) -> Chunk:
    """A row of ``lines`` (each ``(at_us, level, size, message)``), the first numbered ``seq``
    and standing at byte ``offset`` of the run's output."""
    body = json.dumps(lines, ensure_ascii=False, separators=(",", ":"))
    return Chunk((run_id, seq, len(lines), offset, body))


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class LogWrites:
    """Rows of run-log lines to write: ``trims`` first (``(run_id, above, below)``: the stored
    rows between two line numbers a later tail pushed out, see
    :func:`~jobhost.store.ledger.trim_lines`), then ``chunks``."""

    trims: Sequence[tuple[str, int, int]] = ()
    chunks: Sequence[Chunk] = ()
