"""Failures across jobs: stuck runs (first page only), then failed, timed-out and abandoned runs,
newest first, each with its job's failure streak; acknowledging one, retrying every open one.

A page continues from a cursor (the last row's finished time and run id): the same cost at any
depth.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from jobhost.operations.changes import printable
from jobhost.operations.jobs import ActionRefused
from jobhost.operations.render import ELLIPSIS, WIDTH, middle_cut
from jobhost.operations.runs import retry_run
from jobhost.operations.timefmt import iso_utc, short_utc
from jobhost.records import (
    FAILED,
    STREAK_LIMIT,
    Acknowledged,
    FailureFilter,
    FailureKey,
    Resolution,
    RunRecord,
    work_key,
)
from jobhost.store import Store
from jobhost.store.actions import Ack
from jobhost.triggers.instants import SAFE_RANGE_TEXT, safe_utc

__all__ = [
    "CURSOR_PATTERN",
    "SEARCH_LIMIT",
    "BadFailureQuery",
    "Failure",
    "FailureGroup",
    "FailureList",
    "FailureQuery",
    "acknowledge_failure",
    "decode_cursor",
    "encode_cursor",
    "failure_line",
    "failures_json",
    "group_failures",
    "one_per_work",
    "open_failure_lines",
    "parse_since",
    "read_failures",
    "retry_failures",
]

SEARCH_LIMIT = 200
"""The longest text searched for, in characters."""
_RUN_ID_SHOWN = 8
"""How much of a run id a line of ``jobhost failures`` shows: the shortest prefix commands take."""
# Within 80 columns a job's name is cut (keeping its start and end) to leave the error this
# much room, but to no fewer characters than _NAME_SHOWN.
_ERROR_SHOWN = 12
_NAME_SHOWN = 16

# The sign an operator reads as "repeated N times" (x would read as part of a job name).
_TIMES = "\N{MULTIPLICATION SIGN}"
_RUN_ID_TEXT = "[A-Za-z0-9_.:-]{1,64}"
CURSOR_PATTERN = f"start|[0-9]{{1,18}}~{_RUN_ID_TEXT}"
"""Every cursor: ``start``, or microseconds and a run id (see :func:`encode_cursor`)."""
_CURSOR = re.compile(CURSOR_PATTERN)
_ORIGIN = datetime(1, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)
_DATE_ONLY = re.compile(r"\d{4}-\d{2}-\d{2}")
_DURATION_EXAMPLES = "e.g. 2h, 7d, 30m, 2026-11-28 or 2026-11-28T06:00:00Z"


class BadFailureQuery(ValueError):
    """A filter of the failures list that cannot be read; the message names the field."""

    def __init__(self, field: str, detail: str) -> None:
        super().__init__(f"{field}: {detail}")
        self.field = field
        self.detail = detail


@dataclass(frozen=True)
class FailureQuery:
    since: datetime | None = None
    job: str | None = None
    text: str | None = None
    limit: int = 50
    cursor: FailureKey | None = None
    include_resolved: bool = False
    """Also failures a later success or an acknowledgement resolved (``--all``)."""
    jobs: tuple[str, ...] | None = None
    """Only these jobs' failures (a module's), beside ``job``."""


@dataclass(frozen=True)
class Failure:
    run: RunRecord
    outcome: str
    """The run's outcome, or ``stuck`` for a running run that is stuck."""
    streak: int
    """The job's failed attempts in a row now (up to :data:`STREAK_LIMIT`)."""
    resolution: Resolution | None = None
    """How it was resolved; None while it is open."""

    @property
    def first_line(self) -> str:
        message = (self.run.error_message or "").strip()
        return message.splitlines()[0] if message else ""


@dataclass(frozen=True)
class FailureList:
    failures: list[Failure]
    next_cursor: str | None
    searched_to: datetime | None
    """A search stopped at runs that finished before this time (more may match later)."""
    generated_at: datetime


