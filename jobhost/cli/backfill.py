"""``jobhost backfill NAME --from TIME --to TIME``: replay a past range, once per occurrence;
``--list``, ``--show ID`` and ``--cancel ID``: the backfills in the store."""

from __future__ import annotations

import getpass
import json
from typing import TYPE_CHECKING, NoReturn

import click

from jobhost.catalog.model import suggest
from jobhost.cli._app import EXIT_FAILED, EXIT_INVALID, cli, fail, to_stderr
from jobhost.cli._context import load_catalog, migrate_store, opened_store, require_job, settings_of
from jobhost.cli._options import change_reason, json_option, json_shown
from jobhost.errors import UnknownJobError
from jobhost.operations.backfills import (
    BackfillInputError,
    backfill_json,
    cancel_backfill,
    plan_backfill,
    see_through,
    start_backfill,
)
from jobhost.operations.timefmt import iso_utc

if TYPE_CHECKING:
    from jobhost.operations.backfills import BackfillPlan
    from jobhost.records import BackfillRecord
    from jobhost.store import Store

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
@change_reason(None, "Why the occurrences are replayed; recorded.", required=False)
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
@json_option("Print the result as one JSON object.")
@click.option("--list", "list_them", is_flag=True, help="List the backfills in the store.")
@click.option("--show", "show_id", metavar="ID", help="Show one backfill and its occurrences.")
@click.option(
    "--cancel", "cancel_id", metavar="ID", help="Stop a backfill after its runs in flight."
)
def backfill(
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
    """TIME is ISO 8601 with a zone (2026-11-28T00:00:00Z, 2026-11-28T00:00+01:00) or a date
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
    settings = settings_of()
    picked = [
        o for o, v in (("--list", list_them), ("--show", show_id), ("--cancel", cancel_id)) if v
    ]
    if len(picked) > 1:
        _refuse(f"give one of {', '.join(picked)}, not several")
    if picked:
        if name is not None or start is not None or end is not None:
            _refuse(f"{picked[0]} takes no job name, --from or --to")
        with opened_store(settings, write=cancel_id is not None) as store:
            if list_them:
                _list_all(store, as_json=as_json)
            elif show_id is not None:
                _show_one(store, show_id, as_json=as_json)
            else:
                _cancel_one(store, str(cancel_id), actor=getpass.getuser(), reason=reason)
        return
    if name is None or start is None or end is None:
        _refuse(
            "give a job name with --from and --to (e.g. jobhost backfill billing.nightly "
            "--from 2026-11-28 --to 2026-11-30), or --list, --show ID or --cancel ID"
        )
    catalog = load_catalog(settings)
    if name not in catalog.jobs and not catalog.problems_for(name):
        _refuse(str(UnknownJobError(name, suggest(name, catalog.jobs))))
    spec = require_job(catalog, name, "be backfilled")
    with opened_store(settings) as store:
        try:
            limit = settings.backfill_limit
            plan = plan_backfill(spec, store, start=start, end=end, mode=mode, limit=limit)
        except BackfillInputError as error:
            _refuse(str(error))
    if dry_run or not plan.occurrences:
        _print_plan(plan, as_json)
        return
    from jobhost.cli._one_shot import backfill_here

    if settings.auto_migrate:
        migrate_store(settings)  # it may run the job itself, as `jobhost run` would
    with opened_store(settings, write=True) as store:
        hosts = bool(store.health_rows(hosts="alive")[1].hosts)
        backfill_id = start_backfill(
            store, spec, plan, concurrency=concurrency, actor=getpass.getuser(), reason=reason
        )
        to_stderr(
            f"backfill {backfill_id}: job {spec.name}, mode {plan.mode}, "
            f"{len(plan.occurrences):,} of {_span(plan)}, concurrency {concurrency}"
        )
        if no_wait:
            if not hosts:
                to_stderr("no live host: the backfill runs when a host starts")
            click.echo(json.dumps({"id": backfill_id}) if as_json else backfill_id)
            return
        if not hosts:
            to_stderr(f"no live host: running backfill {backfill_id} in this process")
        record, detached = see_through(
            store,
            backfill_id,
            hosts=hosts,
            run_here=backfill_here(settings, catalog, store),
            progress=to_stderr,
        )
    if not json_shown(as_json, {**backfill_json(record), "detached": detached}):
        click.echo(backfill_id)
    if not detached and record.counts.get("succeeded", 0) != record.selected:
        raise SystemExit(EXIT_FAILED)


def _print_plan(plan: BackfillPlan, as_json: bool) -> None:
    if not json_shown(as_json, plan.to_json()):
        for occurrence in plan.occurrences:
            click.echo(iso_utc(occurrence))
    head = f"job {plan.job}, mode {plan.mode}"
    if plan.occurrences:
        to_stderr(f"{head}: {len(plan.occurrences):,} of {_span(plan)} selected")
    else:
        to_stderr(f"{head}: nothing to do ({_span(plan)}, none selected)")


def _span(plan: BackfillPlan) -> str:
    return f"{plan.in_range:,} occurrence(s) from {iso_utc(plan.start)} to {iso_utc(plan.end)}"


def _refuse(message: str) -> NoReturn:
    fail(f"error: {message}", EXIT_INVALID)


def _list_all(store: Store, *, as_json: bool) -> None:
    """The newest backfills first, one a line (JSON: a list of objects)."""
    found = store.list_backfills()
    if json_shown(as_json, [backfill_json(r) for r in found]):
        return
    if not found:
        to_stderr("no backfills in the store")
    for record in found:
        click.echo(_line(record))


def _show_one(store: Store, backfill_id: str, *, as_json: bool) -> None:
    """One backfill with each of its occurrences and where it stands."""
    found = store.list_backfills(ids=[backfill_id], items=True)
    if not found:
        _unknown(backfill_id)
    record = found[0]
    items = [
        {"occurrence": iso_utc(o), "state": state, "run_id": run_id}
        for o, state, run_id in record.items
    ]
    if json_shown(as_json, {**backfill_json(record), "items": items}):
        return
    click.echo(_line(record))
    if record.reason:
        click.echo(f"  reason: {record.reason}")
    for occurrence, state, run_id in record.items:
        click.echo(f"  {iso_utc(occurrence)}  {state:<9}  {run_id or '-'}")


def _cancel_one(store: Store, backfill_id: str, *, actor: str, reason: str | None) -> None:
    """Cancel the backfill: no new occurrence starts; its runs in flight finish. Without a
    reason, exit 2: the cancel is in the change log, where an empty reason tells no one why."""
    if not reason:
        raise click.UsageError(
            "--cancel needs --reason TEXT: say why, for the change log "
            "(e.g. --reason 'wrong range, INC-7')"
        )
    record = cancel_backfill(store, backfill_id, actor=actor, reason=reason)
    if record is None:
        _unknown(backfill_id)
    running = record.counts.get("claimed", 0)
    click.echo(
        f"backfill {backfill_id} of {record.job_name}: {record.state}; "
        f"{record.settled} of {record.selected} done, {running} still running"
    )


def _line(record: BackfillRecord) -> str:
    counts = record.counts
    return (
        f"{record.id}  {record.job_name}  {record.state:<9}  {iso_utc(record.range_from)} → "
        f"{iso_utc(record.range_to)}  {record.mode}  {record.settled}/{record.selected} done "
        f"({counts.get('succeeded', 0)} ok, {counts.get('failed', 0)} failed, "
        f"{counts.get('claimed', 0)} running)  by {record.actor}"
    )


def _unknown(backfill_id: str) -> NoReturn:
    _refuse(f"no backfill {backfill_id!r} in the store; jobhost backfill --list shows them")
