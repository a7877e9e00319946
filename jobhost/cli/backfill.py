"""``jobhost backfill NAME --from TIME --to TIME``: the past occurrences a replay takes."""

from __future__ import annotations

import json
from typing import NoReturn

import click

from jobhost.catalog.model import suggest
from jobhost.cli._app import EXIT_INVALID, EXIT_OK, cli
from jobhost.cli._context import load_catalog, open_store, require_job, settings_of
from jobhost.errors import UnknownJobError

__all__ = ["backfill"]


@cli.command()
@click.argument("name")
@click.option("--from", "start", required=True, metavar="TIME", help="First instant (included).")
@click.option("--to", "end", required=True, metavar="TIME", help="Last instant (excluded).")
@click.option(
    "--mode",
    default="missing",
    show_default=True,
    metavar="missing|failed|all",
    help="Which occurrences of the range to take.",
)
@click.option(
    "--reason", metavar="TEXT", help="Why the occurrences are replayed; --dry-run ignores it."
)
@click.option("--dry-run", is_flag=True, help="List the selected occurrences; run nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print the selection as one JSON object.")
@click.pass_context
def backfill(
    ctx: click.Context,
    *,
    name: str,
    start: str,
    end: str,
    mode: str,
    reason: str | None,
    dry_run: bool,
    as_json: bool,
) -> None:
    """Select the past occurrences of job NAME with FROM ≤ occurrence < TO.

    TIME is ISO 8601 with a zone (2026-11-28T00:00:00Z, 2026-11-28T00:00+01:00) or a date
    (2026-11-28: midnight in the job's zone). The occurrences are those the job's effective
    trigger gave, with its zone and daylight-saving policy. --mode missing (default): no
    successful run (never run, missed, skipped, or a last attempt that failed, timed out, was
    abandoned or cancelled); failed: a last attempt that failed, timed out or was abandoned;
    all: every occurrence.

    --dry-run prints one UTC ISO instant a line (JSON: {"job", "mode", "from", "to",
    "occurrences"}) and runs nothing; it is required in this version.

    Exit status: 0 listed (or nothing to do); 3 bad input: unknown job, an unreadable TIME,
    TO ≤ FROM, a range reaching the future, an unknown mode, more occurrences than
    backfill_limit, or no --dry-run.
    """
    from jobhost.operations.backfill import BackfillInputError, plan_backfill
    from jobhost.operations.timefmt import iso_utc
    from jobhost.store import SystemClock, store_now

    settings = settings_of(ctx)
    catalog = load_catalog(settings)
    if name not in catalog.jobs and not catalog.problems_for(name):
        _refuse(str(UnknownJobError(name, suggest(name, catalog.jobs))))
    spec = require_job(catalog, name, "be backfilled")
    if not dry_run:
        _refuse(
            f"job {name}: jobhost backfill lists what a replay would take; add --dry-run "
            "(to run one occurrence now, use jobhost trigger)"
        )
    engine = open_store(settings)
    try:
        now = store_now(engine, SystemClock())
        plan = plan_backfill(
            spec,
            engine,
            start=start,
            end=end,
            mode=mode,
            limit=settings.backfill_limit,
            now=now,
        )
    except BackfillInputError as error:
        _refuse(str(error))
    finally:
        engine.dispose()
    if as_json:
        click.echo(json.dumps(plan.to_json(), indent=2))
    else:
        for occurrence in plan.occurrences:
            click.echo(iso_utc(occurrence))
    if plan.occurrences:
        click.echo(
            f"job {name}, mode {plan.mode}: {len(plan.occurrences):,} of {plan.in_range:,} "
            f"occurrence(s) from {iso_utc(plan.start)} to {iso_utc(plan.end)} selected",
            err=True,
        )
    else:
        click.echo(
            f"job {name}, mode {plan.mode}: nothing to do ({plan.in_range:,} occurrence(s) from "
            f"{iso_utc(plan.start)} to {iso_utc(plan.end)}, none selected)",
            err=True,
        )
    raise SystemExit(EXIT_OK)


def _refuse(message: str) -> NoReturn:
    click.echo(f"error: {message}", err=True)
    raise SystemExit(EXIT_INVALID)