def read_failures(store: Store, query: FailureQuery) -> FailureList:
    now, found = store.failure_rows(
        limit=query.limit,
        where=_filter(query),
        after=query.cursor,
        open_only=not query.include_resolved,
    )
    page, streaks = found.page, found.streaks
    rows = [Failure(run, "stuck", streaks[run.job_name]) for run in found.stuck]
    rows += [
        Failure(run, run.outcome, streaks[run.job_name], found.resolved.get(run.id))
        for run in (page.runs if page is not None else [])
    ]
    # No page: only stuck runs fit, and the finished failures start on the next page.
    next_key = page.next_key if page is not None else _START
    searched_to = page.searched_to if page is not None else None
    return FailureList(
        rows,
        encode_cursor(next_key) if next_key is not None else None,
        searched_to.finished_at if searched_to is not None else None,
        now,
    )


def _filter(query: FailureQuery) -> FailureFilter:
    jobs = query.jobs
    if query.job is not None:
        jobs = (query.job,) if jobs is None else tuple(j for j in jobs if j == query.job)
    return FailureFilter(since=query.since, jobs=jobs, text=query.text)


def failures_json(found: FailureList) -> dict[str, Any]:
    return {
        "failures": [_failure_json(row) for row in found.failures],
        "groups": [
            {
                "job": group.newest.run.job_name,
                "outcome": group.newest.outcome,
                "error_type": group.newest.run.error_type,
                "error": group.newest.first_line or None,
                "count": len(group.rows),
                "run_ids": [row.run.id for row in group.rows],
                "resolved": group.newest.resolution is not None,
            }
            for group in group_failures(found.failures)
        ],
        "next_cursor": found.next_cursor,
        "searched_to": iso_utc(found.searched_to),
        "streak_limit": STREAK_LIMIT,
        "generated_at": iso_utc(found.generated_at),
    }


@dataclass(frozen=True)
class FailureGroup:
    """Failures of one page with the same job, outcome, error and state: the newest first."""

    rows: list[Failure]

    @property
    def newest(self) -> Failure:
        return self.rows[0]


def group_failures(rows: Sequence[Failure]) -> list[FailureGroup]:
    """``rows`` grouped by job, outcome, error type, first line and resolution, each group
    where its newest row was (so one noisy job is one line, not a screen)."""
    groups: dict[tuple[object, ...], FailureGroup] = {}
    for row in rows:
        key = (
            row.run.job_name,
            row.outcome,
            row.run.error_type,
            row.first_line,
            (row.resolution.how, row.resolution.by) if row.resolution is not None else None,
        )
        groups.setdefault(key, FailureGroup([])).rows.append(row)
    return list(groups.values())


def failure_line(row: Failure, repeats: int = 1, *, wide: bool = False) -> str:
    """One line of a failure (``repeats`` of it, for a group): within ``WIDTH`` columns, unless
    ``wide`` (every field whole)."""
    run = row.run
    when = (run.finished_at or run.started_at or run.queued_at).astimezone(UTC)
    streak = f"{STREAK_LIMIT}+" if row.streak >= STREAK_LIMIT else str(row.streak)
    error = run.error_type or ""
    if row.first_line:
        error = printable(f"{error}: {row.first_line}" if error else row.first_line)
    times = f" {_TIMES} {repeats}" if repeats > 1 else ""
    if wide:
        return (
            f"{when:%Y-%m-%d %H:%M:%SZ}  {row.outcome:<9}  {run.job_name}{times}  "
            f"attempt {run.attempt}  streak {streak}{_resolved(row.resolution)}  run {run.id}  "
            f"{error}".rstrip()
        )
    counts = f"  attempt {run.attempt}" if run.attempt > 1 else ""
    counts += f"  streak {streak}" if row.streak > 1 else ""
    head = f"{when:%m-%d %H:%MZ}  {run.id[:_RUN_ID_SHOWN]}  {row.outcome:<9}  "
    tail = f"{times}{counts}{_resolved(row.resolution)}"
    # The name yields to the error up to _ERROR_SHOWN characters of it, and no further.
    room = WIDTH - len(head) - len(tail) - min(len(error) + 2, _ERROR_SHOWN)
    line = f"{head}{middle_cut(run.job_name, max(room, _NAME_SHOWN))}{tail}  {error}".rstrip()
    return line if len(line) <= WIDTH else line[: WIDTH - len(ELLIPSIS)] + ELLIPSIS


