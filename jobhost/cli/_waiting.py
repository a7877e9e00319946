"""What the commands that start a run and wait for it share (``trigger``, ``retry``,
``cancel``): the ``--no-wait``, ``--timeout`` and ``--json`` options, and how a manual run's
result is printed and becomes the exit status."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NoReturn

import click

from jobhost.cli._app import EXIT_FAILED, EXIT_OK, EXIT_TIMEOUT

if TYPE_CHECKING:
    from jobhost.operations.runs import TriggerResult

__all__ = ["print_and_exit", "wait_options"]

_Decorator = Callable[[Any], Any]


def wait_options(*, no_wait: str, until: str, beside: tuple[_Decorator, ...] = ()) -> _Decorator:
    """``--no-wait`` (``no_wait`` says what it does), the command's own options ``beside``,
    ``--timeout`` (``until`` says what is waited for without it) and ``--json``, in that order
    (the order ``--help`` lists them in)."""

    def add(command: Any) -> Any:
        for option in reversed(
            (
                click.option("--no-wait", is_flag=True, help=no_wait),
                *beside,
                click.option(
                    "--timeout",
                    type=click.FloatRange(min=0, min_open=True),
                    metavar="SECONDS",
                    help=f"Stop waiting after this long (exit 4); default: {until}.",
                ),
                click.option(
                    "--json", "as_json", is_flag=True, help="Print the result as one JSON object."
                ),
            )
        ):
            command = option(command)
        return command

    return add


def print_and_exit(result: TriggerResult, shown: dict[str, Any], *, as_json: bool) -> NoReturn:
    """Print ``shown`` as JSON, or ``result`` as one line; exit 4 when ``--timeout`` ended the
    wait, 0 when the run succeeded (or was only queued), 1 otherwise."""
    from jobhost.operations.render import stdout_style, trigger_line

    if as_json:
        click.echo(json.dumps(shown, indent=2))
    else:
        click.echo(trigger_line(result, stdout_style()))
    if result.timed_out_waiting:
        raise SystemExit(EXIT_TIMEOUT)
    raise SystemExit(EXIT_OK if result.outcome in {"succeeded", "queued"} else EXIT_FAILED)
