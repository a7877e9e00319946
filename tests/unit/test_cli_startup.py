"""``jobhost --version`` and ``--help`` answer without importing the store, the settings or any
command: they cost Python's start-up, not the application's."""

from __future__ import annotations

import subprocess
import sys

import click
import pytest

from jobhost.cli import cli
from jobhost.cli._app import _MODULES, _SHORT_HELP
from tests.commands import register_commands

_PROBE = (
    "import atexit, sys; atexit.register(lambda: print('LOADED', ' '.join(sorted(m for m in "
    "sys.modules if m.split('.')[0] in {'sqlalchemy', 'alembic', 'pydantic', "
    "'pydantic_settings', 'jobhost_contracts'} or m.startswith('jobhost.cli.') or "
    "m.startswith('jobhost.config'))))); sys.argv[0] = 'jobhost'; "
    "from jobhost.cli import main; main()"
)


@pytest.mark.parametrize("flag", ["--version", "--help"])
def test_version_and_help_import_no_store_settings_or_command(flag: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, flag], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    loaded = done.stdout.rsplit("LOADED", 1)[1].split()
    assert loaded == ["jobhost.cli._app"]
    if flag == "--help":
        assert "report    The schedule report" in done.stdout


def test_the_help_lines_are_each_commands_own() -> None:
    register_commands()
    ctx = click.Context(cli)
    assert sorted(cli.commands) == sorted(_MODULES) == sorted(_SHORT_HELP)
    for name, line in _SHORT_HELP.items():
        command = cli.get_command(ctx, name)
        assert command is not None
        assert command.get_short_help_str(10_000) == line, name


def test_a_command_is_imported_when_it_runs() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "jobhost", "next", "--help"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "Usage: jobhost next" in done.stdout