def _resolved(resolution: Resolution | None) -> str:
    if resolution is None:
        return ""
    how = "retried" if resolution.how == "succeeded" else "acknowledged"
    return f"  {how} by {resolution.by or 'unknown'}"


def parse_since(text: str, now: datetime) -> datetime:
    """``2h``/``7d`` back from ``now``, a date (midnight UTC) or an ISO 8601 time with a zone."""
    from jobhost_contracts.durations import parse_duration

    value = text.strip()
    if not value or len(value) > 64:
        raise BadFailureQuery("since", f"must be a duration or a time, {_DURATION_EXAMPLES}")
    if value[0].isdigit() and not _DATE_ONLY.match(value):
        try:
            back = parse_duration(value)
        except ValueError:
            pass  # not a duration: read as a time
        else:
            if back.total_seconds() <= 0:
                raise BadFailureQuery("since", "must be a positive duration, e.g. 2h or 7d")
            try:
                start = safe_utc(now - back)
            except OverflowError:
                start = None
            if start is None:
                raise BadFailureQuery("since", "is too long a duration")
            return start
    try:
        instant = datetime.fromisoformat(value)
    except ValueError:
        raise BadFailureQuery(
            "since", f"is neither a duration nor a time, {_DURATION_EXAMPLES}"
        ) from None
    if instant.tzinfo is None or instant.utcoffset() is None:
        if not _DATE_ONLY.fullmatch(value):
            raise BadFailureQuery("since", "a time needs a zone, e.g. Z or +01:00")
        instant = instant.replace(tzinfo=UTC)
    start = safe_utc(instant)
    if start is None:
        raise BadFailureQuery("since", f"must be a time {SAFE_RANGE_TEXT}")
    return start


def encode_cursor(key: FailureKey) -> str:
    """``start``, or the key's microseconds since 0001-01-01 UTC and its run id, joined by
    ``~``."""
    if key is _START:
        return "start"
    micros = (key.finished_at - _ORIGIN) // _MICROSECOND
    return f"{micros}~{key.run_id}"


def decode_cursor(text: str) -> FailureKey:
    """The key a cursor names; :class:`BadFailureQuery` for a text that is no cursor."""
    if text == "start":
        return _START
    if not _CURSOR.fullmatch(text):
        raise BadFailureQuery("cursor", "is not a cursor this list gave; start again without it")
    micros, run_id = text.split("~", 1)
    try:
        finished = _ORIGIN + int(micros) * _MICROSECOND
    except OverflowError:
        return FailureKey(_START.finished_at, run_id)
    return FailureKey(min(finished, _START.finished_at), run_id)


# The top of the finished failures: the page after a first page that only stuck runs filled.
# An id no run has sorts after every real one, so every run of the newest instant is included.
_START = FailureKey(datetime.max.replace(tzinfo=UTC), "~")


def _failure_json(row: Failure) -> dict[str, Any]:
    run, resolved = row.run, row.resolution
    return {
        "job": run.job_name,
        "run_id": run.id,
        "occurrence": iso_utc(run.occurrence),
        "started_at": iso_utc(run.started_at),
        "finished_at": iso_utc(run.finished_at),
        "outcome": row.outcome,
        "attempt": run.attempt,
        "source": run.source,
        "host": run.host_id,
        "error_type": run.error_type,
        "error": row.first_line or None,
        "streak": row.streak,
        "resolved": (
            {**asdict(resolved), "at": iso_utc(resolved.at)} if resolved is not None else None
        ),
    }


_BULK_LIMIT = 1000
"""The most failures one bulk retry queues; more are left for the next."""

_SCAN = 2 * _BULK_LIMIT
"""Open failures a bulk retry reads: one per piece of work is retried."""


