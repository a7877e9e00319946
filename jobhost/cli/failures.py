"""``jobhost failures``: failed, timed-out, abandoned and stuck runs of every job, newest first."""

from __future__ import annotations

import getpass
import json
from typing import NoReturn

import click

from jobhost.cli._app import EXIT_INVALID, EXIT_USAGE, cli, fail
from jobhost.cli._context import opened_store, settings_of
from jobhost.cli._options import (
    change_reason,
    json_option,
    limit_option,
    since_instant,
    typed_run_id,
)
from jobhost.operations.jobs import ActionRefused, require_known_job

__all__ = ["failures"]


@cli.command()
@click.option(
    "--since",
    metavar="DURATION_OR_TIME",
    help="Only runs that finished since then: 2h, 7d, a date (UTC) or 2026-11-28T06:00:00Z.",
)
@click.option("--job", metavar="NAME", help="Only this job's runs.")
@click.option(
    "--grep",
    "text",
    metavar="TEXT",
    help="Only runs whose error type or message contains TEXT (any case).",
)
@limit_option("How many rows to show.", default=50, most=1000)
@click.option(
    "--all",
    "include_resolved",
    is_flag=True,
    help="Also failures resolved by a later success or an acknowledgement.",
)
@click.option(
    "--ack",
    "ack_run",
    metavar="RUN_ID",
    help="Acknowledge this failed run (resolve it without a rerun); needs --reason.",
)
@change_reason(None, "Why, for --ack (in the change log).", required=False)
@click.option(
    "--wide", is_flag=True, help="Every field whole (run ids, names, errors), past 80 columns."
)
@json_option()
@click.pass_context
def failures(
    ctx: click.Context,
    *,
    since: str | None,
    job: str | None,
    text: str | None,
    limit: int,
    include_resolved: bool,
    ack_run: str | None,
    reason: str | None,
    wide: bool,
    as_json: bool,
) -> None:
    """Show open failures of every job: failed, timed-out, abandoned and stuck runs, newest
    first.

    A failure is open until its work succeeds later (a retry, or a backfill of its occurrence:
    the same job and occurrence; for a manual run, a retry of it) or an operator acknowledges
    it (--ack RUN_ID --reason TEXT, logged in `jobhost changes`); --all shows the resolved ones
    too, with who resolved them. Repeats of one job and error are one line, with their count
    (x 30). Stuck runs (still running, with an expired lease or code that ignored its
    cancellation) come first. Each row, within 80 columns: finished time, the run id's first 8
    characters, outcome, job, attempt and the job's current failure streak (its failed
    attempts in a row, counted up to 100) when past 1, error type and the first line of the
    message, cut at the line's end; --wide: every field whole. Reads only the store (--ack
    writes the change log; it takes a run id's first 8 characters or more). JSON:
    {"failures": [{"job", "run_id", "occurrence", "started_at", "finished_at", "outcome",
    "attempt", "source", "host", "error_type", "error", "streak", "resolved"}], "groups":
    [{"job", "outcome", "error_type", "error", "count", "run_ids", "resolved"}],
    "next_cursor", "searched_to", "streak_limit", "generated_at"}, the shape of
    GET /api/v1/failures; with --ack: {"acknowledged", "job", "by", "reason", "at"}.

    Exit status: 0 (also when nothing failed; --ack: acknowledged); 2 for an unknown --job or
    a bad option; 3 --ack refused (an unknown run, one that did not fail, one resolved
    already).
    """
    if ack_run is not None:
        _acknowledge(ctx, ack_run, reason, as_json=as_json)
        return
    if reason is not None:
        _usage("--reason goes with --ack RUN_ID")
    from jobhost.operations.failures import (
        SEARCH_LIMIT,
        FailureQuery,
        failure_line,
        failures_json,
        group_failures,
        read_failures,
    )
    from jobhost.operations.render import WIDTH, wrap_words

    if text is not None and not 0 < len(text.strip()) <= SEARCH_LIMIT:
        _usage(f"--grep: give 1 to {SEARCH_LIMIT} characters to search for")
    with opened_store(settings_of(ctx)) as store:
        if job is not None:
            require_known_job(None, store, job)
        query = FailureQuery(
            since=since_instant(since, _usage),
            job=job,
            text=text.strip() if text else None,
            limit=limit,
            include_resolved=include_resolved,
        )
        found = read_failures(store, query)
    if as_json:
        click.echo(json.dumps(failures_json(found), indent=2))
        return
    notes = []
    if not found.failures:
        left = "" if include_resolved else " left open (--all shows resolved ones)"
        notes.append(
            "no failed, timed-out, abandoned or stuck run" + _scope(since, job, text) + left
        )
    for group in group_failures(found.failures):
        click.echo(failure_line(group.newest, len(group.rows), wide=wide))
    if found.searched_to is not None:
        notes.append(
            f"(searched runs that finished back to {found.searched_to:%Y-%m-%d %H:%M:%SZ}; "
            "narrow with --since or --job to search further back)"
        )
    elif found.next_cursor is not None:
        notes.append(f"(the newest {limit} shown; more with --limit or --since)")
    for note in notes:
        click.echo(note if wide else "\n".join(wrap_words(note, WIDTH)))


def _acknowledge(ctx: click.Context, run_id: str, reason: str | None, *, as_json: bool) -> None:
    from jobhost.operations.failures import acknowledge_failure

    why = " ".join((reason or "").split())
    if not why or len(why) > 500:
        _usage("--ack needs --reason TEXT (1 to 500 characters): why it needs no rerun")
    with opened_store(settings_of(ctx), write=True) as store:
        run_id = typed_run_id(store, run_id)
        try:
            done = acknowledge_failure(store, run_id, actor=getpass.getuser(), reason=why)
        except ActionRefused as refused:
            fail(f"refused: {refused}", EXIT_INVALID)
    shown = {
        "acknowledged": done.run.id,
        "job": done.run.job_name,
        "by": getpass.getuser(),
        "reason": why,
        "at": done.at.strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    if as_json:
        click.echo(json.dumps(shown, indent=2))
    else:
        click.echo(
            f"acknowledged failure {done.run.id} of {done.run.job_name} ({done.run.outcome}): {why}"
        )


def _scope(since: str | None, job: str | None, text: str | None) -> str:
    parts = [f"of job {job}" if job else "", f"since {since}" if since else ""]
    parts.append(f"with {text!r} in its error" if text else "")
    return "".join(f" {part}" for part in parts if part)


def _usage(message: str) -> NoReturn:
    fail(f"jobhost failures: {message}", EXIT_USAGE)
