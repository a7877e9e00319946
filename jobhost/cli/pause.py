"""``jobhost pause``, ``resume`` (for every replica at once) and ``state``: a job's durable
state, read from the store and changed between runs."""

from __future__ import annotations

import getpass
import json
from typing import TYPE_CHECKING

import click

from jobhost.catalog import Catalog
from jobhost.cli._app import EXIT_INVALID, EXIT_USAGE, cli, fail
from jobhost.cli._context import catalog_for, load_catalog, opened_store, settings_of
from jobhost.cli._options import change_reason, json_option, json_shown
from jobhost.operations.changes import printable
from jobhost.operations.jobs import (
    ActionRefused,
    BadStateInput,
    change_state,
    jobs_matching,
    pause_jobs,
    read_state,
    require_known_job,
    resume_jobs,
    state_json,
)
from jobhost.operations.timefmt import short_utc

if TYPE_CHECKING:
    from jobhost.config import Settings
    from jobhost.store import Store

__all__ = ["pause", "resume", "state"]

_MODULE = click.option(
    "--module",
    "modules",
    metavar="M",
    multiple=True,
    help="Instead of NAME: every job of module M (repeatable).",
)
_MATCH = click.option(
    "--match",
    "patterns",
    metavar="GLOB",
    multiple=True,
    help="Instead of NAME: every job whose name matches GLOB, e.g. 'billing.*' (repeatable).",
)


@cli.command()
@click.argument("name", required=False)
@change_reason(
    "billing migration until 06:00", "Why; shown by `jobhost report` (required, not blank)."
)
@_MODULE
@_MATCH
def pause(
    name: str | None,
    reason: str,
    modules: tuple[str, ...],
    patterns: tuple[str, ...],
) -> None:
    """It keeps its schedule: each occurrence it misses is recorded `missed` with reason
    `paused`. The operating-system user is recorded as who paused it, in the job's row and in
    the change log (`jobhost changes`). With --module or --match instead of NAME, every job
    they select is paused with the one reason, each with its own change-log entry.

    Exit status: 0 (also when it already was paused); 2 for an unknown job, or when --module
    and --match select no job.
    """
    settings = settings_of()
    with opened_store(settings, write=True) as store:
        catalog, jobs = _chosen(settings, store, name, modules, patterns)
        done = pause_jobs(store, catalog, jobs, actor=getpass.getuser(), reason=reason)
    for one in done:
        row = one.row
        verb = "paused" if one.changed else "already paused"
        click.echo(
            f"{one.job} {verb} by {row.paused_by} at {short_utc(row.paused_at)}: "
            f"{row.paused_reason}"
        )
    if name is None:
        click.echo(f"paused {sum(1 for d in done if d.changed)} of {len(done)} jobs")


@cli.command()
@click.argument("name", required=False)
@change_reason("migration done", "Why; written to the change log (required).")
@_MODULE
@_MATCH
def resume(
    name: str | None,
    reason: str,
    modules: tuple[str, ...],
    patterns: tuple[str, ...],
) -> None:
    """With --module or --match instead of NAME, every job they select is resumed with the one
    reason, each with its own change-log entry.

    Exit status: 0 (also when it was not paused); 2 for an unknown job, without --reason, or
    when --module and --match select no job.
    """
    settings = settings_of()
    user = getpass.getuser()
    with opened_store(settings, write=True) as store:
        _, jobs = _chosen(settings, store, name, modules, patterns)
        done = resume_jobs(store, jobs, actor=user, reason=reason)
    for job, one in zip(jobs, done, strict=True):
        if one is None or not one.changed:
            click.echo(f"{job} was not paused")
            continue
        row = one.row
        click.echo(
            f"{job} resumed at {short_utc(one.at)} by {user} (paused by "
            f"{row.paused_by} at {short_utc(row.paused_at)}: {row.paused_reason})"
        )
    if name is None:
        changed = sum(1 for d in done if d is not None and d.changed)
        click.echo(f"resumed {changed} of {len(done)} jobs")


def _chosen(
    settings: Settings,
    store: Store,
    name: str | None,
    modules: tuple[str, ...],
    patterns: tuple[str, ...],
) -> tuple[Catalog, list[str]]:
    """The catalog and the jobs to act on: job ``name``, or those --module and --match select."""
    if name is not None:
        if modules or patterns:
            raise click.UsageError(f"give job {name} or --module/--match, not both")
        catalog = catalog_for(settings, store, name)
        return catalog, [require_known_job(catalog, store, name)]
    catalog = load_catalog(settings)
    if not modules and not patterns:
        raise click.UsageError("name a job, or select jobs with --module M or --match GLOB")
    jobs = jobs_matching(catalog, modules, patterns)
    if not jobs:
        known = ", ".join(sorted({s.module for s in catalog.jobs.values()})) or "none"
        asked = [*(f"--module {m}" for m in modules), *(f"--match {p}" for p in patterns)]
        fail(f"no job matches {' '.join(asked)} (modules: {known})", EXIT_USAGE)
    return catalog, jobs


