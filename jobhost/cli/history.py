"""``jobhost history``, ``logs`` and ``changes``: a job's runs, a run's lines, the change log."""

from __future__ import annotations

import json
import time
from dataclasses import replace
from typing import NoReturn

import click

from jobhost.cli._app import EXIT_INVALID, cli, fail, to_stderr
from jobhost.cli._context import catalog_for, opened_store, settings_of
from jobhost.cli._options import json_option, json_shown, limit_option, typed_run_id
from jobhost.operations.changes import change_json, change_line
from jobhost.operations.jobs import require_known_job
from jobhost.operations.runs import (
    LAST_LINES,
    OUTCOMES,
    entry_json,
    history_json,
    line_text,
    page_json,
    read_run_log,
)
from jobhost.records import ChangeSearch
from jobhost.store import Store
from jobhost.store.snapshot import JobRead

__all__ = ["changes", "history", "logs"]

_FOLLOW_SECONDS = 0.5


@cli.command()
@click.argument("name")
@limit_option("How many rows to show.")
@click.option("--outcome", type=click.Choice(OUTCOMES), help="Only rows with this outcome.")
@json_option()
@click.option(
    "--logs",
    "with_logs",
    is_flag=True,
    help=f"Under each run, the last {LAST_LINES} lines it wrote (all: jobhost logs RUN_ID).",
)
def history(
    name: str,
    *,
    limit: int,
    outcome: str | None,
    as_json: bool,
    with_logs: bool,
) -> None:
    """Each row: occurrence, attempt, source, host, start, duration, outcome, error (or the
    reason an occurrence did not run) and trace id; for a run that fanned out over units, their
    counts. JSON: {"job": NAME, "runs": [{"run_id", "occurrence", "attempt", "source", "host",
    "requested_by", "queued_at", "started_at", "finished_at", "duration_ms", "outcome",
    "reason", "error_type", "error", "trace_id", "units", "backfill_id", "cancel", "result"}]}
    ("result": the executor's Success value, at most 4 kB of JSON); with --logs each run also has
    "logs": its last lines, as `jobhost logs --json` writes them.

    Exit status: 0; 2 for an unknown job or a bad option.
    """
    from jobhost.operations.render import history_lines, stdout_style

    settings = settings_of()
    with opened_store(settings) as store:
        require_known_job(catalog_for(settings, store, name), store, name)
        count = LAST_LINES if with_logs else 0
        page = store.job_page(JobRead(name, history=limit, outcome=outcome, lines=count))
        rows, lines = page.history, page.lines
    logs = lines if with_logs else None
    if as_json:
        document = history_json(name, rows)
        if logs is not None:
            for run in document["runs"]:
                run["logs"] = [entry_json(e) for e in logs.get(run["run_id"], [])]
        click.echo(json.dumps(document, indent=2))
    else:
        click.echo("\n".join(history_lines(name, rows, stdout_style(), logs)))


@cli.command()
@click.argument("run_id")
@json_option("Print JSON instead of text.")
@click.option(
    "--follow", "-f", is_flag=True, help="Keep printing lines while the run runs; end when it ends."
)
def logs(run_id: str, as_json: bool, follow: bool) -> None:
    """Each line: time (UTC), level, message; an exception's traceback is the last line of a run
    that raised. A run keeps its first and its last lines within the settings run_log_lines and
    run_log_bytes; the lines between are counted: "… 198,000 lines (19.4 MB) dropped …". Run
    ids are in `jobhost history NAME`; a unique start of one (8 characters or more) will do.

    JSON: {"run_id", "job", "outcome", "running", "lines": [{"seq", "time", "level",
    "message"} or {"dropped": {"lines", "bytes"}}], "next_after"}. With --follow --json, one
    JSON object a line: each entry of "lines" as it arrives, then {"end": {"run_id",
    "outcome"}}.

    Exit status: 0; 2 a prefix that starts several run ids (they are listed); 3 for a run id
    the ledger does not know.
    """
    with opened_store(settings_of()) as store:
        run_id = typed_run_id(store, run_id)
        if follow:
            _follow(store, run_id, as_json)
        else:
            _print_all(store, run_id, as_json)


@cli.command()
@click.option("--job", "job", metavar="NAME", default=None, help="Only this job's changes.")
@limit_option("The newest N changes.")
@json_option()
def changes(job: str | None, limit: int, as_json: bool) -> None:
    """Each also says from where: cli, api or dashboard, and over HTTP the client's address.
    Reads only the store. JSON: {"changes": [{"id", "at", "actor", "action", "job", "before",
    "after", "reason", "surface", "address"}]}, the shape of GET /api/v1/changes.

    Exit status: 0 (also when there is no change to show).
    """
    with opened_store(settings_of()) as store:
        found = store.search_changes(ChangeSearch(job=job), limit)[::-1]
    if json_shown(as_json, {"changes": [change_json(c) for c in found]}):
        return
    if not found:
        click.echo(f"no change of job {job} logged" if job else "no change logged")
        return
    for change in found:
        click.echo(change_line(change))


def _print_all(store: Store, run_id: str, as_json: bool) -> None:
    page = read_run_log(store, run_id)
    if page is None:
        _unknown(run_id)
    entries = list(page.entries)
    while (more := read_run_log(store, run_id, after=page.next_after)) and more.entries:
        entries += more.entries
        page = replace(more, entries=entries)
    if json_shown(as_json, page_json(page), ensure_ascii=False):
        return
    if not entries:
        to_stderr(f"run {run_id} ({page.run.job_name}, {page.run.outcome}) wrote no lines")
    for entry in entries:
        click.echo(line_text(entry))


def _follow(store: Store, run_id: str, as_json: bool) -> None:
    after = 0
    while True:
        page = read_run_log(store, run_id, after=after)
        if page is None:
            _unknown(run_id)
        for entry in page.entries:
            click.echo(
                json.dumps(entry_json(entry), ensure_ascii=False) if as_json else line_text(entry)
            )
        after = page.next_after
        if page.entries:
            continue  # more may be waiting beyond one page
        if not page.running:
            if as_json:
                click.echo(json.dumps({"end": {"run_id": run_id, "outcome": page.run.outcome}}))
            else:
                to_stderr(f"run {run_id} ({page.run.job_name}) ended: {page.run.outcome}")
            return
        time.sleep(_FOLLOW_SECONDS)


def _unknown(run_id: str) -> NoReturn:
    fail(
        f"jobhost: no run {run_id!r} in the ledger: run ids are in `jobhost history NAME` "
        "(a run purged by retention has gone with its lines)",
        EXIT_INVALID,
    )
