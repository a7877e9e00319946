"""The command group, shared options, and the mapping of host errors to exit codes.

Exit codes are a promise to scripts: 0 ok, 1 a run failed or a check is unhealthy, 2 usage error
or unknown job, 3 invalid catalog or configuration, 4 timed out waiting.
"""

from __future__ import annotations

import importlib
import logging
import os
import sys
from typing import Any

import click
from sqlalchemy.exc import SQLAlchemyError

from jobhost.config import CONFIG_ENV, RedactingFormatter, bound_text, redact_text
from jobhost.errors import JobhostError

__all__ = ["EXIT_FAILED", "EXIT_INVALID", "EXIT_OK", "EXIT_TIMEOUT", "EXIT_USAGE", "cli", "main"]

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INVALID = 3
EXIT_TIMEOUT = 4

# Each command lives in its own module and registers itself on `cli` when imported.
_COMMAND_MODULES = (
    "validate",
    "next",
    "run",
    "db",
    "report",
    "trigger",
    "history",
    "pause",
    "health",
    "plan",
    "serve",
    "kinds",
    "jobs",
    "logs",
    "changes",
)


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
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
    ctx.ensure_object(dict)
    ctx.obj["config_path"] = config_path
    if config_path is not None:
        # Code that loads settings on its own (the built-in retention job) must see this file too.
        os.environ[CONFIG_ENV] = os.path.abspath(config_path)


def main(argv: list[str] | None = None) -> None:
    """Console entry point: run the command, turning host errors into their exit codes."""
    _register_commands()
    # Every command logs through the redacting handler: a job run in-process by `trigger` logs
    # its exception as the host would, and Python's last-resort handler would print it raw.
    configure_logging("WARNING")
    try:
        # Outside standalone mode click returns ctx.exit(n)'s code instead of exiting with it.
        code = cli.main(args=argv, prog_name="jobhost", standalone_mode=False)
    except click.exceptions.Exit as done:
        sys.exit(done.exit_code)
    except click.ClickException as error:
        error.show()
        sys.exit(error.exit_code)
    except (click.Abort, KeyboardInterrupt):
        click.echo("jobhost: interrupted", err=True)
        sys.exit(EXIT_FAILED)
    except JobhostError as error:
        click.echo(f"jobhost: {redact_text(str(error))}", err=True)
        sys.exit(error.exit_code)
    except SQLAlchemyError as error:
        # A store failure no command foresaw (a lock held too long, a disk full): one line.
        cause = getattr(error, "orig", None) or error
        first = redact_text(str(cause)).strip().splitlines()[0] if str(cause).strip() else ""
        click.echo(
            f"jobhost: the store failed: {type(cause).__name__}: {first}; check the store "
            "(`jobhost health`) and try again",
            err=True,
        )
        sys.exit(EXIT_FAILED)
    except Exception as error:
        # No traceback reaches an operator; the log level DEBUG of `jobhost run` still has one.
        logging.getLogger("jobhost").debug("unexpected error", exc_info=error)
        click.echo(
            f"jobhost: unexpected error: {type(error).__name__}: "
            f"{bound_text(redact_text(str(error)), 500)}; this is a bug in jobhost or in a "
            "plugin, or a damaged row in the store: run `jobhost health` and report it with "
            "this line",
            err=True,
        )
        sys.exit(EXIT_FAILED)
    sys.exit(code if isinstance(code, int) else EXIT_OK)


def config_path(ctx: click.Context) -> str | None:
    """The ``--config`` given to the group, for a command that loads settings."""
    obj: dict[str, Any] = ctx.find_root().obj or {}
    value = obj.get("config_path")
    return value if isinstance(value, str) else None


def configure_logging(level: str, log_format: str = "text") -> None:
    """Lines on stderr, passwords redacted and lines bounded: plain text, or one JSON object a
    line (``log_format = "json"``); the run envelope adds its own structured audit lines.
    Calling it again changes the level and the format."""
    from jobhost.envelope.jsonlog import JsonLogFormatter

    root = logging.getLogger()
    formatter: logging.Formatter
    if log_format == "json":
        formatter = JsonLogFormatter()
    else:
        formatter = RedactingFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
    ours = [
        h for h in root.handlers if isinstance(h.formatter, RedactingFormatter | JsonLogFormatter)
    ]
    if not ours:
        ours = [logging.StreamHandler(sys.stderr)]
        root.addHandler(ours[0])
    for handler in ours:
        handler.setFormatter(formatter)
        # On the handler too: a job logger may pass more to its run's log than stderr shows.
        handler.setLevel(level)
    root.setLevel(level)
    # Migration chatter is not news to an operator; the host says what the upgrade did.
    logging.getLogger("alembic").setLevel(max(logging.WARNING, logging.getLevelName(level)))


def _register_commands() -> None:
    for name in _COMMAND_MODULES:
        importlib.import_module(f"jobhost.cli.{name}")
