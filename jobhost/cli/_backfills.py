"""``jobhost backfill --list | --show ID | --cancel ID``: the backfills in the store."""

from __future__ import annotations

import json
from typing import NoReturn

import click

from jobhost.cli._app import EXIT_INVALID
from jobhost.operations.backfills import backfill_json
from jobhost.operations.timefmt import iso_utc
from jobhost.records import BackfillRecord
from jobhost.store import Store

__all__ = ["cancel_one", "list_all", "show_one"]


def list_all(store: Store, *, as_json: bool) -> None:
    """The newest backfills first, one a line (JSON: a list of objects)."""
    found = store.list_backfills()
    if as_json:
        click.echo(json.dumps([backfill_json(r) for r in found], indent=2))
        return
    if not found:
        click.echo("no backfills in the store", err=True)
    for record in found:
        click.echo(_line(record))


def show_one(store: Store, backfill_id: str, *, as_json: bool) -> None:
    """One backfill with each of its occurrences and where it stands."""
    record, items = store.backfill_with_items(backfill_id)
    if record is None:
        _unknown(backfill_id)
    if as_json:
        shown = backfill_json(record)
        shown["items"] = [
            {"occurrence": iso_utc(o), "state": state, "run_id": run_id}
            for o, state, run_id in items
        ]
        click.echo(json.dumps(shown, indent=2))
        return
    click.echo(_line(record))
    if record.reason:
        click.echo(f"  reason: {record.reason}")
    for occurrence, state, run_id in items:
        click.echo(f"  {iso_utc(occurrence)}  {state:<9}  {run_id or '-'}")


def cancel_one(store: Store, backfill_id: str, *, actor: str, reason: str | None) -> None:
    """Cancel the backfill: no new occurrence starts; its runs in flight finish. Without a
    reason, exit 2: the cancel is in the change log, where an empty reason tells no one why."""
    from jobhost.operations.backfills import cancel_backfill

    if not reason:
        raise click.UsageError(
            "--cancel needs --reason TEXT: say why, for the change log "
            "(e.g. --reason 'wrong range, INC-7')"
        )
    record = cancel_backfill(store, backfill_id, actor=actor, reason=reason)
    if record is None:
        _unknown(backfill_id)
    running = record.counts.get("claimed", 0)
    click.echo(
        f"backfill {backfill_id} of {record.job_name}: {record.state}; "
        f"{record.settled} of {record.selected} done, {running} still running"
    )


def _line(record: BackfillRecord) -> str:
    counts = record.counts
    return (
        f"{record.id}  {record.job_name}  {record.state:<9}  {iso_utc(record.range_from)} → "
        f"{iso_utc(record.range_to)}  {record.mode}  {record.settled}/{record.selected} done "
        f"({counts.get('succeeded', 0)} ok, {counts.get('failed', 0)} failed, "
        f"{counts.get('claimed', 0)} running)  by {record.actor}"
    )


def _unknown(backfill_id: str) -> NoReturn:
    click.echo(
        f"error: no backfill {backfill_id!r} in the store; jobhost backfill --list shows them",
        err=True,
    )
    raise SystemExit(EXIT_INVALID)
