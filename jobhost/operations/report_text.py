"""The report as text: a summary, one line per job sized to the terminal, then the hosts.

``long`` gives each job its detailed block, with the full name, instead of its line (``--long``,
``--job``). The table keeps one line per job, so ``grep`` finds a job's status on its name's line:
a name longer than its column is cut in the middle, keeping its module and its end.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

import click

from jobhost.operations.reasons import printable
from jobhost.operations.render import (
    WIDTH,
    Style,
    cut,
    middle_cut,
    plural,
    wrap_words,
)
from jobhost.operations.status import STATUSES
from jobhost.operations.timefmt import duration_text, short_local, short_utc
from jobhost.triggers import UnknownTimezoneError, load_zone

if TYPE_CHECKING:
    from jobhost.operations.report import JobReport, Report
    from jobhost.records import HostRecord

__all__ = ["report_lines"]

_STATE_COLOURS = {"enabled": "green", "disabled": None, "paused": "yellow", "orphaned": "red"}
_STATUS_COLOURS = {
    "ok": "green",
    "failing": "red",
    "overdue": "red",
    "behind": "yellow",
    "stuck": "red",
    "running": "cyan",
    "waiting": "yellow",
    "paused": "yellow",
    "disabled": None,
    "orphaned": "red",
    "invalid": "red",
}
# Mismatches the status (or, for no-live-host, the summary) already says; FLAGS shows the others.
_IN_STATUS = frozenset(
    {
        "paused",
        "orphaned",
        "invalid",
        "lease-expired",
        "overdue",
        "next-fire-past",
        "no-next-fire",
        "no-live-host",
    }
)
_STATUS_WIDTH = 8
_NEXT_WIDTH = 15
_LAST_WIDTH = 19
_FLAGS_WIDTH = 8
_FIXED = _STATUS_WIDTH + _NEXT_WIDTH + _LAST_WIDTH + 8
"""The table's columns but NAME and FLAGS, with the gaps between them."""
PIPED_NAME_WIDTH = 100
"""The widest NAME column of a report that is piped: a reader (grep, a file) has no screen to
fit, so a name up to this long is shown whole; a longer one is still cut, to bound the line."""


def report_lines(
    report: Report,
    style: Style,
    *,
    width: int = WIDTH,
    long: bool = False,
    jobs: list[JobReport] | None = None,
    piped: bool = False,
    hidden_ok: int = 0,
) -> list[str]:
    """The report; ``jobs`` (a filtered, sorted selection) instead of all of them. ``piped``
    (standard output is no terminal) widens the table to show names whole (see
    :data:`PIPED_NAME_WIDTH`). ``hidden_ok``: how many ok jobs the selection left out, said
    after the jobs."""
    shown = report.jobs if jobs is None else jobs
    lines = _summary_lines(report, style, len(shown))
    if long:
        for job in shown:
            lines += ["", *_job_lines(job, style, width)]
    elif shown:
        if piped:
            longest = min(max(len(job.name) for job in shown), PIPED_NAME_WIDTH)
            width = max(width, longest + _FIXED + _FLAGS_WIDTH)
        lines += ["", *_table(shown, style, width, report.generated_at)]
    if hidden_ok:
        lines += ["", f"{hidden_ok} ok {plural(hidden_ok, 'job')} not listed (--all lists them)"]
    lines += ["", *_host_lines(report.hosts, style)]
    return lines


