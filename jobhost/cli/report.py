"""``jobhost report``: what runs when, what ran, and what differs from what is declared."""

from __future__ import annotations

import json

import click

from jobhost.cli._app import EXIT_INVALID, cli
from jobhost.cli._context import load_catalog, open_store, settings_of

__all__ = ["report"]


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of text.")
@click.option("--job", "job", metavar="NAME", help="Only this job (the hosts are still listed).")
@click.pass_context
def report(ctx: click.Context, as_json: bool, job: str | None) -> None:
    """The schedule report: one entry per job, then the live hosts.

    Each job shows its declared and effective trigger, state (enabled, disabled, paused,
    orphaned), next fire in UTC and local time, last run, recent outcomes, and every reason
    what runs differs from what is declared or expected (override, paused, overdue, ...).

    Exit status: 0; 2 for an unknown --job; 3 when the catalog is invalid (the report is
    still printed, from what could be loaded; see `jobhost validate`).
    """
    from jobhost.operations.render import report_lines, stdout_style
    from jobhost.operations.report import build_report
    from jobhost.operations.snapshot import resolve_job, stored_job_names

    settings = settings_of(ctx)
    catalog = load_catalog(settings)
    engine = open_store(settings)
    try:
        if job is not None:
            resolve_job(catalog, stored_job_names(engine), job)
        built = build_report(settings, catalog, engine, job=job)
    finally:
        engine.dispose()
    if as_json:
        click.echo(json.dumps(built.to_json(), indent=2))
    else:
        click.echo("\n".join(report_lines(built, stdout_style())))
    if not catalog.ok:
        click.echo(
            f"jobhost: the catalog has {len(catalog.problems)} problem(s); see `jobhost validate`:",
            err=True,
        )
        for problem in catalog.problems:
            click.echo(f"  {problem.line()}", err=True)
        raise SystemExit(EXIT_INVALID)
