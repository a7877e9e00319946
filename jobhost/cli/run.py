"""``jobhost run``: the host itself."""

from __future__ import annotations

import logging
import sys

import click

from jobhost.cli._app import EXIT_INVALID, cli, configure_logging
from jobhost.cli._context import (
    load_catalog,
    migrate_store,
    open_store,
    read_access_of,
    settings_of,
)
from jobhost.config import Settings, redact_url

_log = logging.getLogger("jobhost.host")


@cli.command()
@click.pass_context
def run(ctx: click.Context) -> None:
    """Run the jobs: validate the catalog, migrate the store, fire occurrences until stopped.

    SIGTERM or SIGINT stops claiming, cancels running jobs, waits the shutdown grace, records
    what did not finish and exits 0; a second signal exits at once. With http_listen set, the
    probes, /metrics, /report and the dashboard are served there.
    """
    # Imported here, so that every other command starts without the firing loop's imports.
    from jobhost.envelope.reporting import configure_telemetry
    from jobhost.firing.host import Host
    from jobhost.operations.gauges import register_gauges
    from jobhost.web import WebServer, prometheus_reader
    from jobhost.web.surfaces import host_application

    settings = settings_of(ctx)
    configure_logging(settings.log_level, settings.log_format)
    catalog = load_catalog(settings)
    if not catalog.ok:
        lines = [f"  {problem.line()}" for problem in catalog.problems]
        _say(
            settings,
            "\n".join(["jobhost: the job catalog is invalid; the host will not start:", *lines]),
            logging.ERROR,
        )
        sys.exit(EXIT_INVALID)
    for warning in catalog.warnings:
        _say(settings, f"jobhost: warning: {warning.line()}", logging.WARNING)
    _say(settings, f"jobhost: store {redact_url(settings.database_url)}")
    for caveat in settings.warnings():
        _say(settings, f"jobhost: warning: {caveat}", logging.WARNING)
    if settings.auto_migrate:
        before, after = migrate_store(settings, create=True)
        if before != after:
            _say(settings, f"jobhost: schema upgraded from {before or 'empty'} to {after}")
    leases = [spec.declaration.lease for spec in catalog.jobs.values() if spec.declaration.lease]
    store = open_store(
        settings,
        create=True,
        write=True,
        pre_ping=False,
        shortest_lease=min(leases, default=None),
        check_pooler=not settings.auto_migrate,  # the migration checked it
    )
    address = settings.listen_address()
    if address is not None:
        settings, reading = read_access_of(settings, address[0])
        _say(settings, reading)
    reader, render_metrics = prometheus_reader() if address is not None else (None, None)
    telemetry = configure_telemetry(
        extra_readers=[reader] if reader is not None else [],
        job_label=settings.metrics_job_label,
    )
    telemetry.install_globally()
    host = Host(settings, catalog, store, telemetry=telemetry)
    register_gauges(telemetry.meter, host)
    server = None
    if address is not None and render_metrics is not None:
        server = WebServer(
            address,
            host_application(host, render_metrics),
            header_timeout=settings.http_header_timeout.total_seconds(),
            trusted_proxies=settings.trusted_proxies,
        )
        server.start()
        _say(settings, f"jobhost: serving HTTP on {settings.http_listen}")
    try:
        code = host.run_forever()
    finally:
        if server is not None:
            server.stop()
    sys.exit(code)


def _say(settings: Settings, text: str, level: int = logging.INFO) -> None:
    """A start-up line on stderr: as it is, or as one JSON object with ``log_format = "json"``,
    so that every line a JSON host writes parses."""
    if settings.log_format == "json":
        _log.log(level, "%s", text.removeprefix("jobhost: "))
    else:
        click.echo(text, err=True)
