"""Reading a run's log: the lines in order, a run's last lines, and how both are shown.

One shape for every reader: ``jobhost logs``, ``jobhost history --logs``, the API and the
dashboard. A gap the bounds left reads ``… 198,000 lines (19.4 MB) dropped …``.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from jobhost.records import Dropped, LogLine, RunRecord
from jobhost.store import Store

__all__ = [
    "LAST_LINES",
    "PAGE_LINES",
    "RUN_ID_LIMIT",
    "RunLogPage",
    "dropped_text",
    "entry_json",
    "line_text",
    "line_time",
    "page_json",
    "read_last_lines",
    "read_run_log",
]

RUN_ID_LIMIT = 64
"""The longest run id the ledger holds."""

LAST_LINES = 10
"""Lines of each run ``jobhost history --logs`` shows."""

PAGE_LINES = 2000
"""Lines one read returns at most; a reader asks again with ``after`` for the rest."""

_FINISHED = frozenset({"running", "pending"})


@dataclass(frozen=True, slots=True)
class RunLogPage:
    """Lines of one run after a line number, and whether the run may still write more."""

    run: RunRecord
    entries: list[LogLine | Dropped]
    next_after: int
    """The number of the last line returned (``after`` again when there was none)."""

    @property
    def running(self) -> bool:
        return self.run.outcome in _FINISHED


def read_run_log(
    store: Store, run_id: str, *, after: int = 0, limit: int = PAGE_LINES
) -> RunLogPage | None:
    """The run's lines numbered above ``after``; None for a run the ledger does not know.

    The run is read before its lines: a run seen finished has all its lines in the store (they
    are written before its outcome), so a reader that saw it finished reads the rest and stops.
    """
    found = store.run_and_lines(run_id, after=after, limit=limit)
    if found is None:
        return None
    run, entries = found
    lines = [entry for entry in entries if isinstance(entry, LogLine)]
    return RunLogPage(run, entries, lines[-1].seq if lines else after)


def read_last_lines(
    store: Store, run_ids: Collection[str], *, count: int
) -> dict[str, list[LogLine | Dropped]]:
    """The last ``count`` lines of each run that wrote any."""
    return store.last_lines(run_ids, count=count)


def dropped_text(gap: Dropped) -> str:
    """``… 198,000 lines (19.4 MB) dropped …``"""
    noun = "line" if gap.lines == 1 else "lines"
    return f"… {gap.lines:,} {noun} ({_size(gap.bytes)}) dropped …"


def line_text(entry: LogLine | Dropped) -> str:
    """One entry as ``jobhost logs`` prints it: time, level, message (continuation lines as
    they are)."""
    if isinstance(entry, Dropped):
        return dropped_text(entry)
    return f"{line_time(entry.at)} {entry.level:<8} {entry.message}"


def entry_json(entry: LogLine | Dropped) -> dict[str, Any]:
    """``{"seq", "time", "level", "message"}``, or ``{"dropped": {"lines", "bytes"}}``."""
    if isinstance(entry, Dropped):
        return {"dropped": {"lines": entry.lines, "bytes": entry.bytes}}
    return {
        "seq": entry.seq,
        "time": line_time(entry.at),
        "level": entry.level,
        "message": entry.message,
    }


def page_json(page: RunLogPage) -> dict[str, Any]:
    """The API's and ``jobhost logs --json``'s document."""
    return {
        "run_id": page.run.id,
        "job": page.run.job_name,
        "outcome": page.run.outcome,
        "running": page.running,
        "lines": [entry_json(entry) for entry in page.entries],
        "next_after": page.next_after,
    }


def line_time(at: datetime) -> str:
    """``2026-05-04T10:00:00.123Z``: lines of one second stay apart."""
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def _size(count: int) -> str:
    if count < 1000:
        return f"{count} B"
    for unit, scale in (("kB", 1e3), ("MB", 1e6), ("GB", 1e9)):
        if count < scale * 1000 or unit == "GB":
            return f"{count / scale:.1f} {unit}"
    return f"{count} B"  # pragma: no cover - the loop always returns
