"""The ``--reason`` of every command that changes something, checked as the API checks it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from jobhost.operations.changes import BadReason, checked_reason

__all__ = ["reason_text", "reason_value", "required_reason"]

_F = TypeVar("_F", bound=Callable[..., Any])


def reason_value(_ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
    """A click callback: ``value`` folded, or exit 2 naming --reason when it is too long or
    holds a control character (an escape sequence would reach every later ``jobhost changes``).
    A blank or absent reason is left to the command, which knows whether one is required."""
    if value is None or not value.strip():
        return value
    return reason_text(value)


def required_reason(example: str, help: str = "Why (required).") -> Callable[[_F], _F]:
    """``--reason TEXT``, required and checked: every change is in the change log, and an
    empty reason tells the next operator nothing (``example`` shows one)."""

    def check(_ctx: click.Context, _param: click.Parameter, value: str) -> str:
        if not value.strip():
            raise click.BadParameter(f"must say why, e.g. --reason {example!r}")
        return reason_text(value)

    return click.option("--reason", metavar="TEXT", required=True, callback=check, help=help)


def reason_text(value: str) -> str:
    """``value`` folded; :class:`click.BadParameter` (exit 2) saying what is wrong with it."""
    try:
        return checked_reason(value)
    except BadReason as error:
        raise click.BadParameter(str(error), param_hint="--reason") from None
