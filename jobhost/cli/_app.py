"""The command group, shared options, and the mapping of host errors to exit codes.

Exit codes are a promise to scripts: 0 ok, 1 a run failed or a check is unhealthy, 2 usage error
or unknown job, 3 invalid catalog or configuration, 4 timed out waiting.

A command's module is imported when the command runs, and this module imports neither the
store nor the settings: ``jobhost --version`` and ``jobhost --help`` answer at Python's start-up
cost. ``--help`` lists the commands from :data:`_SHORT_HELP`, which is also the first paragraph
of each command's own help.
"""

from __future__ import annotations

import gc
import importlib
import inspect
import logging
import os
import sys
from typing import NoReturn

import click

from jobhost.errors import JobhostError

__all__ = [
    "EXIT_FAILED",
    "EXIT_INVALID",
    "EXIT_OK",
    "EXIT_TIMEOUT",
    "EXIT_USAGE",
    "cli",
    "fail",
    "main",
    "to_stderr",
]

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INVALID = 3
EXIT_TIMEOUT = 4

_SHORT_HELP = {
    "backfill": "Run the past occurrences of job NAME, FROM ≤ occurrence < TO, once each.",
    "cancel": "Cancel running run RUN_ID through its host, and wait until it ends.",
    "changes": "Show the newest changes, oldest first: pause, resume, trigger from the CLI, "
    "the dashboard and the API, and runtime jobs created, changed and deleted; each with who "
    "and why.",
    "db": "The store's schema and rows: apply migrations, show the revision, audit the rows.",
    "failures": "Show open failures of every job: failed, timed-out, abandoned and stuck runs, "
    "newest first.",
    "health": "Check the store, the catalog, the critical jobs, the hosts, the leases and "
    "the clocks.",
    "history": "Show job NAME's ledger: every attempt, and every occurrence missed or skipped.",
    "jobs": "Create, change, show and remove runtime jobs (source api).",
    "kinds": "List the job kinds runtime jobs can have, with each kind's settings.",
    "logs": "Show the lines run RUN_ID wrote through its job's logger, in order.",
    "next": "Show when job NAME (its trigger after overrides) or --cron EXPR fires next.",
    "pause": "Pause job NAME on every replica until `jobhost resume NAME`.",
    "plan": "Compare the catalog the installed modules declare with the store's schedules.",
    "report": "The schedule report: a summary by status, one line per job, then the live hosts.",
    "resume": "Resume job NAME on every replica; its misfire policy decides what of the pause "
    "runs.",
    "retry": "Run the work of failed run RUN_ID again: the same occurrence and idempotency "
    "key, the next attempt, through the claim every run goes through.",
    "run": "Run the jobs: validate the catalog, migrate the store, fire occurrences until stopped.",
    "serve": "Serve the report, the probes and the dashboard over the store, with no host.",
    "state": "Show job NAME's durable state (what its runs keep in context.state), or change it.",
    "trigger": "Run job NAME now, as the operating-system user, and wait for its outcome.",
    "validate": "Load every plugin and check every job; list every problem, not only the first.",
}

# Each command lives in the module of its subject and registers itself on `cli` when imported.
_MODULES = {
    command: module
    for module, commands in {
        "backfill": "backfill",
        "checks": "db health plan validate",
        "history": "changes history logs",
        "jobs": "jobs kinds",
        "pause": "pause resume state",
        "report": "next report",
        "run": "run serve",
        "runs": "cancel failures retry trigger",
    }.items()
    for command in commands.split()
}


class _LazyGroup(click.Group):
    """A group whose commands are imported on first use."""

    def add_command(self, cmd: click.Command, name: str | None = None) -> None:
        detail = inspect.cleandoc(cmd.help or "")
        cmd.help = f"{_SHORT_HELP[name or str(cmd.name)]}\n\n{detail}".rstrip()
        super().add_command(cmd, name)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *_MODULES})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in _MODULES:
            importlib.import_module(f"jobhost.cli.{_MODULES[cmd_name]}")
        return super().get_command(ctx, cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        names = self.list_commands(ctx)
        limit = formatter.width - 6 - max(len(name) for name in names)
        # A stand-in command shortens the line exactly as click shortens the real one's.
        rows = [
            (name, click.Command(name, help=_SHORT_HELP[name]).get_short_help_str(limit))
            for name in names
        ]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(
    cls=_LazyGroup,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False),
    envvar="JOBHOST_CONFIG",
    help="Path of jobhost.toml (environment JOBHOST_CONFIG). Without it: defaults and JOBHOST_*.",
)
@click.version_option(package_name="jobhost")
@click.pass_context
def cli(ctx: click.Context, config_path: str | None) -> None:
    """Run an application's recurring background jobs, exactly once per occurrence."""
    from jobhost.config import CONFIG_ENV

    ctx.ensure_object(dict)
    if ctx.obj.get("console"):
        # Every command logs through the redacting handler: a job run in-process by `trigger`
        # logs its exception as the host would, and Python's last-resort handler would print it
        # raw. Set here, not in main, so that --version and --help import no settings.
        configure_logging("WARNING")
    ctx.obj["config_path"] = config_path
    from jobhost.store.runtime import acting_from

    acting_from("cli")
    if config_path is not None:
        # Code that loads settings on its own (the built-in retention job) must see this file too.
        os.environ[CONFIG_ENV] = os.path.abspath(config_path)