def _summary_lines(report: Report, style: Style, shown: int) -> list[str]:
    total = len(report.jobs) if report.summary is None else report.summary.jobs
    hosts = len(report.hosts)
    head = style(f"jobhost report at {short_utc(report.generated_at)}", bold=True)
    head += f": {total} {plural(total, 'job')}, {hosts} live {plural(hosts, 'host')}"
    if shown != total:
        head += f", {shown} shown"
    lines = [head]
    if report.summary is not None:
        width = WIDTH - 2
        counts = report.summary.by_status
        parts = [
            style(f"{status} {counts[status]}", fg=_STATUS_COLOURS[status])
            if counts[status]
            else f"{status} 0"
            for status in STATUSES
            if counts[status] or status in {"ok", "failing", "overdue", "behind", "stuck"}
        ]
        lines += _join_wrapped(parts, "  ", width)
        if report.hosts:
            worst = report.summary.max_lag_seconds
            lag = f"worst lag {worst:.1f}s, " if worst is not None else ""
            skew = report.summary.max_clock_skew_seconds or 0.0
            lines.append(f"  hosts: {hosts} live, {lag}worst clock skew {skew:.3f}s")
    for group in report.groups:
        busy = style("full", fg="yellow") if group.running >= group.limit else "free"
        lines.append(
            f"  group {group.name}: limit {group.limit}, running {group.running}, "
            f"waiting {group.waiting} ({busy})"
        )
    return lines


def _join_wrapped(parts: list[str], indent: str, width: int) -> list[str]:
    """``parts`` two spaces apart, on as many lines as ``width`` needs (parts may be styled)."""
    lines: list[str] = []
    line, seen = "", 0
    for part in parts:
        plain = len(click.unstyle(part))
        if line and seen + 2 + plain > width:
            lines.append(indent + line)
            line, seen = "", 0
        line, seen = (f"{line}  {part}", seen + 2 + plain) if line else (part, plain)
    return [*lines, indent + line] if line else lines


def _table(jobs: list[JobReport], style: Style, width: int, now: datetime) -> list[str]:
    longest = max(len(job.name) for job in jobs)
    name_width = max(min(longest, width - _FIXED - _FLAGS_WIDTH), 10)
    room = width - _FIXED - name_width
    lines = [
        f"{'NAME':<{name_width}}  {'STATUS':<{_STATUS_WIDTH}}  {'NEXT (LOCAL)':<{_NEXT_WIDTH}}  "
        f"{'LAST':<{_LAST_WIDTH}}  FLAGS"
    ]
    for job in jobs:
        status = style(f"{job.status:<{_STATUS_WIDTH}}", fg=_STATUS_COLOURS[job.status])
        last, outcome = _last_text(job, now)
        last_cell = f"{last:<{_LAST_WIDTH}}"
        if outcome:
            last_cell = last_cell.replace(outcome, style.outcome(outcome), 1)
        flags = ", ".join(_flags(job))
        inline = flags if len(flags) <= room else ""
        cells = f"{status}  {_next_text(job):<{_NEXT_WIDTH}}  {last_cell}  {inline}".rstrip()
        name = middle_cut(job.name, name_width)
        lines.append(style(f"{name:<{name_width}}", bold=True) + f"  {cells}")
        if flags and not inline:
            # Too long for its column: below the job, under STATUS, wrapped at spaces.
            lines += wrap_words(flags, width, name_width + 2)
    return lines


def _next_text(job: JobReport) -> str:
    if job.paused:
        return "paused"
    if job.next_fire is None:
        return "-"
    try:
        zone = load_zone(job.effective_trigger.timezone)
    except UnknownTimezoneError:
        return short_utc(job.next_fire)[5:16] + "Z"
    return job.next_fire.astimezone(zone).strftime("%m-%d %H:%M %Z")[:_NEXT_WIDTH]


def _last_text(job: JobReport, now: datetime) -> tuple[str, str | None]:
    last = job.last_run
    if last is None:
        return "never run", None
    if last.outcome == "running":
        since = now - last.started_at if last.started_at else None
        return f"running {duration_text(since)}", "running"
    when = last.finished_at or last.started_at
    ago = duration_text(now - when) if when is not None else "-"
    return f"{last.outcome} {ago} ago", last.outcome


