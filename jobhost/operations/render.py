"""Text for people: 80-column tables and blocks, coloured only when stdout is a terminal."""

from __future__ import annotations

import sys
import textwrap
from typing import TYPE_CHECKING, Any

import click

from jobhost.operations.timefmt import duration_text, short_local, short_utc

if TYPE_CHECKING:
    from jobhost.operations.health import Health
    from jobhost.operations.manual import TriggerResult
    from jobhost.operations.report import JobReport, Report
    from jobhost.store import HostRecord, RunRecord, ScheduleRecord
    from jobhost.store.registry import SyncPlan

__all__ = [
    "WIDTH",
    "Style",
    "health_lines",
    "history_lines",
    "plan_lines",
    "report_lines",
    "stdout_style",
    "trigger_line",
]

WIDTH = 80

_STATE_COLOURS = {"enabled": "green", "disabled": None, "paused": "yellow", "orphaned": "red"}
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
    """Colour when stdout is a terminal (``click.get_text_stream`` is deprecated in click 8.5)."""
    stream = sys.stdout
    return Style(stream is not None and stream.isatty())


def report_lines(report: Report, style: Style) -> list[str]:
    hosts = len(report.hosts)
    lines = [
        style(f"jobhost report at {short_utc(report.generated_at)}", bold=True)
        + f": {len(report.jobs)} {_plural(len(report.jobs), 'job')}, {hosts} live "
        + _plural(hosts, "host"),
    ]
    for job in report.jobs:
        lines += ["", *_job_lines(job, style)]
    lines += ["", *_host_lines(report.hosts, style)]
    return lines


def history_lines(job: str, rows: list[RunRecord], style: Style) -> list[str]:
    if not rows:
        return [f"{job}: no runs recorded"]
    lines = [
        style(f"{job}: {len(rows)} {_plural(len(rows), 'row')}, newest first", bold=True),
        f"{'OCCURRENCE (UTC)':<20}  {'#':>2}  {'SOURCE':<8}  {'HOST':<20}  "
        f"{'DURATION':>8}  OUTCOME",
    ]
    for run in rows:
        occurrence = short_utc(run.occurrence) if run.occurrence else "(manual)"
        took = duration_text(run.duration_ms / 1000 if run.duration_ms is not None else None)
        lines.append(
            f"{occurrence:<20}  {run.attempt:>2}  {run.source:<8}  {_cut(run.host_id, 20):<20}  "
            f"{took:>8}  {style.outcome(run.outcome)}"
        )
        details = [f"started {short_utc(run.started_at)}" if run.started_at else "not started"]
        if run.requested_by:
            details.append(f"by {run.requested_by}")
        if run.trace_id:
            details.append(f"trace {run.trace_id}")
        if len("  ".join(details)) > WIDTH - 4:
            details[-1:] = ["\n" + details[-1]]
        lines += [f"    {line.strip()}" for line in "  ".join(details).splitlines()]
        if run.reason:
            lines += _wrap(f"reason: {run.reason}", 4)
        if run.units is not None:
            lines += _wrap(run.units.describe(), 4)
        if run.error_message or run.error_type:
            error = ": ".join(filter(None, [run.error_type, run.error_message]))
            lines += [style(line, fg="red") for line in _wrap(f"error: {error}", 4)]
    return lines


def health_lines(health: Health, style: Style) -> list[str]:
    lines: list[str] = []
    width = max(len(check.name) for check in health.checks) + 2
    for check in health.checks:
        verdict = style("PASS", fg="green") if check.ok else style("FAIL", fg="red", bold=True)
        wrapped = textwrap.wrap(check.detail, WIDTH - 6 - width) or [""]
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


def _job_lines(job: JobReport, style: Style) -> list[str]:
    tags = style(job.state, fg=_STATE_COLOURS.get(job.state)) + (
        style(" critical", bold=True) if job.critical else ""
    )
    plain = len(job.state) + (9 if job.critical else 0)
    gap = max(WIDTH - len(job.name) - plain, 2)
    lines = [style(job.name, bold=True) + " " * gap + tags]
    if job.description:
        lines += _wrap(job.description, 2)
    effective = job.effective_trigger
    origin = f", from {effective.source}" if effective.source == "override" else ""
    lines += _field("trigger", f"{effective.describe()}{origin}")
    if job.declared_trigger is not None and effective.source == "override":
        lines += _wrap(f"declared {job.declared_trigger.describe()}", 11)
    if job.next_fire is not None:
        text = short_utc(job.next_fire)
        if effective.timezone != "UTC":
            local = short_local(job.next_fire, effective.timezone)
            text += f"   {local} ({effective.timezone})"
        lines += _field("next", text)
    else:
        lines += _field("next", "-")
    last = job.last_run
    if last is not None:
        took = duration_text(last.duration_ms / 1000 if last.duration_ms is not None else None)
        when = short_utc(last.started_at)
        text = f"{last.outcome} {when} in {took} on {last.host or '-'}"
        if last.error and last.outcome != "succeeded":
            text += f": {last.error}"
        last_lines = _field("last", text)
        last_lines[0] = last_lines[0].replace(last.outcome, style.outcome(last.outcome), 1)
        lines += last_lines
    else:
        lines += _field("last", "never run")
    if job.recent_outcomes:
        recent = " ".join(style.outcome(outcome) for outcome in job.recent_outcomes)
        lines += _field("recent", recent, styled=True)
    for mismatch in job.mismatches:
        lines += [style(line, fg="yellow") for line in _field("!", mismatch.text())]
    return lines


def _host_lines(hosts: list[HostRecord], style: Style) -> list[str]:
    if not hosts:
        return [style("no live host: nothing fires the jobs", fg="red", bold=True)]
    lines = [
        style("live hosts", bold=True),
        f"  {'ID':<22}  {'HOSTNAME':<16}  {'PID':>7}  {'LAST SEEN':<20}  SKEW",
    ]
    for host in hosts:
        skew = host.clock_skew_seconds
        skew_text = style(f"{skew:+.3f}s", fg="red" if abs(skew) > 1 else None)
        lines.append(
            f"  {_cut(host.id, 22):<22}  {_cut(host.hostname, 16):<16}  {host.pid:>7}  "
            f"{short_utc(host.last_seen_at):<20}  {skew_text}"
        )
    return lines


def _field(label: str, text: str, *, styled: bool = False) -> list[str]:
    head = f"  {label:<8} "
    if styled:
        return [head + text]
    wrapped = textwrap.wrap(text, WIDTH - len(head)) or [""]
    return [head + wrapped[0], *(" " * len(head) + line for line in wrapped[1:])]


def _wrap(text: str, indent: int) -> list[str]:
    return textwrap.wrap(text, WIDTH, initial_indent=" " * indent, subsequent_indent=" " * indent)


def _cut(text: str | None, width: int) -> str:
    value = text or "-"
    return value if len(value) <= width else value[: width - 1] + "~"


def _plural(count: int, word: str) -> str:
    return word if count == 1 else f"{word}s"
