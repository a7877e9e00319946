"""``jobhost state NAME``: a job's durable state, read from the store; ``--set KEY=VALUE`` and
``--delete KEY`` change it between runs, recorded in the change log."""

from __future__ import annotations

import getpass
import json
from typing import TYPE_CHECKING

import click

from jobhost.cli._app import EXIT_INVALID, EXIT_USAGE, cli, fail
from jobhost.cli._context import catalog_for, opened_store, settings_of
from jobhost.cli._options import change_reason, json_option
from jobhost.operations.jobs import (
    ActionRefused,
    BadStateInput,
    change_state,
    read_state,
    require_known_job,
    state_json,
)
from jobhost.operations.timefmt import short_utc

if TYPE_CHECKING:
    from jobhost.store import Store

__all__ = ["state"]

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
@click.pass_context
def state(
    ctx: click.Context,
    name: str,
    *,
    assignment: tuple[str, str] | None,
    deleted: str | None,
    reason: str | None,
    as_json: bool,
) -> None:
    """Show job NAME's durable state (what its runs keep in context.state), or change it.

    Read from the store: no module is loaded. --set KEY=VALUE or --delete KEY, with --reason,
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
    settings = settings_of(ctx)
    with opened_store(settings, write=changing) as store:
        require_known_job(catalog_for(settings, store, name), store, name)
        if changing:
            key, value = assignment if assignment is not None else (str(deleted), None)
            _change(store, name, key, value, reason=str(reason), as_json=as_json)
        else:
            _show(store, name, as_json=as_json)


def _show(store: Store, name: str, *, as_json: bool) -> None:
    view = read_state(store, name)
    if as_json:
        click.echo(json.dumps(state_json(view), indent=2, ensure_ascii=False))
        return
    if not view.entries:
        click.echo(f"{name}: no state")
        return
    count = f"{len(view.entries)}{'+' if view.more else ''}"
    click.echo(f"{name}: {count} key{'' if count == '1' else 's'}")
    for entry in view.entries:
        click.echo(
            f"  {entry.key} = {_shown(entry.value)}  (updated {short_utc(entry.updated_at)})"
        )
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
    if as_json:
        shown = {"job": name, "key": key, "before": done.before, "after": done.after}
        click.echo(json.dumps({**shown, "changed": done.changed}, indent=2, ensure_ascii=False))
        return
    was = f"was {_shown(done.before)}" if done.before is not None else "was not set"
    if not done.changed:
        click.echo(f"{name}: {key} already is {_shown(value)}: nothing changed")
    elif value is None:
        click.echo(f"{name}: {key} deleted ({was}) by {actor}: {reason}")
    else:
        click.echo(f"{name}: {key} set to {_shown(value)} ({was}) by {actor}: {reason}")


def _shown(value: str | None) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= _SHOWN_VALUE else f"{text[: _SHOWN_VALUE - 3]}..."
