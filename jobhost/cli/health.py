"""``jobhost health``: the release gate, every check listed with pass or fail and why."""

from __future__ import annotations

import json

import click

from jobhost.cli._app import EXIT_FAILED, cli
from jobhost.cli._context import load_catalog, open_store, settings_of

__all__ = ["health"]


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of text.")
@click.option(
    "--no-hosts", is_flag=True, help="Do not require a live host (a check before a deploy)."
)
@click.option(
    "--check-catalog",
    is_flag=True,
    help="Load the modules and validate their catalog (the catalog check).",
)
@click.pass_context
def health(ctx: click.Context, as_json: bool, no_hosts: bool, check_catalog: bool) -> None:
    """Check the store, the catalog, the critical jobs, the hosts, the leases and the clocks.

    Checks: store (reachable, schema current), catalog (valid), critical-jobs-scheduled
    (enabled, not paused, next fire not behind), live-host (at least one; skipped with
    --no-hosts), leases (none expired but held), critical-jobs-last-run (not failed, not
    overdue), clock-skew (every live host within 1s of the database). JSON: {"ok": bool,
    "checks": [{"name", "ok", "detail"}]}.

    The checks read the store alone, loading no module: the catalog check names the catalog
    version the store holds. --check-catalog loads this installation's modules instead and
    fails the catalog check on any problem in them (see `jobhost validate`).

    Exit status: 0 when every check passes, 1 otherwise; 3 when the configuration cannot be
    loaded at all.
    """
    from jobhost.operations.health import check_health
    from jobhost.operations.render import health_lines, stdout_style

    settings = settings_of(ctx)
    catalog = load_catalog(settings) if check_catalog else None
    store = open_store(settings, require_current=False, missing_ok=True)
    try:
        result = check_health(settings, catalog, store, hosts=not no_hosts)
    finally:
        store.dispose()
    if as_json:
        click.echo(json.dumps(result.to_json(), indent=2))
    else:
        click.echo("\n".join(health_lines(result, stdout_style())))
    if not result.ok:
        raise SystemExit(EXIT_FAILED)
