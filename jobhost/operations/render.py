"""Text for people: 80-column tables and blocks, coloured only when stdout is a terminal."""

from __future__ import annotations

import os
import shutil
import sys
import textwrap
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import click

from jobhost.operations.reasons import printable
from jobhost.operations.timefmt import duration_text, short_utc

if TYPE_CHECKING:
    from jobhost.operations.health import Health
    from jobhost.operations.manual import TriggerResult
    from jobhost.records import Dropped, HostRecord, LogLine, RunRecord, ScheduleRecord, SyncPlan

__all__ = [
    "ELLIPSIS",
    "WIDTH",
    "Style",
    "cut",
    "health_lines",
    "history_lines",
    "middle_cut",
    "plan_lines",
    "plural",
    "stdout_style",
    "terminal_width",
    "trigger_line",
    "wrap_words",
]

WIDTH = 80
ELLIPSIS = "..."
"""Where text was cut: ASCII, so a line survives any terminal encoding and pipes into grep."""

_OUTCOME_COLOURS = {
    "succeeded": "green",
    "failed": "red",
    "timed_out": "red",
    "abandoned": "red",
    "refused": "red",
    "cancelled": "yellow",
    "missed": "yellow",
    "skipped": "yellow",
    "running": "cyan",
    "pending": "cyan",
    "queued": "cyan",
}


class Style:
    """``click.style`` when colour is on, the plain text otherwise."""

    def __init__(self, colour: bool) -> None:
        self.colour = colour

    def __call__(self, text: str, **styles: Any) -> str:
        return click.style(text, **styles) if self.colour else text

    def outcome(self, outcome: str) -> str:
        return self(outcome, fg=_OUTCOME_COLOURS.get(outcome))


def stdout_style() -> Style:
    """Colour when stdout is a terminal and ``NO_COLOR`` is not set (no-color.org)."""
    stream = sys.stdout
    tty = stream is not None and stream.isatty()
    return Style(tty and not os.environ.get("NO_COLOR"))


def terminal_width() -> int:
    """The terminal's width when stdout is one (at least :data:`WIDTH`), :data:`WIDTH` otherwise."""
    stream = sys.stdout
    if stream is None or not stream.isatty():
        return WIDTH
    return max(shutil.get_terminal_size((WIDTH, 24)).columns, WIDTH)


_RESULT_SHOWN = 300
"""Characters of a run's result the history text shows (all of it: ``--json``)."""


def history_lines(
    job: str,
    rows: list[RunRecord],
    style: Style,
    logs: Mapping[str, list[LogLine | Dropped]] | None = None,
) -> list[str]:
    """The ledger rows; with ``logs`` (``--logs``), each run's last log lines under it."""
    if not rows:
        return [f"{job}: no runs recorded"]
    lines = [
        style(f"{job}: {len(rows)} {plural(len(rows), 'row')}, newest first", bold=True),
        f"{'OCCURRENCE (UTC)':<20}  {'#':>2}  {'SOURCE':<8}  {'HOST':<20}  "
        f"{'DURATION':>8}  OUTCOME",
    ]
    for run in rows:
        occurrence = short_utc(run.occurrence) if run.occurrence else "(manual)"
        took = duration_text(run.duration_ms / 1000 if run.duration_ms is not None else None)
        lines.append(
            f"{occurrence:<20}  {run.attempt:>2}  {run.source:<8}  {cut(run.host_id, 20):<20}  "
            f"{took:>8}  {style.outcome(run.outcome)}"
        )
        details = [f"started {short_utc(run.started_at)}" if run.started_at else "not started"]
        if run.requested_by:
            details.append(f"by {run.requested_by}")
        if run.backfill_id:
            details.append(f"backfill {run.backfill_id}")
        if run.trace_id:
            details.append(f"trace {run.trace_id}")
        if len("  ".join(details)) > WIDTH - 4:
            details[-1:] = ["\n" + details[-1]]
        lines += [f"    {line.strip()}" for line in "  ".join(details).splitlines()]
        if run.reason:
            lines += _wrap(f"reason: {printable(run.reason)}", 4)
        if run.units is not None:
            lines += _wrap(run.units.describe(), 4)
        if run.result is not None:
            lines += _wrap(f"result: {cut(run.result, _RESULT_SHOWN)}", 4)
        if run.error_message or run.error_type:
            error = ": ".join(filter(None, [run.error_type, run.error_message]))
            lines += [style(line, fg="red") for line in _wrap(f"error: {error}", 4)]
        if logs is not None:
            lines += _log_lines(run, logs.get(run.id), style)
    return lines


