"""``jobhost pause NAME --reason TEXT`` and ``jobhost resume NAME --reason TEXT``: for every
replica at once; ``--module M`` / ``--match GLOB`` instead of NAME act on many jobs with one
reason."""

from __future__ import annotations

import getpass
from typing import TYPE_CHECKING

import click

from jobhost.catalog import Catalog
from jobhost.cli._app import EXIT_USAGE, cli, fail
from jobhost.cli._context import catalog_for, load_catalog, opened_store, settings_of
from jobhost.cli._options import change_reason
from jobhost.operations.jobs import jobs_matching, pause_jobs, require_known_job, resume_jobs
from jobhost.operations.timefmt import short_utc

if TYPE_CHECKING:
    from jobhost.config import Settings
    from jobhost.store import Store

__all__ = ["pause", "resume"]

_MODULE = click.option(
    "--module",
    "modules",
    metavar="M",
    multiple=True,
    help="Instead of NAME: every job of module M (repeatable).",
)
_MATCH = click.option(
    "--match",
    "patterns",
    metavar="GLOB",
    multiple=True,
    help="Instead of NAME: every job whose name matches GLOB, e.g. 'billing.*' (repeatable).",
)


@cli.command()
@click.argument("name", required=False)
@change_reason(
    "billing migration until 06:00", "Why; shown by `jobhost report` (required, not blank)."
)
@_MODULE
@_MATCH
@click.pass_context
def pause(
    ctx: click.Context,
    name: str | None,
    reason: str,
    modules: tuple[str, ...],
    patterns: tuple[str, ...],
) -> None:
    """Pause job NAME on every replica until `jobhost resume NAME`.

    It keeps its schedule: each occurrence it misses is recorded `missed` with reason
    `paused`. The operating-system user is recorded as who paused it, in the job's row and in
    the change log (`jobhost changes`). With --module or --match instead of NAME, every job
    they select is paused with the one reason, each with its own change-log entry.

    Exit status: 0 (also when it already was paused); 2 for an unknown job, or when --module
    and --match select no job.
    """
    settings = settings_of(ctx)
    with opened_store(settings, write=True) as store:
        catalog, jobs = _chosen(settings, store, name, modules, patterns)
        done = pause_jobs(store, catalog, jobs, actor=getpass.getuser(), reason=reason)
    for one in done:
        row = one.row
        verb = "paused" if one.changed else "already paused"
        click.echo(
            f"{one.job} {verb} by {row.paused_by} at {short_utc(row.paused_at)}: "
            f"{row.paused_reason}"
        )
    if name is None:
        click.echo(f"paused {sum(1 for d in done if d.changed)} of {len(done)} jobs")


@cli.command()
@click.argument("name", required=False)
@change_reason("migration done", "Why; written to the change log (required).")
@_MODULE
@_MATCH
@click.pass_context
def resume(
    ctx: click.Context,
    name: str | None,
    reason: str,
    modules: tuple[str, ...],
    patterns: tuple[str, ...],
) -> None:
    """Resume job NAME on every replica; its misfire policy decides what of the pause runs.

    With --module or --match instead of NAME, every job they select is resumed with the one
    reason, each with its own change-log entry.

    Exit status: 0 (also when it was not paused); 2 for an unknown job, without --reason, or
    when --module and --match select no job.
    """
    settings = settings_of(ctx)
    user = getpass.getuser()
    with opened_store(settings, write=True) as store:
        _, jobs = _chosen(settings, store, name, modules, patterns)
        done = resume_jobs(store, jobs, actor=user, reason=reason)
    for job, one in zip(jobs, done, strict=True):
        if one is None or not one.changed:
            click.echo(f"{job} was not paused")
            continue
        row = one.row
        click.echo(
            f"{job} resumed at {short_utc(one.at)} by {user} (paused by "
            f"{row.paused_by} at {short_utc(row.paused_at)}: {row.paused_reason})"
        )
    if name is None:
        changed = sum(1 for d in done if d is not None and d.changed)
        click.echo(f"resumed {changed} of {len(done)} jobs")


def _chosen(
    settings: Settings,
    store: Store,
    name: str | None,
    modules: tuple[str, ...],
    patterns: tuple[str, ...],
) -> tuple[Catalog, list[str]]:
    """The catalog and the jobs to act on: job ``name``, or those --module and --match select."""
    if name is not None:
        if modules or patterns:
            raise click.UsageError(f"give job {name} or --module/--match, not both")
        catalog = catalog_for(settings, store, name)
        return catalog, [require_known_job(catalog, store, name)]
    catalog = load_catalog(settings)
    if not modules and not patterns:
        raise click.UsageError("name a job, or select jobs with --module M or --match GLOB")
    jobs = jobs_matching(catalog, modules, patterns)
    if not jobs:
        known = ", ".join(sorted({s.module for s in catalog.jobs.values()})) or "none"
        asked = [*(f"--module {m}" for m in modules), *(f"--match {p}" for p in patterns)]
        fail(f"no job matches {' '.join(asked)} (modules: {known})", EXIT_USAGE)
    return catalog, jobs
