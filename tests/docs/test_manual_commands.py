"""Every CLI command, its flags, arguments, exit codes and ``--json`` keys are in the manual,
and every ``jobhost ...`` command line the manual shows exists with those flags (the ``next``
examples print what the manual says)."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime

import click
import pytest

from jobhost.catalog import build_catalog
from jobhost.cli import cli
from jobhost.config import Settings
from jobhost.rules import desired_schedules
from jobhost.store import create_store_engine
from jobhost.store.registry import sync_schedules
from tests.docs.manual_support import (
    HELP_OPTIONS,
    PAGES,
    arguments,
    commands,
    fenced_blocks,
    leaf_commands,
    options,
    page,
    sections,
)


@pytest.mark.parametrize("path", sorted(commands()))
def test_every_command_is_documented(path: str) -> None:
    assert f"jobhost {path}" in page("commands.md"), f"`jobhost {path}` is not in commands.md"


def _command_section(path: str) -> str:
    for heading, body in sections(page("commands.md"), "##").items():
        if f"jobhost {path}" in [part.strip() for part in heading.split("/")]:
            return body
    pytest.fail(f"commands.md has no section `## jobhost {path}`")


@pytest.mark.parametrize("path", sorted(leaf_commands()))
def test_every_command_section_has_its_flags_arguments_exit_codes_and_json(path: str) -> None:
    command = leaf_commands()[path]
    body = _command_section(path)
    for option in options(command):
        assert option in body, f"jobhost {path}: {option} is not documented in its section"
    for argument in arguments(command):
        assert argument in body, f"jobhost {path}: argument {argument} is not documented"
    assert "Exit codes:" in body, f"jobhost {path}: no exit codes"
    if "--json" in options(command):
        assert "JSON:" in body, f"jobhost {path}: no --json shape"


def test_global_options_are_documented() -> None:
    body = sections(page("commands.md"), "##")["Global options"]
    for option in [*options(cli), "-h", "--help"]:
        assert option in body


def test_every_exit_code_is_explained() -> None:
    from jobhost.cli import _app

    table = sections(page("commands.md"), "##")["Exit codes"]
    for name in ("EXIT_OK", "EXIT_FAILED", "EXIT_USAGE", "EXIT_INVALID", "EXIT_TIMEOUT"):
        assert f"| {getattr(_app, name)} |" in table, name


def _command_lines() -> Iterator[tuple[str, str]]:
    """(page, text after `jobhost`) for every command line the manual shows.

    A command line is an inline code span, or a line of a code block, that starts with
    ``jobhost`` (after an optional ``$`` prompt, ``VAR=value`` assignments and a directory).
    """
    start = re.compile(r"^(?:\$ )?(?:[A-Z_][A-Z0-9_]*=\S+\s+)*(?:\S*/)?jobhost (.*)$")
    for name in PAGES:
        text = page(name)
        pieces = re.findall(r"`([^`\n]+)`", text)
        pieces += [line for line in text.splitlines() if line.startswith("    ")]
        for block in fenced_blocks(text, r"[a-z]*"):
            pieces.extend(block.splitlines())
        for piece in pieces:
            match = start.match(piece.strip())
            if match:
                yield name, re.split(r"\s#|\s\|\s|;|&&", match[1])[0].strip()


def _tokens(text: str) -> list[str]:
    try:
        tokens = shlex.split(text)
    except ValueError:
        tokens = text.split()
    return [t.strip("[]") for t in tokens if t.strip("[]") not in {"", "|", "..."}]


def shown_command_lines() -> list[tuple[str, list[str]]]:
    lines: list[tuple[str, list[str]]] = []
    for name, text in _command_lines():
        tokens = _tokens(text)
        # Global options first.
        while tokens and tokens[0] in {"--config", "--version", "-h", "--help"}:
            tokens = tokens[2:] if tokens[0] == "--config" else tokens[1:]
        if not tokens or not re.fullmatch(r"[a-z]+", tokens[0]):
            continue  # prose such as "CREATE USER jobhost WITH ...", or the bare group
        lines.append((name, tokens))
    return lines


def test_the_manual_shows_command_lines_at_all() -> None:
    assert len(shown_command_lines()) > 50


@pytest.mark.parametrize(
    "where,tokens",
    shown_command_lines(),
    ids=[f"{w}:{' '.join(t)[:40]}" for w, t in shown_command_lines()],
)
def test_every_command_line_the_manual_shows_exists_with_its_flags(
    where: str, tokens: list[str]
) -> None:
    known = commands()
    path = tokens[0]
    assert path in known, f"{where}: `jobhost {' '.join(tokens)}`: no command {path}"
    rest = tokens[1:]
    if isinstance(known[path], click.Group) and rest and not rest[0].startswith("-"):
        path = f"{path} {rest[0]}"
        assert path in known, f"{where}: `jobhost {' '.join(tokens)}`: no command {path}"
        rest = rest[1:]
    command = known[path]
    declared = {o for p in command.params for o in [*p.opts, *p.secondary_opts]} | HELP_OPTIONS
    for token in rest:
        if token.startswith("-") and not re.fullmatch(r"-\d.*", token):
            flag = token.partition("=")[0]
            assert flag in declared, f"{where}: `jobhost {' '.join(tokens)}`: {flag} unknown"


def next_examples() -> list[tuple[str, list[str], list[str]]]:
    """(page, arguments, output lines) of every ``$ jobhost next ...`` example with its output."""
    found: list[tuple[str, list[str], list[str]]] = []
    for name in PAGES:
        lines = page(name).splitlines()
        for index, line in enumerate(lines):
            if not line.startswith("    $ jobhost next "):
                continue
            output: list[str] = []
            for following in lines[index + 1 :]:
                if not following.startswith("    ") or following.startswith("    $ "):
                    break
                output.append(following[4:])
            if output:
                found.append((name, shlex.split(line[len("    $ jobhost ") :]), output))
    return found


@pytest.mark.parametrize(
    "where,args,output", next_examples(), ids=[" ".join(a[1:3]) for _, a, _ in next_examples()]
)
def test_every_next_example_prints_what_the_manual_says(
    where: str, args: list[str], output: list[str]
) -> None:
    result = _jobhost(args, {k: v for k, v in os.environ.items() if not k.startswith("JOBHOST_")})
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == output, f"{where}: jobhost {' '.join(args)}"


def test_the_daylight_saving_examples_are_checked() -> None:
    assert len([e for e in next_examples() if e[0] == "semantics.md"]) >= 5


def _keys(value: object) -> set[str]:
    if isinstance(value, dict):
        return set(value) | {k for v in value.values() for k in _keys(v)}
    if isinstance(value, list):
        return {k for v in value for k in _keys(v)}
    return set()


@pytest.fixture(scope="module")
def sqlite_store(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    directory = tmp_path_factory.mktemp("store")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JOBHOST_", "OTEL_"))}
    env["JOBHOST_DATABASE_URL"] = f"sqlite:///{directory}/jobhost.db"
    subprocess.run(
        [sys.executable, "-m", "jobhost", "db", "upgrade"],
        env=env,
        check=True,
        timeout=60,
        capture_output=True,
    )
    # Read commands show what a host synced: sync the built-in catalog as a starting host would.
    settings = Settings(database_url=env["JOBHOST_DATABASE_URL"])
    jobs = build_catalog(settings, environ=env).jobs
    engine = create_store_engine(settings.database_url)
    try:
        with engine.begin() as connection:
            sync_schedules(connection, desired_schedules(jobs), datetime.now(UTC))
    finally:
        engine.dispose()
    return env


@pytest.mark.parametrize(
    "args",
    [
        ["validate", "--json"],
        ["next", "--cron", "0 3 * * *", "--json"],
        ["report", "--json"],
        ["history", "jobhost.run-retention", "--json"],
        ["health", "--json", "--no-hosts"],
        ["plan", "--json"],
        ["trigger", "jobhost.run-retention", "--no-wait", "--json"],
    ],
    ids=lambda a: a[0],
)
def test_every_json_key_a_command_prints_is_documented(
    args: list[str], sqlite_store: dict[str, str]
) -> None:
    result = _jobhost(args, sqlite_store)
    assert result.stdout.strip(), result.stderr
    body = _command_section(args[0])
    for key in sorted(_keys(json.loads(result.stdout))):
        assert f'"{key}"' in body, f"jobhost {args[0]} --json prints {key!r}; commands.md lacks it"


def _jobhost(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "jobhost", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
