"""``jobhost history NAME``: the run ledger of one job, newest first."""

from __future__ import annotations

import json

import click

from jobhost.cli._app import cli
from jobhost.cli._context import catalog_for, open_store, settings_of
from jobhost.operations.runs import (
    LAST_LINES,
    OUTCOMES,
    entry_json,
    history_json,
    read_history,
    read_last_lines,
)

__all__ = ["history"]


@cli.command()
@click.argument("name")
@click.option(
    "--limit",
    type=click.IntRange(1, 10_000),
    default=20,
    show_default=True,
    help="How many rows to show.",
)
@click.option("--outcome", type=click.Choice(OUTCOMES), help="Only rows with this outcome.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of text.")
@click.option(
    "--logs",
    "with_logs",
    is_flag=True,
    help=f"Under each run, the last {LAST_LINES} lines it wrote (all: jobhost logs RUN_ID).",
)
@click.pass_context
def history(
    ctx: click.Context,
    name: str,
    *,
    limit: int,
    outcome: str | None,
    as_json: bool,
    with_logs: bool,
) -> None:
    """Show job NAME's ledger: every attempt, and every occurrence missed or skipped.

    Each row: occurrence, attempt, source, host, start, duration, outcome, error (or the
    reason an occurrence did not run) and trace id; for a run that fanned out over units, their
    counts. JSON: {"job": NAME, "runs": [{"run_id", "occurrence", "attempt", "source", "host",
    "requested_by", "queued_at", "started_at", "finished_at", "duration_ms", "outcome",
    "reason", "error_type", "error", "trace_id", "units", "backfill_id", "cancel", "result"}]}
    ("result": the executor's Success value, at most 4 kB of JSON); with --logs each run also has
    "logs": its last lines, as `jobhost logs --json` writes them.

    Exit status: 0; 2 for an unknown job or a bad option.
    """
    from jobhost.operations.jobs import require_known_job
    from jobhost.operations.render import history_lines, stdout_style

    settings = settings_of(ctx)
    store = open_store(settings)
    try:
        require_known_job(catalog_for(settings, store, name), store, name)
        rows = read_history(store, name, limit=limit, outcome=outcome)
        logs = read_last_lines(store, [r.id for r in rows], count=LAST_LINES) if with_logs else None
    finally:
        store.dispose()
    if as_json:
        document = history_json(name, rows)
        if logs is not None:
            for run in document["runs"]:
                run["logs"] = [entry_json(e) for e in logs.get(run["run_id"], [])]
        click.echo(json.dumps(document, indent=2))
    else:
        click.echo("\n".join(history_lines(name, rows, stdout_style(), logs)))
