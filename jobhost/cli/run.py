"""``jobhost run``: the host itself; ``jobhost serve``: the HTTP surface over the store, without
a host."""

from __future__ import annotations

import logging
import sys
from typing import TYPE_CHECKING

import click

from jobhost.cli._app import EXIT_INVALID, cli, configure_logging, to_stderr
from jobhost.cli._context import (
    check_current,
    check_store,
    load_catalog,
    migrate_store,
    open_store,
    settings_of,
    with_stored_jobs,
)
from jobhost.config import Settings, redact_url
from jobhost.config.settings import split_listen_address

if TYPE_CHECKING:
    from starlette.types import ASGIApp

    from jobhost.web import WebServer

__all__ = ["run", "serve"]

_log = logging.getLogger("jobhost.host")
_DEFAULT_LISTEN = "127.0.0.1:8080"


@cli.command()
def run() -> None:
    """SIGTERM or SIGINT stops claiming, cancels running jobs, waits the shutdown grace, records
    what did not finish and exits 0; a second signal exits at once. With http_listen set, the
    probes, /metrics, /report and the dashboard are served there.
    """
    # Imported here, so that every other command starts without the firing loop's imports.
    from jobhost.catalog.build import build_catalog
    from jobhost.envelope.reporting import configure_telemetry
    from jobhost.firing.host import Host
    from jobhost.operations.gauges import register_gauges
    from jobhost.web import prometheus_reader
    from jobhost.web.surfaces import host_application

    settings = settings_of()
    configure_logging(settings.log_level, settings.log_format)
    declared = build_catalog(settings)
    leases = [spec.declaration.lease for spec in declared.jobs.values() if spec.declaration.lease]
    # One store for the whole process: the runtime jobs' read, the migration and the host.
    # Opening it reads nothing: an invalid catalog still stops the host before any statement.
    shortest = min(leases, default=None)
    store = open_store(
        settings, require_current=False, create=True, pre_ping=False, shortest_lease=shortest
    )
    catalog = with_stored_jobs(settings, declared, store)
    if not catalog.ok:
        headline = "jobhost: the job catalog is invalid; the host will not start:"
        lines = [headline, *(f"  {problem.line()}" for problem in catalog.problems)]
        _say(settings, "\n".join(lines), logging.ERROR)
        sys.exit(EXIT_INVALID)
    for warning in catalog.warnings:
        _say(settings, f"jobhost: warning: {warning.line()}", logging.WARNING)
    _say(settings, f"jobhost: store {redact_url(settings.database_url)}")
    for caveat in settings.warnings():
        _say(settings, f"jobhost: warning: {caveat}", logging.WARNING)
    if settings.auto_migrate:
        before, after = migrate_store(settings, store=store)
        if before != after:
            _say(settings, f"jobhost: schema upgraded from {before or 'empty'} to {after}")
    # The migration checked the pooler.
    check_store(settings, store, write=True, check_pooler=not settings.auto_migrate)
    check_current(settings, store)
    address = settings.listen_address()
    if address is not None:
        settings, reading = _read_access(settings, address[0])
        _say(settings, reading)
    reader, render_metrics = prometheus_reader() if address is not None else (None, None)
    readers = [reader] if reader is not None else []
    telemetry = configure_telemetry(extra_readers=readers, job_label=settings.metrics_job_label)
    telemetry.install_globally()
    host = Host(settings, catalog, store, telemetry=telemetry)
    register_gauges(telemetry.meter, host)
    server = None
    if address is not None and render_metrics is not None:
        server = _web_server(settings, address, host_application(host, render_metrics))
        server.start()
        _say(settings, f"jobhost: serving HTTP on {settings.http_listen}")
    try:
        code = host.run_forever()
    finally:
        if server is not None:
            server.stop()
    sys.exit(code)


@cli.command()
@click.option(
    "--listen",
    metavar="HOST:PORT",
    help=f"Where to listen; default: http_listen, or {_DEFAULT_LISTEN} when that is unset.",
)
def serve(listen: str | None) -> None:
    """Nothing fires here, the dashboard shows no actions, and /metrics (the host's run metrics)
    is not served. With api_tokens set, the job API under /api/v1 is served too; its changes
    go to the store, and the hosts pick them up. Runtime jobs created, changed or deleted
    through the API (here or on any host) show within about a second, as on a host. /healthz
    answers 200 while the server runs; /readyz 200 when the store is reachable at the current
    schema. SIGTERM or SIGINT stops it.

    Exit status: 0 when stopped; 3 when the configuration is invalid or the address cannot be
    listened on; 1 when the store is unreachable or its schema is not current; 2 for a
    malformed --listen.
    """
    from jobhost.runtime.reload import RuntimeFollower
    from jobhost.web.surfaces import store_application

    settings = settings_of()
    address = _listen_address(settings, listen)
    settings, reading = _read_access(settings, address[0])
    configure_logging(settings.log_level, settings.log_format)
    store = open_store(settings)
    catalog = load_catalog(settings, store)
    follower = RuntimeFollower(settings, catalog, store)
    try:
        server = _web_server(settings, address, store_application(settings, catalog, store))
        follower.start()
        host, port = server.address
        to_stderr(
            f"jobhost: serving {redact_url(settings.database_url)} read-only on "
            f"http://{f'[{host}]' if ':' in host else host}:{port}"
        )
        to_stderr(reading)
        server.serve()
    finally:
        follower.stop()
        store.dispose()


def _say(settings: Settings, text: str, level: int = logging.INFO) -> None:
    """A start-up line on stderr: as it is, or as one JSON object with ``log_format = "json"``,
    so that every line a JSON host writes parses."""
    if settings.log_format == "json":
        _log.log(level, "%s", text.removeprefix("jobhost: "))
    else:
        to_stderr(text)


def _listen_address(settings: Settings, listen: str | None) -> tuple[str, int]:
    if listen is None:
        return settings.listen_address() or split_listen_address(_DEFAULT_LISTEN)
    try:
        return split_listen_address(listen)
    except ValueError as error:
        raise click.BadParameter(str(error), param_hint="--listen") from None


def _read_access(settings: Settings, host: str) -> tuple[Settings, str]:
    """``settings`` with ``web_read_access`` decided for a listener on ``host``, and the
    start-up line that says who may read."""
    access = settings.read_access_for(host)
    if settings.web_read_access is not None:
        why = "web_read_access set"
    elif access == "open":
        why = "a loopback listener"
    else:
        why = "not loopback and web_read_access unset"
    if access == "open":
        line = (
            f"jobhost: reading open: the dashboard and /report need no credential ({why}); "
            "the API needs its tokens"
        )
    else:
        line = (
            f"jobhost: reading closed: the dashboard asks for a sign-in and /report and the API "
            f"for a token ({why}); /healthz and /readyz stay open, /metrics is "
            f"{settings.metrics_access} (metrics_access)"
        )
    return settings.model_copy(update={"web_read_access": access}), line


def _web_server(settings: Settings, address: tuple[str, int], application: ASGIApp) -> WebServer:
    from jobhost.web import WebServer

    return WebServer(
        address,
        application,
        header_timeout=settings.http_header_timeout.total_seconds(),
        trusted_proxies=settings.trusted_proxies,
    )
