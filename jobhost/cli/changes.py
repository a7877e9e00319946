"""``jobhost changes``: the change log, from the store (who paused, resumed, triggered, created,
changed or deleted which job, when and why, from any surface)."""

from __future__ import annotations

import json

import click

from jobhost.cli._app import cli
from jobhost.cli._context import opened_store, settings_of
from jobhost.cli._options import json_option, limit_option
from jobhost.operations.changes import change_json, change_line
from jobhost.records import ChangeSearch

__all__ = ["changes"]


@cli.command()
@click.option("--job", "job", metavar="NAME", default=None, help="Only this job's changes.")
@limit_option("The newest N changes.")
@json_option()
@click.pass_context
def changes(ctx: click.Context, job: str | None, limit: int, as_json: bool) -> None:
    """Show the newest changes, oldest first: pause, resume, trigger from the CLI, the dashboard
    and the API, and runtime jobs created, changed and deleted; each with who and why.

    Each also says from where: cli, api or dashboard, and over HTTP the client's address.
    Reads only the store. JSON: {"changes": [{"id", "at", "actor", "action", "job", "before",
    "after", "reason", "surface", "address"}]}, the shape of GET /api/v1/changes.

    Exit status: 0 (also when there is no change to show).
    """
    with opened_store(settings_of(ctx)) as store:
        found = store.search_changes(ChangeSearch(job=job), limit)[::-1]
    if as_json:
        click.echo(json.dumps({"changes": [change_json(c) for c in found]}, indent=2))
        return
    if not found:
        click.echo(f"no change of job {job} logged" if job else "no change logged")
        return
    for change in found:
        click.echo(change_line(change))