def _flags(job: JobReport) -> list[str]:
    flags = ["critical"] if job.critical else []
    if job.effective_trigger.source == "api":
        flags.append("api")  # a runtime job: created through /api/v1 or `jobhost jobs put`
    if job.running and job.status != "running":
        flags.append(f"{job.running} running")
    if job.waiting_for is not None:
        flags.append(job.waiting_for)
    flags += [m.code for m in job.mismatches if m.code not in _IN_STATUS]
    return flags


def _job_lines(job: JobReport, style: Style, width: int) -> list[str]:
    tags = style(job.state, fg=_STATE_COLOURS.get(job.state)) + (
        style(" critical", bold=True) if job.critical else ""
    )
    plain = len(job.state) + (9 if job.critical else 0)
    gap = max(width - len(job.name) - plain, 2)
    lines = [style(job.name, bold=True) + " " * gap + tags]
    if job.description:
        lines += wrap_words(printable(job.description), width, 2)
    effective = job.effective_trigger
    origin = f", from {effective.source}" if effective.source in ("override", "api") else ""
    lines += _field("trigger", f"{effective.describe()}{origin}", width)
    if job.declared_trigger is not None and effective.source == "override":
        lines += wrap_words(f"declared {job.declared_trigger.describe()}", width, 11)
    lines += _field("status", job.waiting_for or job.status, width)
    if job.concurrency_group is not None:
        lines += _field("group", job.concurrency_group, width)
    if job.paused:
        lines += _field("next", "paused", width)
    elif job.next_fire is not None:
        text = short_utc(job.next_fire)
        if effective.timezone != "UTC":
            local = short_local(job.next_fire, effective.timezone)
            text += f"   {local} ({effective.timezone})"
        lines += _field("next", text, width)
    else:
        lines += _field("next", "-", width)
    lines += _last_lines(job, style, width)
    if job.recent_outcomes:
        recent = " ".join(style.outcome(outcome) for outcome in job.recent_outcomes)
        lines += [f"  {'recent':<8} {recent}"]
    for mismatch in job.mismatches:
        lines += [style(line, fg="yellow") for line in _field("!", mismatch.text(), width)]
    return lines


def _last_lines(job: JobReport, style: Style, width: int) -> list[str]:
    last = job.last_run
    if last is None:
        return _field("last", "never run", width)
    if last.outcome == "running":
        text = f"running since {short_utc(last.started_at)} on {last.host or '-'}"
    else:
        took = duration_text(last.duration_ms / 1000 if last.duration_ms is not None else None)
        text = f"{last.outcome} {short_utc(last.started_at)} in {took} on {last.host or '-'}"
        if last.error and last.outcome != "succeeded":
            text += f": {last.error}"
    lines = _field("last", text, width)
    lines[0] = lines[0].replace(last.outcome, style.outcome(last.outcome), 1)
    return lines


def _host_lines(hosts: list[HostRecord], style: Style) -> list[str]:
    if not hosts:
        return [style("no live host: nothing fires the jobs", fg="red", bold=True)]
    lines = [
        style("live hosts", bold=True),
        f"  {'ID':<20}  {'LAST SEEN':<20}  {'SKEW':>8}  {'LAG':>7}  CATALOG",
    ]
    for host in hosts:
        skew = host.clock_skew_seconds
        skew_text = style(f"{skew:>+7.3f}s", fg="red" if abs(skew) > 1 else None)
        lag = host.schedule_lag_seconds
        lag_text = f"{lag:>6.1f}s" if lag is not None else f"{'-':>7}"
        lines.append(
            f"  {cut(host.id, 20):<20}  {short_utc(host.last_seen_at):<20}  {skew_text}  "
            f"{lag_text}  {cut(host.catalog_version, 12)}"
        )
    return lines


def _field(label: str, text: str, width: int) -> list[str]:
    head = f"  {label:<8} "
    # Reasons, errors and descriptions are anyone's text: an escape sequence in them must not
    # drive the operator's terminal.
    wrapped = wrap_words(printable(text), width - len(head)) or [""]
    return [head + wrapped[0], *(" " * len(head) + line for line in wrapped[1:])]
