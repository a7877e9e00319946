"""Reading the operator's manual (``docs/operations/``) and the CLI it documents, for the
tests that keep the two in step."""

from __future__ import annotations

import re
from datetime import timedelta
from functools import cache
from pathlib import Path

import click
from jobhost_contracts import format_duration

from jobhost.cli import cli
from jobhost.config import Settings
from tests.commands import register_commands

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs" / "operations"
PAGES = (
    "README.md",
    "running.md",
    "commands.md",
    "settings.md",
    "semantics.md",
    "observability.md",
    "dashboard.md",
    "runbook.md",
    "writing-a-module.md",
    "publish.md",
    "api.md",
)
HELP_OPTIONS = frozenset({"-h", "--help"})


@cache
def page(name: str) -> str:
    return (DOCS / name).read_text(encoding="utf-8")


def manual() -> str:
    return "\n".join(page(name) for name in PAGES)


def sections(text: str, level: str) -> dict[str, str]:
    """Heading text -> body, for headings of exactly ``level`` (``##`` or ``###``)."""
    parts = re.split(rf"^{level} (.+)$", text, flags=re.MULTILINE)
    return {parts[i].strip(): parts[i + 1] for i in range(1, len(parts) - 1, 2)}


def fenced_blocks(text: str, language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```", text, flags=re.MULTILINE | re.DOTALL)


def normalised(text: str) -> str:
    return " ".join(text.split())


# -- the code's side -----------------------------------------------------------------------------


def commands() -> dict[str, click.Command]:
    """Every command and group below ``jobhost``, by path (``db upgrade``)."""
    register_commands()
    found: dict[str, click.Command] = {}

    def walk(group: click.Group, prefix: str) -> None:
        for name, command in group.commands.items():
            path = f"{prefix}{name}"
            found[path] = command
            if isinstance(command, click.Group):
                walk(command, f"{path} ")

    walk(cli, "")
    return found


def leaf_commands() -> dict[str, click.Command]:
    return {p: c for p, c in commands().items() if not isinstance(c, click.Group)}


def options(command: click.Command) -> list[str]:
    names = [o for p in command.params for o in [*p.opts, *p.secondary_opts] if o.startswith("-")]
    return [name for name in names if name not in HELP_OPTIONS]


def arguments(command: click.Command) -> list[str]:
    return [p.human_readable_name for p in command.params if isinstance(p, click.Argument)]


def documented_default(name: str) -> str:
    """A setting's default as settings.md writes it."""
    field = Settings.model_fields[name]
    value = field.default_factory() if field.default_factory is not None else field.default  # type: ignore[call-arg]
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, timedelta):
        return format_duration(value)
    if isinstance(value, list | dict) and not value:
        return "empty"
    return str(value)
