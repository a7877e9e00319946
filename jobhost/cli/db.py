"""``jobhost db upgrade``, ``db current`` and ``db check``: the store's schema and its rows."""

from __future__ import annotations

import click

from jobhost.cli._app import EXIT_FAILED, cli
from jobhost.cli._context import (
    current_revision,
    load_catalog,
    migrate_store,
    opened_store,
    settings_of,
)
from jobhost.store import Store, StoreError, head_revision
from jobhost.store.migrate import check_not_newer


@cli.group()
def db() -> None:
    """The store's schema and rows: apply migrations, show the revision, audit the rows."""


@db.command("upgrade")
@click.pass_context
def db_upgrade(ctx: click.Context) -> None:
    """Apply pending migrations (safe to run from several replicas at once)."""
    before, after = migrate_store(settings_of(ctx), create=True)
    if before == after:
        click.echo(f"schema already at revision {after}")
    else:
        click.echo(f"schema upgraded from {before or 'empty'} to {after}")


@db.command("current")
@click.pass_context
def db_current(ctx: click.Context) -> None:
    """Show the store's schema revision and the newest one this version ships."""
    settings = settings_of(ctx)
    with opened_store(settings, require_current=False) as store:
        current = current_revision(settings, store)
    check_not_newer(current)  # a newer schema: exit 3, "upgrade jobhost"
    head = head_revision()
    state = "current" if current == head else "needs `jobhost db upgrade`"
    click.echo(f"store revision {current or 'none'}, newest {head}: {state}")


@db.command("check")
@click.option(
    "--full",
    is_flag=True,
    help="Read every row of every table (finished runs too), streaming; may take minutes.",
)
@click.pass_context
def db_check(ctx: click.Context, full: bool) -> None:
    """Find stored values a host cannot use, each with its row and the fix.

    Without --full: the rows a host reads (schedules, live runs, hosts, the
    signal row), in SQL, bounded: the check `jobhost health` runs as store-integrity. With
    --full: also every value of every other row, streamed in batches with bounded memory; it
    says how far it got, also when it is interrupted.

    Exit status: 0 when every checked row is readable, 1 when one is not or the audit stopped
    early.
    """
    from jobhost.rules import FiringRules

    settings = settings_of(ctx)
    implausible = FiringRules(load_catalog(settings).jobs, settings.lease_duration)
    with opened_store(settings) as store:
        live = store.health_rows(implausible.implausible_lease)[1].integrity
        click.echo(f"checked {live.coverage()}: {live.total} row(s) a host cannot use")
        for row in live.found:
            click.echo(f"  {row.line()}")
        if live.total > len(live.found):
            click.echo(f"  (and {live.total - len(live.found)} more)")
        bad = live.total > 0
        if full:
            bad = _full_audit(store, {row.line() for row in live.found}) or bad
    if bad:
        raise SystemExit(EXIT_FAILED)


_SHOWN = 50


def _full_audit(store: Store, seen: set[str]) -> bool:
    """Stream every table; True when a problem was found or the audit did not finish."""
    problems = shown = 0
    done: list[str] = []
    table, rows = "schedules", 0
    try:
        for step in store.audit_store():
            table, rows = step.table, step.rows
            for problem in step.problems:
                problems += 1
                if shown < _SHOWN and problem.line() not in seen:
                    shown += 1
                    click.echo(f"  {problem.line()}")
            if step.finished:
                done.append(f"{table} {rows:,}")
                click.echo(f"{table}: {rows:,} row(s) read")
    except (KeyboardInterrupt, StoreError) as error:
        why = "interrupted" if isinstance(error, KeyboardInterrupt) else "the store failed"
        click.echo(
            f"full audit stopped ({why}) in {table} after {rows:,} row(s); finished: "
            f"{', '.join(done) or 'none'}; {problems} problem(s) so far"
        )
        return True
    more = f" ({problems - shown} more not shown)" if problems > shown else ""
    click.echo(f"full audit finished: {', '.join(done)} row(s) read, {problems} problem(s){more}")
    return problems > 0
