"""Text for people: 80-column tables and blocks, coloured only when stdout is a terminal. The
report's table keeps one line per job, so ``grep`` finds a job's status on its name's line."""

from __future__ import annotations

import os
import re
import shutil
import sys
import textwrap
from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

import click
import orjson

from jobhost.operations.changes import printable
from jobhost.operations.report import STATUSES, JobReport, Report
from jobhost.operations.timefmt import duration_text, known_zone, short_local, short_utc

if TYPE_CHECKING:
    from jobhost.operations.health import Health
    from jobhost.operations.runs import TriggerResult
    from jobhost.records import Dropped, HostRecord, LogLine, RunRecord

__all__ = [
    "ELLIPSIS",
    "WIDTH",
    "Style",
    "cut",
    "health_lines",
    "history_lines",
    "indented",
    "middle_cut",
    "plan_lines",
    "report_lines",
    "stdout_style",
    "terminal_width",
    "trigger_line",
    "wrap_words",
]

WIDTH = 80
ELLIPSIS = "..."
"""Where text was cut: ASCII, so a line survives any terminal encoding and pipes into grep."""

_OUTCOME_COLOURS = {
    **dict.fromkeys(("failed", "timed_out", "abandoned", "refused"), "red"),
    **dict.fromkeys(("cancelled", "missed", "skipped"), "yellow"),
    **dict.fromkeys(("running", "pending", "queued"), "cyan"),
    "succeeded": "green",
}
_LEVEL_COLOURS = {"ERROR": "red", "CRITICAL": "red", "WARNING": "yellow"}


class Style:
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
    """The ledger rows; with ``logs``, each run's last log lines under it."""
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
            f"{occurrence:<20}  {run.attempt:>2}  {run.source:<8}  {cut(run.host_id, 20):<20}  "
            f"{took:>8}  {style.outcome(run.outcome)}"
        )
        details = [f"started {short_utc(run.started_at)}" if run.started_at else "not started"]
        tags = {"by": run.requested_by, "backfill": run.backfill_id, "trace": run.trace_id}
        details += [f"{tag} {value}" for tag, value in tags.items() if value]
        if len("  ".join(details)) > WIDTH - 4:
            details[-1:] = ["\n" + details[-1]]
        lines += [f"    {line.strip()}" for line in "  ".join(details).splitlines()]
        if run.reason:
            lines += wrap_words(f"reason: {printable(run.reason)}", WIDTH, 4)
        if run.units is not None:
            lines += wrap_words(run.units.describe(), WIDTH, 4)
        if run.result is not None:
            lines += wrap_words(f"result: {cut(run.result, _RESULT_SHOWN)}", WIDTH, 4)
        if run.error_message or run.error_type:
            error = printable(": ".join(filter(None, [run.error_type, run.error_message])))
            lines += [style(line, fg="red") for line in wrap_words(f"error: {error}", WIDTH, 4)]
        if logs is not None:
            lines += _log_lines(run, logs.get(run.id), style)
    return lines


def _log_lines(run: RunRecord, entries: list[LogLine | Dropped] | None, style: Style) -> list[str]:
    from jobhost.operations.runs import line_text

    if not entries:
        return [f"    log of run {run.id}: no lines"] if run.started_at else []
    lines = [f"    log of run {run.id} (last lines; all: jobhost logs {run.id}):"]
    for entry in entries:
        colour = _LEVEL_COLOURS.get(getattr(entry, "level", ""))
        for part in line_text(entry).split("\n"):
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


def plan_lines(plan: dict[str, Any], style: Style) -> list[str]:
    if not plan["changes"]:
        return ["no changes: the store matches the catalog"]
    added, changed, orphaned = plan["added"], plan["changed"], plan["orphaned"]
    width = min(max(len(item["job"]) for item in [*added, *changed, *orphaned]) + 2, 40)
    lines = [f"{style('+', fg='green')} {item['job']:<{width}}{item['after']}" for item in added]
    for item in changed:
        lines.append(f"{style('~', fg='yellow')} {item['job']:<{width}}{item['before']}")
        lines.append(f"  {'':<{width}}-> {item['after']}")
    for item in orphaned:
        lines.append(
            f"{style('-', fg='red')} {item['job']:<{width}}orphaned: no module declares it"
        )
    lines.append(f"{len(added)} to add, {len(changed)} to change, {len(orphaned)} to orphan")
    return lines


def catalog_lines(plan: dict[str, Any], hosts: list[HostRecord]) -> list[str]:
    lines = [f"this catalog: version {plan['catalog_version']}"]
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
    run = f" run {result.run_id}" if result.run_id else ""
    host = f" on host {result.host}" if result.host else ""
    took = (
        f" in {duration_text(result.duration_ms / 1000)}" if result.duration_ms is not None else ""
    )
    error = f": {printable(result.error)}" if result.error and result.outcome != "succeeded" else ""
    return f"{style.outcome(result.outcome)}: {result.job}{run}{host}{took}{error}"