def acknowledge_failure(store: Store, run_id: str, *, actor: str, reason: str) -> Acknowledged:
    """Resolve failed run ``run_id`` without a rerun. Refused for an unknown run, one that did
    not fail, and one already resolved."""
    ack = Ack(run_id, lambda run, resolved: _check_ack(run_id, run, resolved))
    return store.act(ack, actor=actor, reason=reason, clock=store.clock)


def retry_failures(
    store: Store,
    query: FailureQuery,
    *,
    actor: str,
    reason: str,
) -> dict[str, Any]:
    """Queue one retry of every open failure ``query`` matches, each logged, at most
    :data:`_BULK_LIMIT` (``more``: the rest were left); those refused with why, and the live
    hosts (0: the retries wait for one), as ``retry --failed --json`` shows them. A failure
    is retried once for its piece of work (its newest failed attempt); a stuck run is not."""
    page = store.failure_rows(limit=_SCAN, where=_filter(query), after=_START)[1].page
    assert page is not None, "no stuck run fills a page that starts after them"
    found = one_per_work(page.runs)
    more = len(found) > _BULK_LIMIT or page.next_key is not None
    queued: list[dict[str, Any]] = []
    refused: list[dict[str, Any]] = []
    for run in found[:_BULK_LIMIT]:
        try:
            done = retry_run(store, run.id, actor=actor, reason=reason)
        except ActionRefused as error:
            refused.append({"run_id": run.id, "job": run.job_name, "reason": str(error)})
            continue
        queued.append(
            dict(run_id=done.run_id, retry_of=run.id, job=run.job_name, attempt=done.attempt)
        )
    alive = len(store.health_rows(hosts="alive")[1].hosts)
    return {"queued": queued, "refused": refused, "more": more, "hosts_alive": alive}


def one_per_work(runs: Iterable[RunRecord]) -> list[RunRecord]:
    """The first (the newest, in a newest-first list) run of each piece of work."""
    first: dict[tuple[str, str], RunRecord] = {}
    for run in runs:
        first.setdefault((run.job_name, work_key(run)), run)
    return list(first.values())


def _check_ack(run_id: str, run: RunRecord | None, resolved: Resolution | None) -> RunRecord:
    if run is None:
        raise ActionRefused(
            f"no run {run_id!r}: `jobhost failures` lists failures with their run ids",
            unknown=True,
        )
    if run.outcome not in FAILED:
        raise ActionRefused(
            f"run {run.id} of {run.job_name} is {run.outcome}, not a failure: only a failed, "
            "timed_out or abandoned run is acknowledged"
        )
    if resolved is not None:
        how = f"run {resolved.run_id} succeeded" if resolved.how == "succeeded" else "acknowledged"
        raise ActionRefused(
            f"run {run.id} of {run.job_name} is resolved already: {how}, by "
            f"{resolved.by or 'unknown'}"
        )
    return run


def open_failure_lines(store: Store, jobs: list[str], limit: int) -> list[tuple[str, str]]:
    """(job, line) for each of ``jobs`` with open failures: how many (of the newest ``limit``)
    and its newest."""
    # From the top of the finished failures: stuck runs are not failures of a last run.
    _, rows = store.failure_rows(limit=limit, where=FailureFilter(jobs=tuple(jobs)), after=_START)
    found = rows.page.runs if rows.page is not None else []  # failed, timed-out, abandoned
    more = "+" if len(found) >= limit else ""
    by_job: dict[str, list[RunRecord]] = {}
    for run in found:
        by_job.setdefault(run.job_name, []).append(run)
    lines = []
    # By job, as the other checks list jobs; the read gives each job's newest first.
    for job, runs in sorted(by_job.items()):
        newest = runs[0]
        first = (newest.error_message or "").strip().splitlines()
        error = f": {first[0]}" if first else ""
        lines.append(
            (
                job,
                f"{job} has {len(runs)}{more} open failure(s), the newest run {newest.id} "
                f"{newest.outcome} at {short_utc(newest.finished_at)}{error} (`jobhost "
                f"failures --job {job}`; retry or acknowledge them)",
            )
        )
    return lines
