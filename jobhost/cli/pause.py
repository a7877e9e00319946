"""``jobhost pause NAME --reason TEXT`` and ``jobhost resume NAME``: for every replica at once."""

from __future__ import annotations

import getpass

import click

from jobhost.cli._app import cli
from jobhost.cli._context import catalog_for, open_store, settings_of

__all__ = ["pause", "resume"]


@cli.command()
@click.argument("name")
@click.option(
    "--reason",
    required=True,
    callback=lambda _ctx, _param, value: _reason(value),
    help="Why; shown by `jobhost report` (required, not blank).",
)
@click.pass_context
def pause(ctx: click.Context, name: str, reason: str) -> None:
    """Pause job NAME on every replica until `jobhost resume NAME`.

    It keeps its schedule: each occurrence it misses is recorded `missed` with reason
    `paused`. The operating-system user is recorded as who paused it, in the job's row and in
    the change log (`jobhost changes`).

    Exit status: 0 (also when it already was paused); 2 for an unknown job.
    """
    from jobhost.operations.actions import pause as pause_job
    from jobhost.operations.snapshot import require_known_job
    from jobhost.operations.timefmt import short_utc

    settings = settings_of(ctx)
    engine = open_store(settings, write=True)
    try:
        catalog = catalog_for(settings, engine, name)
        require_known_job(catalog, engine, name)
        done = pause_job(engine, catalog, name, actor=getpass.getuser(), reason=reason)
    finally:
        engine.dispose()
    row = done.row
    verb = "paused" if done.changed else "already paused"
    click.echo(
        f"{name} {verb} by {row.paused_by} at {short_utc(row.paused_at)}: {row.paused_reason}"
    )


@cli.command()
@click.argument("name")
@click.option("--reason", default=None, help="Why; written to the change log (optional).")
@click.pass_context
def resume(ctx: click.Context, name: str, reason: str | None) -> None:
    """Resume job NAME on every replica; its misfire policy decides what of the pause runs.

    Exit status: 0 (also when it was not paused); 2 for an unknown job.
    """
    from jobhost.operations.actions import resume as resume_job
    from jobhost.operations.snapshot import require_known_job
    from jobhost.operations.timefmt import short_utc

    settings = settings_of(ctx)
    engine = open_store(settings, write=True)
    try:
        require_known_job(catalog_for(settings, engine, name), engine, name)
        done = resume_job(engine, name, actor=getpass.getuser(), reason=reason)
    finally:
        engine.dispose()
    if done is None or not done.changed:
        click.echo(f"{name} was not paused")
        return
    row = done.row
    click.echo(
        f"{name} resumed at {short_utc(done.at)} by {getpass.getuser()} (paused by "
        f"{row.paused_by} at {short_utc(row.paused_at)}: {row.paused_reason})"
    )


def _reason(value: str) -> str:
    # The reason is what the next operator reads at 3 a.m.: an empty one tells them nothing.
    if not value.strip():
        raise click.BadParameter("must say why, e.g. --reason 'billing migration until 06:00'")
    return value.strip()
