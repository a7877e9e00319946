"""``jobhost validate``: is the job catalog complete and healthy? Exit 0 when it is, 3 when not."""

from __future__ import annotations

import json

import click

from jobhost.catalog import Catalog, build_catalog
from jobhost.cli._app import EXIT_INVALID, cli, config_path
from jobhost.cli._context import with_stored_jobs
from jobhost.cli._loaded import loaded, loaded_lines
from jobhost.config import load_settings

__all__ = ["validate"]


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of lines.")
@click.pass_context
def validate(ctx: click.Context, as_json: bool) -> None:
    """Load every plugin and check every job; list every problem, not only the first.

    Exit status: 0 when the catalog is clean, 3 when it has problems (or the configuration
    is invalid). Runtime jobs in the configured store are checked too, when it is
    reachable. Before the summary it lists what it loaded: each plugin, its modules, and
    each job with enabled or disabled (and why), its trigger and its group. The JSON form
    is {"ok": ..., "jobs": N, "problems": [{"job", "module", "code", "message"}, ...],
    "warnings": [same shape], "plugins": [{"plugin", "modules", "jobs": [{"name",
    "module", "enabled", "disabled_because", "trigger", "group"}, ...]}, ...]}; warnings
    (a concurrency limit no job uses) do not change the exit status.
    """
    settings = load_settings(config_path(ctx))
    # The store's runtime jobs too: a declaration that took a runtime job's name is a problem.
    catalog = with_stored_jobs(settings, build_catalog(settings))
    for caveat in settings.warnings():
        click.echo(f"warning: {caveat}", err=True)
    if as_json:
        click.echo(
            json.dumps({**_as_json(catalog), "plugins": loaded(catalog, settings)}, indent=2)
        )
    else:
        for problem in catalog.problems:
            click.echo(problem.line())
        for warning in catalog.warnings:
            click.echo(f"warning: {warning.line()}")
        for line in loaded_lines(loaded(catalog, settings)):
            click.echo(line)
        click.echo(_summary(catalog))
    if not catalog.ok:
        # SystemExit, not ctx.exit: with standalone_mode=False click turns ctx.exit into a
        # return value of cli.main, which jobhost.cli.main does not pass on.
        raise SystemExit(EXIT_INVALID)


def _as_json(catalog: Catalog) -> dict[str, object]:
    return {
        "ok": catalog.ok,
        "jobs": len(catalog.jobs),
        "problems": [
            {"job": p.job, "module": p.module, "code": p.code, "message": p.message}
            for p in catalog.problems
        ],
        "warnings": [
            {"job": p.job, "module": p.module, "code": p.code, "message": p.message}
            for p in catalog.warnings
        ],
    }


def _summary(catalog: Catalog) -> str:
    jobs = len(catalog.jobs)
    problems = len(catalog.problems)
    return f"{jobs} {_plural(jobs, 'job')}, {problems} {_plural(problems, 'problem')}"


def _plural(count: int, word: str) -> str:
    return word if count == 1 else f"{word}s"