def _log_lines(run: RunRecord, entries: list[LogLine | Dropped] | None, style: Style) -> list[str]:
    from jobhost.operations.runlogs import line_text

    if not entries:
        return [f"    log of run {run.id}: no lines"] if run.started_at else []
    lines = [f"    log of run {run.id} (last lines; all: jobhost logs {run.id}):"]
    for entry in entries:
        text = line_text(entry)
        level = getattr(entry, "level", "")
        colour = (
            "red" if level in {"ERROR", "CRITICAL"} else "yellow" if level == "WARNING" else None
        )
        for part in text.split("\n"):
            lines.append(style(f"      {part}", fg=colour) if colour else f"      {part}")
    return lines


def health_lines(health: Health, style: Style) -> list[str]:
    lines: list[str] = []
    width = max(len(check.name) for check in health.checks) + 2
    for check in health.checks:
        verdict = style("PASS", fg="green") if check.ok else style("FAIL", fg="red", bold=True)
        wrapped = wrap_words(check.detail, WIDTH - 6 - width) or [""]
        lines.append(f"{verdict}  {check.name:<{width}}{wrapped[0]}")
        lines += [" " * (6 + width) + more for more in wrapped[1:]]
    failed = sum(not check.ok for check in health.checks)
    total = len(health.checks)
    if failed:
        lines.append(style(f"unhealthy: {failed} of {total} checks failed", fg="red", bold=True))
    else:
        lines.append(style(f"healthy: all {total} checks passed", fg="green", bold=True))
    return lines


def plan_lines(plan: SyncPlan, rows: list[ScheduleRecord], style: Style) -> list[str]:
    if plan.empty:
        return ["no changes: the store matches the catalog"]
    stored = {row.job_name: row for row in rows}
    names = [item.job_name for item in plan.added]
    names += [c.job_name for c in plan.changed] + plan.orphaned
    width = min(max(len(name) for name in names) + 2, 40)
    lines: list[str] = []
    for added in plan.added:
        lines.append(f"{style('+', fg='green')} {added.job_name:<{width}}{added.describe()}")
    for change in plan.changed:
        before = "orphaned" if stored[change.job_name].orphaned else change.before
        lines.append(f"{style('~', fg='yellow')} {change.job_name:<{width}}{before}")
        lines.append(f"  {'':<{width}}-> {change.after}")
    for name in plan.orphaned:
        lines.append(f"{style('-', fg='red')} {name:<{width}}orphaned: no module declares it")
    lines.append(
        f"{len(plan.added)} to add, {len(plan.changed)} to change, {len(plan.orphaned)} to orphan"
    )
    return lines


def catalog_lines(version: str, hosts: list[HostRecord]) -> list[str]:
    """This catalog's version and the ones the live hosts run (the newest sync holds the store)."""
    lines = [f"this catalog: version {version}"]
    if not hosts:
        return [*lines, "live hosts: none"]
    newest = max(hosts, key=lambda h: h.synced_at or h.started_at)
    for host in hosts:
        mark = "  (newest sync: its triggers hold the store)" if host is newest else ""
        lines.append(
            f"live host {host.id}: catalog {host.catalog_version or '-'}, synced "
            f"{short_utc(host.synced_at)}{mark}"
        )
    return lines


def trigger_line(result: TriggerResult, style: Style) -> str:
    if result.outcome == "refused":
        return style(result.error or "refused", fg="red")
    subject = f"{result.job}"
    if result.run_id:
        subject += f" run {result.run_id}"
    if result.host:
        subject += f" on host {result.host}"
    took = (
        f" in {duration_text(result.duration_ms / 1000)}" if result.duration_ms is not None else ""
    )
    error = f": {result.error}" if result.error and result.outcome != "succeeded" else ""
    return f"{style.outcome(result.outcome)}: {subject}{took}{error}"


def wrap_words(text: str, width: int, indent: int = 0, first: int | None = None) -> list[str]:
    """``text`` wrapped at spaces only: a long name or URL overflows rather than breaking."""
    return textwrap.wrap(
        text,
        width,
        initial_indent=" " * (indent if first is None else first),
        subsequent_indent=" " * indent,
        break_long_words=False,
        break_on_hyphens=False,
    )


def _wrap(text: str, indent: int) -> list[str]:
    return wrap_words(text, WIDTH, indent)


def cut(text: str | None, width: int) -> str:
    value = text or "-"
    return value if len(value) <= width else value[: width - 1] + "~"


def middle_cut(name: str, width: int) -> str:
    """``name`` in ``width`` characters: its start (the module) and its end around ``...``."""
    if len(name) <= width:
        return name
    tail = (width - len(ELLIPSIS)) // 2
    head = width - len(ELLIPSIS) - tail
    return f"{name[:head]}{ELLIPSIS}{name[len(name) - tail :]}"


def plural(count: int, word: str) -> str:
    return word if count == 1 else f"{word}s"
