"""``jobhost run``: the host itself."""

from __future__ import annotations

import sys

import click

from jobhost.cli._app import EXIT_INVALID, cli, configure_logging
from jobhost.cli._context import load_catalog, open_store, settings_of
from jobhost.config import redact_url
from jobhost.envelope.telemetry import configure_telemetry
from jobhost.firing.host import Host
from jobhost.store import upgrade


@cli.command()
@click.pass_context
def run(ctx: click.Context) -> None:
    """Run the jobs: validate the catalog, migrate the store, fire occurrences until stopped.

    SIGTERM or SIGINT stops claiming, cancels running jobs, waits the shutdown grace, records
    what did not finish and exits 0; a second signal exits at once.
    """
    settings = settings_of(ctx)
    configure_logging(settings.log_level)
    catalog = load_catalog(settings)
    if not catalog.ok:
        click.echo("jobhost: the job catalog is invalid; the host will not start:", err=True)
        for problem in catalog.problems:
            click.echo(f"  {problem.line()}", err=True)
        sys.exit(EXIT_INVALID)
    click.echo(f"jobhost: store {redact_url(settings.database_url)}", err=True)
    if settings.auto_migrate:
        before, after = upgrade(open_store(settings, require_current=False))
        if before != after:
            click.echo(f"jobhost: schema upgraded from {before or 'empty'} to {after}", err=True)
    engine = open_store(settings)
    telemetry = configure_telemetry()
    telemetry.install_globally()
    host = Host(settings, catalog, engine, telemetry=telemetry)
    sys.exit(host.run_forever())
