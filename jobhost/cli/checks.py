"""``jobhost validate``, ``jobhost plan``, ``jobhost health`` and ``jobhost db``: the checks and
the migration before and after a deploy. Is the job catalog complete and healthy, what would the
next host start change in the store, is the store at the current schema with rows a host can
use, and does every check of the release gate pass?

``validate`` lists, before its summary, what it loaded: each plugin, its modules, and each
job's state. A module that nobody configured declares its jobs disabled; saying so there, with
the reason, is how an operator learns that a module's jobs are off without reading the report.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import asdict
from typing import Any

import click

from jobhost.catalog import Catalog, JobSpec
from jobhost.cli._app import EXIT_FAILED, EXIT_INVALID, cli, to_stderr
from jobhost.cli._context import (
    current_revision,
    load_catalog,
    migrate_store,
    opened_store,
    refuse_invalid,
    settings_of,
)
from jobhost.cli._options import json_option, json_shown
from jobhost.config import Settings
from jobhost.store import Store, StoreError, head_revision
from jobhost.store.migrate import is_current

__all__ = ["db", "health", "plan", "validate"]


@cli.command()
@json_option("Print one JSON object instead of lines.")
def validate(as_json: bool) -> None:
    """Exit status: 0 when the catalog is clean, 3 when it has problems (or the configuration
    is invalid). Runtime jobs in the configured store are checked too, when it is
    reachable. Before the summary it lists what it loaded: each plugin, its modules, and
    each job with enabled or disabled (and why), its trigger and its group. The JSON form
    is {"ok": ..., "jobs": N, "problems": [{"job", "module", "code", "message"}, ...],
    "warnings": [same shape], "plugins": [{"plugin", "modules", "jobs": [{"name",
    "module", "enabled", "disabled_because", "trigger", "group"}, ...]}, ...]}; warnings
    (a concurrency limit no job uses) do not change the exit status.
    """
    settings = settings_of()
    # The store's runtime jobs too: a declaration that took a runtime job's name is a problem.
    catalog = load_catalog(settings)
    for caveat in settings.warnings():
        to_stderr(f"warning: {caveat}")
    plugins = _loaded(catalog, settings)
    shown = {
        "ok": catalog.ok,
        "jobs": len(catalog.jobs),
        "problems": [asdict(p) for p in catalog.problems],
        "warnings": [asdict(p) for p in catalog.warnings],
        "plugins": plugins,
    }
    if not json_shown(as_json, shown):
        for line in [
            *(problem.line() for problem in catalog.problems),
            *(f"warning: {warning.line()}" for warning in catalog.warnings),
            *_loaded_lines(plugins),
        ]:
            click.echo(line)
        jobs, problems = len(catalog.jobs), len(catalog.problems)
        click.echo(f"{jobs} job{'s' * (jobs != 1)}, {problems} problem{'s' * (problems != 1)}")
    if not catalog.ok:
        # SystemExit, not ctx.exit: with standalone_mode=False click turns ctx.exit into a
        # return value of cli.main, which jobhost.cli.main does not pass on.
        raise SystemExit(EXIT_INVALID)


@cli.command()
@json_option()
@click.option("--strict", is_flag=True, help="Exit 1 when anything would change.")
def plan(as_json: bool, strict: bool) -> None:
    """Lists the jobs a host started now would add, change (trigger, zone or enabled state,
    old -> new) and mark orphaned. JSON: {"changes": bool, "added": [{"job", "module",
    "after"}], "changed": [{"job", "before", "after", "trigger_changed"}], "orphaned":
    [{"job", "module", "before"}]}.

    Exit status: 0; 1 with --strict when anything would change; 3 when the catalog is
    invalid (a plan from it would be wrong).
    """
    from jobhost.operations.plan import plan_json, stored_state
    from jobhost.operations.render import catalog_lines, plan_lines, stdout_style

    settings = settings_of()
    catalog = load_catalog(settings)
    if not catalog.ok:
        refuse_invalid(catalog, "jobhost: the job catalog is invalid; no plan until it is fixed:")
    with opened_store(settings, require_current=False) as store:
        revision = store.current_revision()
        if not is_current(revision):
            to_stderr(
                f"note: the store's schema is at {revision or 'nothing yet'}; `jobhost run` "
                f"migrates it to {head_revision()} first"
            )
        rows, hosts = stored_state(store)
    shown = plan_json(catalog, rows, hosts)
    if not json_shown(as_json, shown):
        click.echo("\n".join([*plan_lines(shown, stdout_style()), *catalog_lines(shown, hosts)]))
    if strict and shown["changes"]:
        raise SystemExit(EXIT_FAILED)


@cli.command()
@json_option()
@click.option(
    "--no-hosts", is_flag=True, help="Do not require a live host (a check before a deploy)."
)
@click.option(
    "--check-catalog",
    is_flag=True,
    help="Load the modules and validate their catalog (the catalog check).",
)
def health(as_json: bool, no_hosts: bool, check_catalog: bool) -> None:
    """Checks: store (reachable, schema current), catalog (valid), critical-jobs-scheduled
    (enabled, not paused, next fire not behind), live-host (at least one; skipped with
    --no-hosts), leases (none expired but held), critical-jobs-last-run (not failed, not
    overdue), clock-skew (every live host within 1s of the database). JSON: {"ok": bool,
    "checks": [{"name", "ok", "detail"}]}.

    The checks read the store alone, loading no module: the catalog check names the catalog
    version the store holds. --check-catalog loads this installation's modules instead and
    fails the catalog check on any problem in them (see `jobhost validate`).

    Exit status: 0 when every check passes, 1 otherwise; 3 when the configuration cannot be
    loaded at all.
    """
    from jobhost.operations.health import check_health
    from jobhost.operations.render import health_lines, stdout_style

    settings = settings_of()
    catalog = load_catalog(settings) if check_catalog else None
    with opened_store(settings, require_current=False, missing_ok=True) as store:
        result = check_health(settings, catalog, store, hosts=not no_hosts)
    if not json_shown(as_json, result.to_json()):
        click.echo("\n".join(health_lines(result, stdout_style())))
    if not result.ok:
        raise SystemExit(EXIT_FAILED)


def _loaded(catalog: Catalog, settings: Settings) -> list[dict[str, Any]]:
    """One entry per plugin, in load order (then any other plugin a job came from)."""
    by_plugin: dict[str, list[JobSpec]] = {name: [] for name in catalog.plugins}
    for spec in catalog.jobs.values():
        if spec.name not in catalog.runtime:
            by_plugin.setdefault(spec.plugin, []).append(spec)
    return [
        {
            "plugin": plugin,
            "modules": sorted({spec.module for spec in specs}),
            "jobs": [
                {
                    "name": spec.name,
                    "module": spec.module,
                    "enabled": spec.enabled,
                    "disabled_because": _disabled_because(spec, settings),
                    "trigger": spec.trigger.describe(),
                    "group": spec.concurrency_group,
                }
                for spec in specs
            ],
        }
        for plugin, specs in by_plugin.items()
    ]


def _loaded_lines(plugins: list[dict[str, Any]]) -> Iterator[str]:
    """``plugin files: module files`` then one indented line per job."""
    for entry in plugins:
        modules, jobs = entry["modules"], entry["jobs"]
        if not jobs:
            yield f"plugin {entry['plugin']}: no jobs"
            continue
        noun = "module" if len(modules) == 1 else "modules"
        yield f"plugin {entry['plugin']}: {noun} {', '.join(modules)}"
        for job in jobs:
            state = "enabled" if job["enabled"] else f"disabled ({job['disabled_because']})"
            group = f", group {job['group']}" if job["group"] else ""
            yield f"  {job['name']}: {state}, {job['trigger']}{group}"


def _disabled_because(spec: JobSpec, settings: Settings) -> str | None:
    """Why ``spec`` does not run on its schedule, or None when it does."""
    if spec.enabled:
        return None
    if spec.override is not None and spec.override.enabled is False:
        return f'[jobs."{spec.name}"] enabled = false'
    section = spec.declaration.configuration_source or spec.module
    if section not in settings.modules:
        return f"[modules.{section}] is not configured"
    return "declared disabled"


@cli.group()
def db() -> None:
    pass


@db.command("upgrade")
def db_upgrade() -> None:
    """Apply pending migrations (safe to run from several replicas at once)."""
    before, after = migrate_store(settings_of(), create=True)
    if before == after:
        click.echo(f"schema already at revision {after}")
    else:
        click.echo(f"schema upgraded from {before or 'empty'} to {after}")


@db.command("current")
def db_current() -> None:
    """Show the store's schema revision and the newest one this version ships."""
    settings = settings_of()
    with opened_store(settings, require_current=False) as store:
        current = current_revision(settings, store)
    head = head_revision()
    state = "current" if current == head else "needs `jobhost db upgrade`"
    click.echo(f"store revision {current or 'none'}, newest {head}: {state}")


@db.command("check")
@click.option(
    "--full",
    is_flag=True,
    help="Read every row of every table (finished runs too), streaming; may take minutes.",
)
def db_check(full: bool) -> None:
    """Find stored values a host cannot use, each with its row and the fix.

    Without --full: the rows a host reads (schedules, live runs, hosts, the
    signal row), in SQL, bounded: the check `jobhost health` runs as store-integrity. With
    --full: also every value of every other row, streamed in batches with bounded memory; it
    says how far it got, also when it is interrupted.

    Exit status: 0 when every checked row is readable, 1 when one is not or the audit stopped
    early.
    """
    from jobhost.rules import FiringRules

    settings = settings_of()
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
