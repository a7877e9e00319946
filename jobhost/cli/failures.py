"""``jobhost failures``: failed, timed-out, abandoned and stuck runs of every job, newest first."""

from __future__ import annotations

import json

import click

from jobhost.cli._app import EXIT_USAGE, cli
from jobhost.cli._context import open_store, settings_of

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
@click.option(
    "--limit",
    type=click.IntRange(1, 1000),
    default=50,
    show_default=True,
    help="How many rows to show.",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of text.")
@click.pass_context
def failures(
    ctx: click.Context,
    *,
    since: str | None,
    job: str | None,
    text: str | None,
    limit: int,
    as_json: bool,
) -> None:
    """Show failed, timed-out, abandoned and stuck runs of every job, newest first.

    Stuck runs (still running, with an expired lease or code that ignored its cancellation)
    come first. Each row: finished time, outcome, job, attempt, the job's current failure
    streak (its failed attempts in a row, counted up to 100), run id, error type and the first
    line of the message. Reads only the store. JSON: {"failures": [{"job", "run_id",
    "occurrence", "started_at", "finished_at", "outcome", "attempt", "source", "host",
    "error_type", "error", "streak"}], "next_cursor", "searched_to", "streak_limit",
    "generated_at"}, the shape of GET /api/v1/failures.

    Exit status: 0 (also when nothing failed); 2 for an unknown --job or a bad option.
    """
    from jobhost.operations.failures import (
        SEARCH_LIMIT,
        BadFailureQuery,
        FailureQuery,
        failure_line,
        failures_json,
        parse_since,
        read_failures,
        require_stored_job,
    )
    from jobhost.store import SystemClock

    if text is not None and not 0 < len(text.strip()) <= SEARCH_LIMIT:
        _usage(f"--grep: give 1 to {SEARCH_LIMIT} characters to search for")
    engine = open_store(settings_of(ctx))
    try:
        if job is not None:
            require_stored_job(engine, job)
        try:
            start = parse_since(since, SystemClock()()) if since is not None else None
        except BadFailureQuery as error:
            _usage(f"--{error.field}: {since!r} {error.detail}")
        query = FailureQuery(since=start, job=job, text=text.strip() if text else None, limit=limit)
        found = read_failures(engine, query)
    finally:
        engine.dispose()
    if as_json:
        click.echo(json.dumps(failures_json(found), indent=2))
        return
    if not found.failures:
        click.echo("no failed, timed-out, abandoned or stuck run" + _scope(since, job, text))
    for row in found.failures:
        click.echo(failure_line(row))
    if found.searched_to is not None:
        click.echo(
            f"(searched runs that finished back to {found.searched_to:%Y-%m-%d %H:%M:%SZ}; "
            "narrow with --since or --job to search further back)"
        )
    elif found.next_cursor is not None:
        click.echo(f"(the newest {limit} shown; more with --limit or --since)")


def _scope(since: str | None, job: str | None, text: str | None) -> str:
    parts = [f"of job {job}" if job else "", f"since {since}" if since else ""]
    parts.append(f"with {text!r} in its error" if text else "")
    shown = " ".join(part for part in parts if part)
    return f" {shown}" if shown else ""


def _usage(message: str) -> None:
    click.echo(f"jobhost failures: {message}", err=True)
    raise SystemExit(EXIT_USAGE)
