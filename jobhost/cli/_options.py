"""What several commands share: ``--json``, ``--limit``, ``--reason`` checked as the API checks
it, a typed run id."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import click

from jobhost.cli._app import EXIT_USAGE, fail
from jobhost.operations.changes import BadReason, checked_reason
from jobhost.operations.runs import AmbiguousRunId, resolve_run_id
from jobhost.operations.timefmt import short_utc
from jobhost.store import Store

__all__ = [
    "change_reason",
    "json_option",
    "json_shown",
    "limit_option",
    "typed_run_id",
]

_Decorator = Callable[[Any], Any]


def json_option(help: str = "Print one JSON object instead of text.") -> _Decorator:
    return click.option("--json", "as_json", is_flag=True, help=help)


def json_shown(as_json: bool, data: Any, *, ensure_ascii: bool = True) -> bool:
    """With ``--json``, print ``data`` as indented JSON; whether it did."""
    if as_json:
        click.echo(json.dumps(data, indent=2, ensure_ascii=ensure_ascii))
    return as_json


def limit_option(help: str, *, default: int = 20, most: int = 10_000) -> _Decorator:
    type_ = click.IntRange(1, most)
    return click.option("--limit", type=type_, default=default, show_default=True, help=help)


def change_reason(
    example: str | None, help: str = "Why (required).", *, required: bool = True
) -> _Decorator:
    """``--reason TEXT``, folded; exit 2 when too long or holding a control character (it would
    reach every later ``jobhost changes``). With an ``example``, never blank: an empty reason
    tells the next operator nothing; without one, a blank reason is the command's to judge."""

    def check(_ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
        if value is None or (example is None and not value.strip()):
            return value
        if not value.strip():
            raise click.BadParameter(f"must say why, e.g. --reason {example!r}")
        try:
            return checked_reason(value)
        except BadReason as error:
            raise click.BadParameter(str(error), param_hint="--reason") from None

    return click.option("--reason", metavar="TEXT", required=required, callback=check, help=help)


def typed_run_id(store: Store, typed: str) -> str:
    """The run ``typed`` names, as a whole id or a unique prefix (commands.md, "Run ids"); an
    ambiguous prefix lists its runs and exits 2."""
    try:
        return resolve_run_id(store, typed)
    except AmbiguousRunId as ambiguous:
        lines = [f"jobhost: {ambiguous}; type more of it:"]
        lines += [
            f"  {c.id}  {c.job_name}  {c.outcome}  queued {short_utc(c.queued_at)}"
            for c in ambiguous.candidates
        ]
        if ambiguous.more:
            lines.append("  ... and more")
        fail("\n".join(lines), EXIT_USAGE)
