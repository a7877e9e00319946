"""``jobhost plan``: what the next host start would change in the store, without changing it."""

from __future__ import annotations

import json

import click

from jobhost.cli._app import EXIT_FAILED, EXIT_INVALID, cli
from jobhost.cli._context import load_catalog, open_store, settings_of
from jobhost.store import head_revision
from jobhost.store.migrate import check_not_newer

__all__ = ["plan"]


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of text.")
@click.option("--strict", is_flag=True, help="Exit 1 when anything would change.")
@click.pass_context
def plan(ctx: click.Context, as_json: bool, strict: bool) -> None:
    """Compare the catalog the installed modules declare with the store's schedules.

    Lists the jobs a host started now would add, change (trigger, zone or enabled state,
    old -> new) and mark orphaned. JSON: {"changes": bool, "added": [{"job", "module",
    "after"}], "changed": [{"job", "before", "after", "trigger_changed"}], "orphaned":
    [{"job", "module", "before"}]}.

    Exit status: 0; 1 with --strict when anything would change; 3 when the catalog is
    invalid (a plan from it would be wrong).
    """
    from jobhost.operations.plan import (
        live_catalogs,
        plan_changes,
        plan_json,
        stored_schedules,
        this_catalog,
    )
    from jobhost.operations.render import catalog_lines, plan_lines, stdout_style

    settings = settings_of(ctx)
    catalog = load_catalog(settings)
    if not catalog.ok:
        click.echo("jobhost: the job catalog is invalid; no plan until it is fixed:", err=True)
        for problem in catalog.problems:
            click.echo(f"  {problem.line()}", err=True)
        raise SystemExit(EXIT_INVALID)
    store = open_store(settings, require_current=False)
    try:
        revision = store.current_revision()
        check_not_newer(revision)
        if revision != head_revision():
            click.echo(
                f"note: the store's schema is at {revision or 'nothing yet'}; `jobhost run` "
                f"migrates it to {head_revision()} first",
                err=True,
            )
        rows = stored_schedules(store)
        hosts = live_catalogs(store)
    finally:
        store.dispose()
    changes = plan_changes(catalog, rows)
    version = this_catalog(catalog)
    if as_json:
        click.echo(json.dumps(plan_json(changes, rows, version=version, hosts=hosts), indent=2))
    else:
        lines = plan_lines(changes, rows, stdout_style())
        click.echo("\n".join([*lines, *catalog_lines(version, hosts)]))
    if strict and not changes.empty:
        raise SystemExit(EXIT_FAILED)
