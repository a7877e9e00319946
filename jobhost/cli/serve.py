"""``jobhost serve``: the HTTP surface over the store, without a host."""

from __future__ import annotations

import click

from jobhost.cli._app import cli, configure_logging
from jobhost.cli._context import load_catalog, open_store, read_access_of, settings_of
from jobhost.config import Settings, redact_url
from jobhost.config.settings import split_listen_address

__all__ = ["serve"]

_DEFAULT_LISTEN = "127.0.0.1:8080"


@cli.command()
@click.option(
    "--listen",
    metavar="HOST:PORT",
    help=f"Where to listen; default: http_listen, or {_DEFAULT_LISTEN} when that is unset.",
)
@click.pass_context
def serve(ctx: click.Context, listen: str | None) -> None:
    """Serve the report, the probes and the dashboard over the store, with no host.

    Nothing fires here, the dashboard shows no actions, and /metrics (the host's run metrics)
    is not served. With api_tokens set, the job API under /api/v1 is served too; its changes
    go to the store, and the hosts pick them up. Runtime jobs created, changed or deleted
    through the API (here or on any host) show within about a second, as on a host. /healthz
    answers 200 while the server runs; /readyz 200 when the store is reachable at the current
    schema. SIGTERM or SIGINT stops it.

    Exit status: 0 when stopped; 3 when the configuration is invalid or the address cannot be
    listened on; 1 when the store is unreachable or its schema is not current; 2 for a
    malformed --listen.
    """
    from jobhost.runtime.follow import RuntimeFollower
    from jobhost.web import WebServer
    from jobhost.web.surfaces import store_application

    settings = settings_of(ctx)
    address = _address(settings, listen)
    settings, reading = read_access_of(settings, address[0])
    configure_logging(settings.log_level, settings.log_format)
    catalog = load_catalog(settings)
    store = open_store(settings)
    follower = RuntimeFollower(settings, catalog, store)
    try:
        server = WebServer(
            address,
            store_application(settings, catalog, store),
            header_timeout=settings.http_header_timeout.total_seconds(),
            trusted_proxies=settings.trusted_proxies,
        )
        follower.start()
        host, port = server.address
        click.echo(
            f"jobhost: serving {redact_url(settings.database_url)} read-only on "
            f"http://{f'[{host}]' if ':' in host else host}:{port}",
            err=True,
        )
        click.echo(reading, err=True)
        server.serve()
    finally:
        follower.stop()
        store.dispose()


def _address(settings: Settings, listen: str | None) -> tuple[str, int]:
    if listen is None:
        return settings.listen_address() or split_listen_address(_DEFAULT_LISTEN)
    try:
        return split_listen_address(listen)
    except ValueError as error:
        raise click.BadParameter(str(error), param_hint="--listen") from None
