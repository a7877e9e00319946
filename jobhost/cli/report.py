"""``jobhost report``: what runs when, what ran, and what differs from what is declared."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, cast

import click

from jobhost.catalog.model import Catalog
from jobhost.cli._app import cli, to_stderr
from jobhost.cli._context import load_catalog, opened_store, refuse_invalid, settings_of
from jobhost.cli._options import json_option
from jobhost.operations.jobs import require_known_job, stored_version
from jobhost.operations.report import SORTS, STATUSES, JobFilter, Sort, build_report, select_jobs

if TYPE_CHECKING:
    from jobhost.store import Store

__all__ = ["report"]


@cli.command()
@json_option()
@click.option("--job", "job", metavar="NAME", help="Only this job, in detail (reads only it).")
@click.option(
    "--long", "long", is_flag=True, help="A detailed block per job, with its full name, not a line."
)
@click.option("--module", "modules", metavar="M", multiple=True, help="Only jobs of module M.")
@click.option(
    "--state",
    "states",
    type=click.Choice(STATUSES),
    multiple=True,
    help="Only jobs with this status (repeatable).",
)
@click.option("--failing", is_flag=True, help="Only jobs whose last run failed or timed out.")
@click.option(
    "--sort", type=click.Choice(SORTS), default="name", show_default=True, help="Order of jobs."
)
@click.option("--limit", type=click.IntRange(min=1), metavar="N", help="At most N jobs.")
@click.option(
    "--all", "show_all", is_flag=True, help="List every job, the ok ones too (text output)."
)
@click.option(
    "--check-catalog",
    is_flag=True,
    help="Also load the modules and compare their catalog with the store's, job by job.",
)
@click.pass_context
def report(
    ctx: click.Context,
    *,
    as_json: bool,
    job: str | None,
    long: bool,
    modules: tuple[str, ...],
    states: tuple[str, ...],
    failing: bool,
    sort: str,
    limit: int | None,
    show_all: bool,
    check_catalog: bool,
) -> None:
    """The schedule report: a summary by status, one line per job, then the live hosts.

    Statuses: ok, failing, overdue, behind, stuck, running, paused, disabled, orphaned,
    invalid. The text lists the jobs that are not ok (--all, --state or --job lists them
    too); --json lists every job the filters keep. One line per job: a name longer than its
    column is cut in the middle with "..." (--long and --json give full names). Each line
    shows the job's status, next fire in its local time, last outcome and how long ago, and
    flags (critical, override, ...). --long (or --job) shows each job's declared and
    effective trigger, next fire in UTC and local time, last run, recent outcomes and every
    reason what runs differs from what is declared or expected. Filters combine.

    The report reads the store alone: each job as the last sync wrote it (its declaration,
    policies and trigger), loading no module. --check-catalog also loads this installation's
    modules and compares their catalog with the store, job by job (mismatch store-differs).

    Exit status: 0; 2 for an unknown --job; 3 with --check-catalog when the catalog is invalid
    (the report is still printed, from what could be loaded; see `jobhost validate`).
    """
    from jobhost.operations.render import indented, report_lines, stdout_style, terminal_width

    settings = settings_of(ctx)
    catalog = load_catalog(settings) if check_catalog else None
    with opened_store(settings) as store:
        if job is not None:
            # Without a catalog the job is known from the store alone (no plugin is loaded).
            require_known_job(catalog or Catalog(jobs={}, problems=[]), store, job)
        # The one-line-per-job text shows no job's recent outcomes: they are not read for it.
        shown = as_json or long or job is not None
        built = build_report(settings, catalog, store, job=job, recent=shown, apart=True)
        if catalog is not None:
            _note_versions(catalog, store)
    which = JobFilter(modules=modules, statuses=states, failing=failing, sort=cast("Sort", sort))
    jobs = select_jobs(built.jobs, which)
    # At 10,000 jobs the text would be 10,000 lines of "ok": by default it lists what needs
    # a look, and says how many ok jobs it left out. Naming a status or a job shows it whatever.
    hidden = 0
    if not (as_json or show_all or states or job is not None):
        kept = [entry for entry in jobs if entry.status != "ok"]
        hidden, jobs = len(jobs) - len(kept), kept
    jobs = jobs[:limit]
    if as_json:
        click.echo(indented(built.to_json(jobs)))
    else:
        lines = report_lines(
            built,
            stdout_style(),
            width=terminal_width(),
            long=long or job is not None,
            jobs=jobs,
            piped=not sys.stdout.isatty(),
            hidden_ok=hidden,
        )
        click.echo("\n".join(lines))
    if catalog is not None and not catalog.ok:
        refuse_invalid(
            catalog,
            f"jobhost: the catalog has {len(catalog.problems)} problem(s); see `jobhost validate`:",
        )


def _note_versions(catalog: Catalog, store: Store) -> None:
    """Say on stderr when this installation's catalog version is not the one the store holds
    (one digest each: equal versions, equal declarations)."""
    from jobhost.operations.plan import this_catalog

    held = stored_version(store.catalog_versions())
    mine = this_catalog(catalog)
    if held != mine:
        to_stderr(
            f"note: this installation's catalog is version {mine}, the store holds "
            f"{held or 'none'}; a host started with this catalog applies it (see `jobhost plan`)"
        )
