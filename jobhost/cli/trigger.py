"""``jobhost trigger NAME``: a manual run through the same claim, ledger and envelope."""

from __future__ import annotations

import getpass
from typing import TYPE_CHECKING

import click

from jobhost.cli._app import cli, to_stderr
from jobhost.cli._context import (
    load_catalog,
    migrate_store,
    open_store,
    opened_store,
    require_job,
    settings_of,
)
from jobhost.cli._options import change_reason, print_and_exit, wait_options
from jobhost.errors import StoreUnavailableError
from jobhost.operations.jobs import stored_catalog
from jobhost.operations.runs import OperatorRun

if TYPE_CHECKING:
    from jobhost.config import Settings

__all__ = ["trigger"]


@cli.command()
@click.argument("name")
@change_reason(None, "Why; recorded with the run.", required=False)
@wait_options(
    no_wait="Queue the run and exit at once.",
    until="wait for the outcome",
    beside=(
        click.option(
            "--now",
            "beside_limit",
            is_flag=True,
            help="Start even when the job's concurrency group is full: the run goes beside the "
            "limit, and its record says so.",
        ),
    ),
)
@click.pass_context
def trigger(
    ctx: click.Context,
    *,
    name: str,
    reason: str | None,
    no_wait: bool,
    beside_limit: bool,
    timeout: float | None,
    as_json: bool,
) -> None:
    """Run job NAME now, as the operating-system user, and wait for its outcome.

    A live host picks the request up within a second; with none alive, the job runs in this
    process. A disabled job runs; a paused one too, with a warning. A run that would overlap
    a running one under overlap policy forbid is refused. A job whose concurrency group is
    full is queued until a slot frees (it says so), unless --now starts it beside the limit.
    Progress goes to stderr.

    JSON: {"request_id", "run_id", "job", "outcome", "host", "started_at", "finished_at",
    "duration_ms", "error"}; outcome is the run's, or refused, or queued/running when not
    waited for.

    Exit status: 0 succeeded (or queued with --no-wait); 1 failed or refused; 2 unknown job;
    3 the job's declaration is invalid; 4 --timeout passed first (a run here is cancelled, a
    host's goes on).
    """
    settings = settings_of(ctx)
    if no_wait:
        # Queued for a host: the job is read from the store, no module is loaded.
        _queue(settings, name, reason, beside_limit=beside_limit, as_json=as_json)
    catalog = load_catalog(settings)
    spec = require_job(catalog, name, "run")
    if settings.auto_migrate:
        # It may run the job itself, as `jobhost run` would, on a store not yet upgraded; a
        # store that does not exist at all is refused (see open_store).
        migrate_store(settings)
    with opened_store(settings, write=True) as store:
        here = None
        if not no_wait:
            from jobhost.cli._one_shot import runs_here

            here = runs_here(settings, catalog, store)
        manual = OperatorRun(
            settings, catalog, store, progress=to_stderr, actor=getpass.getuser(), run_here=here
        )
        result = manual.trigger(
            spec, reason, wait=not no_wait, timeout=timeout, beside_limit=beside_limit
        )
    print_and_exit(result, result.to_json(), as_json=as_json)


def _queue(
    settings: Settings, name: str, reason: str | None, *, beside_limit: bool, as_json: bool
) -> None:
    """Queue a run of ``name`` for a host when the store holds the job: no module is loaded.
    Returns (to the built catalog's path) when no host has synced it yet, or the store is not
    at this version's schema (that path migrates it)."""
    try:
        store = open_store(settings, write=True)
    except StoreUnavailableError:
        return
    try:
        catalog = stored_catalog(settings, store, only=name)
        if name not in catalog.jobs:
            return
        manual = OperatorRun(
            settings, catalog, store, progress=to_stderr, actor=getpass.getuser(), from_store=True
        )
        result = manual.trigger(
            catalog.jobs[name], reason, wait=False, timeout=None, beside_limit=beside_limit
        )
    finally:
        store.dispose()
    print_and_exit(result, result.to_json(), as_json=as_json)
