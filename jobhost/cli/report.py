"""``jobhost report``: what runs when, what ran, and what differs from what is declared."""

from __future__ import annotations

import sys

import click

from jobhost.cli._app import EXIT_INVALID, cli
from jobhost.cli._context import load_catalog, note_versions, open_store, settings_of, store_only
from jobhost.operations.report import SORTS, STATUSES

__all__ = ["report"]


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of text.")
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
    from jobhost.operations.jobs import require_known_job
    from jobhost.operations.render import indented, report_lines, stdout_style, terminal_width
    from jobhost.operations.report import JobFilter, Sort, build_report, select_jobs

    settings = settings_of(ctx)
    catalog = load_catalog(settings) if check_catalog else None
    store = open_store(settings)
    try:
        if job is not None:
            require_known_job(catalog or store_only(), store, job)
        # The one-line-per-job text shows no job's recent outcomes: they are not read for it.
        shown = as_json or long or job is not None
        built = build_report(settings, catalog, store, job=job, recent=shown, apart=True)
        if catalog is not None:
            note_versions(catalog, store)
    finally:
        store.dispose()
    sort_by: Sort = "name"
    for known in SORTS:
        if known == sort:
            sort_by = known
    which = JobFilter(modules=modules, statuses=states, failing=failing, sort=sort_by)
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
        click.echo(
            f"jobhost: the catalog has {len(catalog.problems)} problem(s); see `jobhost validate`:",
            err=True,
        )
        for problem in catalog.problems:
            click.echo(f"  {problem.line()}", err=True)
        raise SystemExit(EXIT_INVALID)
