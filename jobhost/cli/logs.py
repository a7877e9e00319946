"""``jobhost logs RUN_ID``: what a job wrote through its logger during one run."""

from __future__ import annotations

import json
import time
from dataclasses import replace
from typing import NoReturn

import click

from jobhost.cli._app import EXIT_INVALID, cli
from jobhost.cli._context import open_store, settings_of
from jobhost.cli._run_ids import typed_run_id
from jobhost.store import Store

__all__ = ["logs"]

_FOLLOW_SECONDS = 0.5


@cli.command()
@click.argument("run_id")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
@click.option(
    "--follow",
    "-f",
    is_flag=True,
    help="Keep printing lines while the run runs; end when it ends.",
)
@click.pass_context
def logs(ctx: click.Context, run_id: str, as_json: bool, follow: bool) -> None:
    """Show the lines run RUN_ID wrote through its job's logger, in order.

    Each line: time (UTC), level, message; an exception's traceback is the last line of a run
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
    settings = settings_of(ctx)
    store = open_store(settings)
    try:
        run_id = typed_run_id(store, run_id)
        if follow:
            _follow(store, run_id, as_json)
        else:
            _print_all(store, run_id, as_json)
    finally:
        store.dispose()


def _print_all(store: Store, run_id: str, as_json: bool) -> None:
    from jobhost.operations.runs import line_text, page_json, read_run_log

    page = read_run_log(store, run_id)
    if page is None:
        _unknown(run_id)
    entries = list(page.entries)
    while True:
        more = read_run_log(store, run_id, after=page.next_after)
        if more is None or not more.entries:
            break
        entries += more.entries
        page = replace(more, entries=entries)
    if as_json:
        click.echo(json.dumps(page_json(page), indent=2, ensure_ascii=False))
        return
    if not entries:
        click.echo(
            f"run {run_id} ({page.run.job_name}, {page.run.outcome}) wrote no lines", err=True
        )
    for entry in entries:
        click.echo(line_text(entry))


def _follow(store: Store, run_id: str, as_json: bool) -> None:
    from jobhost.operations.runs import entry_json, line_text, read_run_log

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
                click.echo(
                    f"run {run_id} ({page.run.job_name}) ended: {page.run.outcome}", err=True
                )
            return
        time.sleep(_FOLLOW_SECONDS)


def _unknown(run_id: str) -> NoReturn:
    click.echo(
        f"jobhost: no run {run_id!r} in the ledger: run ids are in `jobhost history NAME` "
        "(a run purged by retention has gone with its lines)",
        err=True,
    )
    raise SystemExit(EXIT_INVALID)
