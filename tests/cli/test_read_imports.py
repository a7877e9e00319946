"""A command that reads one job imports what it reads with, nothing more.

Each of these commands answers from the store in a fraction of a second, most of which is
Python importing modules: a heavy package that creeps back into one of them (through an import
at the top of a module it shares with the host) costs every operator every time. Each command
runs in a fresh interpreter on a synced store of each backend; what it imported is read from
``sys.modules`` when it ends.
"""

from __future__ import annotations

import pytest

from tests.cli.operator_support import Operator

JOB = "sample.nightly"
# The host's parts, the web surface, migrations, plugin loading, runtime job checks, the
# store-write retry policy (tenacity, which imports tornado when installed).
NEVER = (
    "alembic",
    "opentelemetry",
    "psutil",
    "starlette",
    "tenacity",
    "tornado",
    "jobhost.catalog.build",
    "jobhost.envelope",
    "jobhost.firing",
    "jobhost.plugins",
    "jobhost.runtime",
    "jobhost.web",
)
# Only a command that asks a fire time builds a trigger, and APScheduler with it.
TRIGGER_MATH = ("apscheduler",)
COMMANDS = {
    "report --job": (["report", "--job", JOB], NEVER),
    "history": (["history", JOB], NEVER + TRIGGER_MATH),
    "next": (["next", JOB], NEVER),
    "jobs show": (["jobs", "show", JOB], NEVER + TRIGGER_MATH),
    "pause": (["pause", JOB, "--reason", "maintenance"], NEVER + TRIGGER_MATH),
    "resume": (["resume", JOB, "--reason", "done"], NEVER + TRIGGER_MATH),
    "trigger --no-wait": (["trigger", JOB, "--no-wait"], NEVER + TRIGGER_MATH),
    "state": (["state", JOB], NEVER + TRIGGER_MATH),
    "state --set": (["state", JOB, "--set", "k=v", "--reason", "reset"], NEVER + TRIGGER_MATH),
}
_PROBE = "print('LOADED', ' '.join(sorted(sys.modules)), file=sys.stderr)"


@pytest.mark.parametrize("command", COMMANDS.values(), ids=COMMANDS.keys())
def test_a_single_job_read_imports_no_heavy_package(
    operator: Operator, command: tuple[list[str], tuple[str, ...]]
) -> None:
    args, never = command
    operator.configure([{"name": JOB, "cron": "30 2 * * *", "timezone": "Europe/Berlin"}])
    operator.sync()
    operator.add_run(JOB, "failed", error="ledger closed")

    loaded = _loaded(operator, args)

    assert _under(loaded, never) == []
    # The other store's driver and dialect stay unloaded too.
    other = ("psycopg", "sqlalchemy.dialects.postgresql")
    if operator.url.startswith("sqlite"):
        assert _under(loaded, other) == []


def _loaded(operator: Operator, args: list[str]) -> set[str]:
    done = operator.probed(_PROBE, *args)
    assert done.returncode == 0, done.stderr
    return set(done.stderr.rsplit("LOADED", 1)[1].split())


def _under(loaded: set[str], packages: tuple[str, ...]) -> list[str]:
    return sorted(m for m in loaded if any(m == p or m.startswith(f"{p}.") for p in packages))
