"""``jobhost backfill NAME --from TIME --to TIME``: replay a past range, once per occurrence."""

from __future__ import annotations

import getpass
import json
from typing import TYPE_CHECKING, NoReturn

import click

from jobhost.catalog.model import suggest
from jobhost.cli._app import EXIT_FAILED, EXIT_INVALID, EXIT_OK, cli
from jobhost.cli._backfills import cancel_one, list_all, show_one
from jobhost.cli._context import (
    load_catalog,
    migrate_store,
    open_store,
    require_job,
    settings_of,
)
from jobhost.cli._reasons import reason_value
from jobhost.errors import UnknownJobError

if TYPE_CHECKING:
    from jobhost.catalog import Catalog, JobSpec
    from jobhost.config import Settings
    from jobhost.operations.backfills import BackfillPlan

__all__ = ["backfill"]


@cli.command()
@click.argument("name", required=False)
@click.option("--from", "start", metavar="TIME", help="First instant (included).")
@click.option("--to", "end", metavar="TIME", help="Last instant (excluded).")
@click.option(
    "--mode",
    default="missing",
    show_default=True,
    metavar="missing|failed|all",
    help="Which occurrences of the range to take.",
)
@click.option(
    "--reason",
    metavar="TEXT",
    callback=reason_value,
    help="Why the occurrences are replayed; recorded.",
)
@click.option("--dry-run", is_flag=True, help="List the selected occurrences; run nothing.")
@click.option(
    "--concurrency",
    type=click.IntRange(min=1, max=1000),
    default=1,
    show_default=True,
    metavar="N",
    help="At most N of the backfill's runs at once (in free slots only).",
)
@click.option("--no-wait", is_flag=True, help="Record the backfill, print its id and exit.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as one JSON object.")
@click.option("--list", "list_them", is_flag=True, help="List the backfills in the store.")
@click.option("--show", "show_id", metavar="ID", help="Show one backfill and its occurrences.")
@click.option(
    "--cancel", "cancel_id", metavar="ID", help="Stop a backfill after its runs in flight."
)
@click.pass_context
def backfill(
    ctx: click.Context,
    *,
    name: str | None,
    start: str | None,
    end: str | None,
    mode: str,
    reason: str | None,
    dry_run: bool,
    concurrency: int,
    no_wait: bool,
    as_json: bool,
    list_them: bool,
    show_id: str | None,
    cancel_id: str | None,
) -> None:
    """Run the past occurrences of job NAME, FROM ≤ occurrence < TO, once each.

    TIME is ISO 8601 with a zone (2026-11-28T00:00:00Z, 2026-11-28T00:00+01:00) or a date
    (2026-11-28: midnight in the job's zone). The occurrences are those the job's effective
    trigger gave, with its zone and daylight-saving policy. --mode missing (default): no
    successful run (never run, missed, skipped, or a last attempt that failed, timed out, was
    abandoned or cancelled); failed: a last attempt that failed, timed out or was abandoned;
    all: every occurrence.

    Each run gets its past occurrence (context.occurrence) and source backfill, through the
    same claim, envelope, retries and overlap policy as any run, after scheduled work and in
    free slots only. With live hosts the backfill is recorded and the hosts run it; without,
    this process runs it. The command follows it to its end (--no-wait: prints the id and
    exits; Ctrl-C detaches, it does not cancel). Pausing the job pauses its backfill.

    --dry-run prints one UTC ISO instant a line (JSON: {"job", "mode", "from", "to",
    "occurrences"}) and runs nothing. --list, --show ID and --cancel ID read or stop the
    backfills in the store.

    Exit status: 0 every selected occurrence succeeded (or nothing to do, a dry run, --no-wait,
    a detach); 1 any failed (or the backfill was cancelled first); 3 bad input: unknown job,
    an unreadable TIME, TO ≤ FROM, a range reaching the future, an unknown mode, more
    occurrences than backfill_limit, an unknown backfill id.
    """
    settings = settings_of(ctx)
    picked = [
        o for o, v in (("--list", list_them), ("--show", show_id), ("--cancel", cancel_id)) if v
    ]
    if len(picked) > 1:
        _refuse(f"give one of {', '.join(picked)}, not several")
    if picked:
        if name is not None or start is not None or end is not None:
            _refuse(f"{picked[0]} takes no job name, --from or --to")
        store = open_store(settings, write=cancel_id is not None)
        try:
            if list_them:
                list_all(store, as_json=as_json)
            elif show_id is not None:
                show_one(store, show_id, as_json=as_json)
            elif cancel_id is not None:
                cancel_one(store, cancel_id, actor=getpass.getuser(), reason=reason)
        finally:
            store.dispose()
        raise SystemExit(EXIT_OK)
    if name is None or start is None or end is None:
        _refuse(
            "give a job name with --from and --to (e.g. jobhost backfill billing.nightly "
            "--from 2026-11-28 --to 2026-11-30), or --list, --show ID or --cancel ID"
        )
    catalog = load_catalog(settings)
    if name not in catalog.jobs and not catalog.problems_for(name):
        _refuse(str(UnknownJobError(name, suggest(name, catalog.jobs))))
    spec = require_job(catalog, name, "be backfilled")
    plan = _plan(settings, spec, start, end, mode)
    if dry_run:
        _print_plan(plan, as_json)
        raise SystemExit(EXIT_OK)
    if not plan.occurrences:
        _print_plan(plan, as_json)
        raise SystemExit(EXIT_OK)
    raise SystemExit(
        _run(
            settings,
            catalog,
            spec,
            plan,
            concurrency=concurrency,
            reason=reason,
            no_wait=no_wait,
            as_json=as_json,
        )
    )