def wrap_words(text: str, width: int, indent: int = 0) -> list[str]:
    """``text`` wrapped at spaces only: a long name or URL overflows rather than breaking."""
    margin = " " * indent
    return textwrap.wrap(
        text,
        width,
        initial_indent=margin,
        subsequent_indent=margin,
        break_long_words=False,
        break_on_hyphens=False,
    )


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


def _plural(count: int, word: str) -> str:
    return word if count == 1 else f"{word}s"


_STATE_COLOURS = {"enabled": "green", "disabled": None, "paused": "yellow", "orphaned": "red"}
_STATUS_COLOURS = {
    **dict.fromkeys(("failing", "overdue", "stuck", "orphaned", "invalid"), "red"),
    **dict.fromkeys(("behind", "waiting", "paused"), "yellow"),
    "ok": "green",
    "running": "cyan",
    "disabled": None,
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
_PIPED_NAME_WIDTH = 100
"""A piped report's widest NAME column: no screen to fit, but its lines stay bounded."""


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
    """``long``: each job's block instead of its line. ``piped`` widens the table to show names
    whole; ``hidden_ok`` is how many ok jobs the selection left out."""
    shown = report.jobs if jobs is None else jobs
    lines = _summary_lines(report, style, len(shown))
    if long:
        for job in shown:
            lines += ["", *_job_lines(job, style, width)]
    elif shown:
        if piped:
            longest = min(max(len(job.name) for job in shown), _PIPED_NAME_WIDTH)
            width = max(width, longest + _FIXED + _FLAGS_WIDTH)
        lines += ["", *_table(shown, style, width, report.generated_at)]
    if hidden_ok:
        lines += ["", f"{hidden_ok} ok {_plural(hidden_ok, 'job')} not listed (--all lists them)"]
    lines += ["", *_host_lines(report.hosts, style)]
    return lines


def _summary_lines(report: Report, style: Style, shown: int) -> list[str]:
    summary = report.summary
    total, hosts = summary.jobs, len(report.hosts)
    head = style(f"jobhost report at {short_utc(report.generated_at)}", bold=True)
    head += f": {total} {_plural(total, 'job')}, {hosts} live {_plural(hosts, 'host')}"
    if shown != total:
        head += f", {shown} shown"
    counts = summary.by_status
    parts = [
        style(f"{status} {counts[status]}", fg=_STATUS_COLOURS[status])
        if counts[status]
        else f"{status} 0"
        for status in STATUSES
        if counts[status] or status in {"ok", "failing", "overdue", "behind", "stuck"}
    ]
    lines = [head, *_join_wrapped(parts, "  ", WIDTH - 2)]
    if report.hosts:
        worst = summary.max_lag_seconds
        lag = f"worst lag {worst:.1f}s, " if worst is not None else ""
        skew = summary.max_clock_skew_seconds or 0.0
        lines.append(f"  hosts: {hosts} live, {lag}worst clock skew {skew:.3f}s")
    for group in report.groups:
        busy = style("full", fg="yellow") if group.running >= group.limit else "free"
        lines.append(
            f"  group {group.name}: limit {group.limit}, running {group.running}, "
            f"waiting {group.waiting} ({busy})"
        )
    return lines


def _join_wrapped(parts: list[str], indent: str, width: int) -> list[str]:
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
    zone = known_zone(job.effective_trigger.timezone)
    if zone is None:
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
    next_text = "paused" if job.paused else short_utc(job.next_fire)
    if not job.paused and job.next_fire is not None and effective.timezone != "UTC":
        local = short_local(job.next_fire, effective.timezone)
        next_text += f"   {local} ({effective.timezone})"
    lines += _field("next", next_text, width)
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
        text = f"running since {short_utc(last.started_at)} on {last.host_id or '-'}"
    else:
        took = duration_text(last.duration_ms / 1000 if last.duration_ms is not None else None)
        text = f"{last.outcome} {short_utc(last.started_at)} in {took} on {last.host_id or '-'}"
        error = last.error_message or last.error_type
        if error and last.outcome != "succeeded":
            text += f": {error}"
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
    # Anyone's text (reasons, errors): an escape sequence must not drive the terminal.
    wrapped = wrap_words(printable(text), width - len(head)) or [""]
    return [head + wrapped[0], *(" " * len(head) + line for line in wrapped[1:])]


# ``json.dumps(data, indent=2)`` runs in Python, about a second for the report of 10,000 jobs;
# orjson writes the same layout in a twentieth of the time, but leaves DEL and every character
# beyond ASCII unescaped, so those are escaped afterwards. (Its floats differ only with an
# exponent, which no document here holds: seconds are rounded to milliseconds.)
_UNESCAPED = re.compile("[^\x00-\x7e]")


def indented(data: Any) -> str:
    """``json.dumps(data, indent=2)``."""
    text = orjson.dumps(data, option=orjson.OPT_INDENT_2).decode()
    if text.isascii() and "\x7f" not in text:
        return text
    return _UNESCAPED.sub(_escape, text)


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code < 0x10000:
        return f"\\u{code:04x}"
    code -= 0x10000
    return f"\\u{0xD800 | (code >> 10):04x}\\u{0xDC00 | (code & 0x3FF):04x}"