_SHOWN_VALUE = 200
"""Characters of a value the text shows (all of it: --json)."""


def _assignment(
    _ctx: click.Context, _param: click.Parameter, value: str | None
) -> tuple[str, str] | None:
    if value is None:
        return None
    key, equals, text = value.partition("=")
    if not equals or not key.strip():
        raise click.BadParameter(f"{value!r} is not KEY=VALUE, e.g. --set count=10")
    return key, text


@cli.command()
@click.argument("name")
@click.option(
    "--set",
    "assignment",
    metavar="KEY=VALUE",
    callback=_assignment,
    help="Set KEY to VALUE (text) between runs.",
)
@click.option("--delete", "deleted", metavar="KEY", help="Remove KEY between runs.")
@change_reason(
    "reset after the replay, INC-7",
    "Why (required with --set and --delete); in the change log.",
    required=False,
)
@json_option("Print JSON instead of text.")
def state(
    name: str,
    *,
    assignment: tuple[str, str] | None,
    deleted: str | None,
    reason: str | None,
    as_json: bool,
) -> None:
    """Read from the store: no module is loaded. --set KEY=VALUE or --delete KEY, with --reason,
    change one key through the fence a run uses, refused while a run of the job is running;
    the change is in the change log (`jobhost changes`, actions state-set and state-delete).

    JSON: {"job", "state": [{"key", "value", "updated_at", "fencing_token"}], "more"}; after
    a change {"job", "key", "before", "after", "changed"}.

    Exit status: 0; 2 for an unknown job, a bad option, or --delete of a key the job does not
    have; 3 refused (a run of the job is running: the message names it).
    """
    if assignment is not None and deleted is not None:
        raise click.UsageError("give --set or --delete, not both")
    changing = assignment is not None or deleted is not None
    if changing and reason is None:
        raise click.UsageError("--set and --delete need --reason: say why, for the change log")
    if reason is not None and not changing:
        raise click.UsageError("--reason goes with --set or --delete")
    settings = settings_of()
    with opened_store(settings, write=changing) as store:
        require_known_job(catalog_for(settings, store, name), store, name)
        if changing:
            key, value = assignment if assignment is not None else (str(deleted), None)
            _change(store, name, key, value, reason=str(reason), as_json=as_json)
        else:
            _show(store, name, as_json=as_json)


def _show(store: Store, name: str, *, as_json: bool) -> None:
    view = read_state(store, name)
    if json_shown(as_json, state_json(view), ensure_ascii=False):
        return
    if not view.entries:
        click.echo(f"{name}: no state")
        return
    count = f"{len(view.entries)}{'+' if view.more else ''}"
    click.echo(f"{name}: {count} key{'' if count == '1' else 's'}")
    for entry in view.entries:
        key, updated = printable(entry.key), short_utc(entry.updated_at)  # a job writes any key
        click.echo(f"  {key} = {_shown(entry.value)}  (updated {updated})")
    if view.more:
        click.echo("  ... more keys: --json lists the first 1000 in full")


def _change(
    store: Store, name: str, key: str, value: str | None, *, reason: str, as_json: bool
) -> None:
    actor = getpass.getuser()
    try:
        done = change_state(store, name, key, value, actor=actor, reason=reason)
    except BadStateInput as bad:
        fail(f"jobhost: {bad}", EXIT_USAGE)
    except ActionRefused as refused:
        fail(f"refused: {refused}", EXIT_USAGE if refused.unknown else EXIT_INVALID)
    if value is None and done.before is None:
        fail(f"jobhost: job {name} has no state key {key!r}: nothing deleted", EXIT_USAGE)
    shown = {"job": name, "key": key, "before": done.before, "after": done.after}
    if json_shown(as_json, {**shown, "changed": done.changed}, ensure_ascii=False):
        return
    was = f"was {_shown(done.before)}" if done.before is not None else "was not set"
    key = printable(key)
    if not done.changed:
        click.echo(f"{name}: {key} already is {_shown(value)}: nothing changed")
    elif value is None:
        click.echo(f"{name}: {key} deleted ({was}) by {actor}: {reason}")
    else:
        click.echo(f"{name}: {key} set to {_shown(value)} ({was}) by {actor}: {reason}")


def _shown(value: str | None) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= _SHOWN_VALUE else f"{text[: _SHOWN_VALUE - 3]}..."