def _plan(settings: Settings, spec: JobSpec, start: str, end: str, mode: str) -> BackfillPlan:
    from jobhost.operations.backfills import BackfillInputError, plan_backfill

    store = open_store(settings)
    try:
        now = store.now()
        return plan_backfill(
            spec, store, start=start, end=end, mode=mode, limit=settings.backfill_limit, now=now
        )
    except BackfillInputError as error:
        _refuse(str(error))
    finally:
        store.dispose()


def _run(
    settings: Settings,
    catalog: Catalog,
    spec: JobSpec,
    plan: BackfillPlan,
    *,
    concurrency: int,
    reason: str | None,
    no_wait: bool,
    as_json: bool,
) -> int:
    from jobhost.cli._one_shot import backfill_here
    from jobhost.clock import SystemClock
    from jobhost.operations.backfills import ensure_scheduled, see_through, start_backfill
    from jobhost.operations.timefmt import iso_utc

    if settings.auto_migrate:
        migrate_store(settings)  # it may run the job itself, as `jobhost run` would
    store = open_store(settings, write=True)
    clock = SystemClock(settings.clock_offset)
    try:
        ensure_scheduled(store, spec, clock)
        hosts = bool(store.live_hosts()[1])
        backfill_id = start_backfill(
            store,
            spec.name,
            start=plan.start,
            end=plan.end,
            mode=plan.mode,
            occurrences=plan.occurrences,
            concurrency=concurrency,
            actor=getpass.getuser(),
            reason=reason,
        )
        click.echo(
            f"backfill {backfill_id}: job {spec.name}, mode {plan.mode}, "
            f"{len(plan.occurrences):,} of {plan.in_range:,} occurrence(s) from "
            f"{iso_utc(plan.start)} to {iso_utc(plan.end)}, concurrency {concurrency}",
            err=True,
        )
        if no_wait:
            if not hosts:
                click.echo("no live host: the backfill runs when a host starts", err=True)
            click.echo(json.dumps({"id": backfill_id}) if as_json else backfill_id)
            return EXIT_OK
        if not hosts:
            click.echo(f"no live host: running backfill {backfill_id} in this process", err=True)
        followed = see_through(
            store,
            backfill_id,
            hosts=hosts,
            run_here=backfill_here(settings, catalog, store, _progress),
            progress=_progress,
        )
    finally:
        store.dispose()
    record = followed.record
    if as_json:
        from jobhost.operations.backfills import backfill_json

        click.echo(json.dumps({**backfill_json(record), "detached": followed.detached}, indent=2))
    else:
        click.echo(backfill_id)
    if followed.detached:
        return EXIT_OK
    return EXIT_OK if record.counts.get("succeeded", 0) == record.selected else EXIT_FAILED


def _progress(line: str) -> None:
    click.echo(line, err=True)


def _print_plan(plan: BackfillPlan, as_json: bool) -> None:
    from jobhost.operations.timefmt import iso_utc

    if as_json:
        click.echo(json.dumps(plan.to_json(), indent=2))
    else:
        for occurrence in plan.occurrences:
            click.echo(iso_utc(occurrence))
    if plan.occurrences:
        click.echo(
            f"job {plan.job}, mode {plan.mode}: {len(plan.occurrences):,} of {plan.in_range:,} "
            f"occurrence(s) from {iso_utc(plan.start)} to {iso_utc(plan.end)} selected",
            err=True,
        )
    else:
        click.echo(
            f"job {plan.job}, mode {plan.mode}: nothing to do ({plan.in_range:,} occurrence(s) "
            f"from {iso_utc(plan.start)} to {iso_utc(plan.end)}, none selected)",
            err=True,
        )


def _refuse(message: str) -> NoReturn:
    click.echo(f"error: {message}", err=True)
    raise SystemExit(EXIT_INVALID)
