"""``jobhost db upgrade`` and ``jobhost db current``: the store's schema."""

from __future__ import annotations

import click
from sqlalchemy.exc import DBAPIError, OperationalError

from jobhost.cli._app import cli
from jobhost.cli._context import migrate_store, open_store, settings_of
from jobhost.config import redact_text, redact_url
from jobhost.errors import StoreUnavailableError
from jobhost.store import current_revision, head_revision
from jobhost.store.migrate import check_not_newer


@cli.group()
def db() -> None:
    """The store's schema: apply migrations, show the revision."""


@db.command("upgrade")
@click.pass_context
def db_upgrade(ctx: click.Context) -> None:
    """Apply pending migrations (safe to run from several replicas at once)."""
    before, after = migrate_store(settings_of(ctx), create=True)
    if before == after:
        click.echo(f"schema already at revision {after}")
    else:
        click.echo(f"schema upgraded from {before or 'empty'} to {after}")


@db.command("current")
@click.pass_context
def db_current(ctx: click.Context) -> None:
    """Show the store's schema revision and the newest one this version ships."""
    settings = settings_of(ctx)
    engine = open_store(settings, require_current=False)
    try:
        current = current_revision(engine)
    except (OperationalError, DBAPIError) as error:
        raise StoreUnavailableError(
            f"cannot reach the store at {redact_url(settings.database_url)}: "
            f"{redact_text(str(error.orig or error)).strip()}"
        ) from None
    check_not_newer(current)  # a newer schema: exit 3, "upgrade jobhost"
    head = head_revision()
    state = "current" if current == head else "needs `jobhost db upgrade`"
    click.echo(f"store revision {current or 'none'}, newest {head}: {state}")