def main(argv: list[str] | None = None) -> NoReturn:
    """Console entry point: run the command, turning host errors into their exit codes."""
    args = sys.argv[1:] if argv is None else argv
    for before, arg in zip(["", *args], args, strict=False):
        # Bytes that are not UTF-8 arrive as lone surrogates, which no store query can carry.
        path = before in ("--config", "--file") or arg.startswith(("--config=", "--file="))
        if not path and any("\ud800" <= char <= "\udfff" for char in arg):
            message = "names, run ids, keys, values and reasons are UTF-8 (check LANG, LC_ALL)"
            fail(f"jobhost: the argument {arg!r} is not UTF-8 text: {message}", EXIT_USAGE)
    try:
        # Outside standalone mode click returns ctx.exit(n)'s code instead of exiting with it.
        code = cli.main(
            args=argv, prog_name="jobhost", standalone_mode=False, obj={"console": True}
        )
    except click.exceptions.Exit as done:
        sys.exit(done.exit_code)
    except click.ClickException as error:
        error.show()
        sys.exit(error.exit_code)
    except (click.Abort, KeyboardInterrupt):
        fail("jobhost: interrupted", EXIT_FAILED)
    except JobhostError as error:
        from jobhost.config import redact_text

        fail(f"jobhost: {redact_text(str(error))}", error.exit_code)
    except Exception as error:
        _unexpected(error)
    finally:
        # The command is over and the process ends. Python's shutdown runs full collections as
        # it clears modules, each walking every object still alive (a report of 10,000 jobs,
        # the store's tables, every module): a tenth of `report --json`. Frozen, they are freed
        # by reference counting as modules clear, or with the process.
        gc.freeze()
    sys.exit(code if isinstance(code, int) else EXIT_OK)


def _unexpected(error: Exception) -> NoReturn:
    """One line for an error no command foresaw; a store failure (a lock held too long, a disk
    full) says so."""
    from jobhost.config import bound_text, redact_text

    # A store error can only come from an imported SQLAlchemy: a command that never opened
    # the store does not pay for importing it here.
    store_errors = sys.modules.get("sqlalchemy.exc")
    if store_errors is not None and isinstance(error, store_errors.SQLAlchemyError):
        cause = getattr(error, "orig", None) or error
        first = redact_text(str(cause)).strip().splitlines()[0] if str(cause).strip() else ""
        fail(
            f"jobhost: the store failed: {type(cause).__name__}: {first}; check the store "
            "(`jobhost health`) and try again",
            EXIT_FAILED,
        )
    # No traceback reaches an operator; the log level DEBUG of `jobhost run` still has one.
    logging.getLogger("jobhost").debug("unexpected error", exc_info=error)
    fail(
        f"jobhost: unexpected error: {type(error).__name__}: "
        f"{bound_text(redact_text(str(error)), 500)}; this is a bug in jobhost or in a "
        "plugin, or a damaged row in the store: run `jobhost health` and report it with "
        "this line",
        EXIT_FAILED,
    )


def to_stderr(line: str) -> None:
    """Progress, notes and warnings: stdout is kept for the answer."""
    click.echo(line, err=True)


def fail(message: str, code: int) -> NoReturn:
    click.echo(message, err=True)
    raise SystemExit(code)


_STDERR_HANDLER = "jobhost-stderr"


def configure_logging(level: str, log_format: str = "text") -> None:
    """Lines on stderr, passwords redacted and lines bounded: plain text, or one JSON object a
    line (``log_format = "json"``); the run envelope adds its own structured audit lines.
    Calling it again changes the level and the format."""
    from jobhost.config import RedactingFormatter

    root = logging.getLogger()
    formatter: logging.Formatter
    if log_format == "json":
        from jobhost.cli._jsonlog import JsonLogFormatter

        formatter = JsonLogFormatter()
    else:
        formatter = RedactingFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
    ours = [h for h in root.handlers if h.get_name() == _STDERR_HANDLER]
    if not ours:
        ours = [logging.StreamHandler(sys.stderr)]
        ours[0].set_name(_STDERR_HANDLER)
        root.addHandler(ours[0])
    for handler in ours:
        handler.setFormatter(formatter)
        # On the handler too: a job logger may pass more to its run's log than stderr shows.
        handler.setLevel(level)
    root.setLevel(level)
    # Migration chatter is not news to an operator; the host says what the upgrade did.
    logging.getLogger("alembic").setLevel(max(logging.WARNING, logging.getLevelName(level)))
