"""One change log for every operator action: ``jobhost pause|resume|trigger`` write it with the
operating-system user and the reason, and ``jobhost changes`` shows it (filters, limit, JSON in
the shape of ``GET /api/v1/changes``), as real processes on both stores."""

from __future__ import annotations

import getpass
import json
import re

from tests.cli.operator_support import Operator

JOBS = [
    {"name": "sample.nightly", "cron": "0 3 * * *"},
    {"name": "sample.hourly", "interval": "1h"},
]
_STAMP = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ"


def test_cli_actions_are_logged_with_the_user_and_the_reason(operator: Operator) -> None:
    operator.configure(JOBS)
    operator.sync()
    user = getpass.getuser()
    assert operator.jobhost("changes").stdout.strip() == "no change logged"
    assert operator.jobhost("pause", "sample.nightly", "--reason", "vendor outage").returncode == 0
    # Pausing again changes nothing, and logs nothing.
    assert operator.jobhost("pause", "sample.nightly", "--reason", "again").returncode == 0
    resumed = operator.jobhost("resume", "sample.nightly", "--reason", "vendor back")
    assert resumed.returncode == 0, resumed.stderr
    queued = operator.jobhost("trigger", "sample.hourly", "--no-wait", "--reason", "INC-9 rerun")
    assert queued.returncode == 0, queued.stderr

    text = operator.jobhost("changes")
    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    assert len(lines) == 3
    assert re.fullmatch(f"{_STAMP}  {user}  pause  sample.nightly: vendor outage", lines[0])
    assert re.fullmatch(f"{_STAMP}  {user}  resume  sample.nightly: vendor back", lines[1])
    assert re.fullmatch(f"{_STAMP}  {user}  trigger  sample.hourly: INC-9 rerun", lines[2])

    done = operator.jobhost("changes", "--json", "--job", "sample.hourly")
    assert done.returncode == 0, done.stderr
    (change,) = json.loads(done.stdout)["changes"]
    assert set(change) == {"id", "at", "actor", "action", "job", "before", "after", "reason"}
    (request,) = operator.requests()
    assert (change["actor"], change["action"], change["job"], change["reason"]) == (
        user,
        "trigger",
        "sample.hourly",
        "INC-9 rerun",
    )
    assert change["after"] == {"request_id": request.id}
    assert change["at"].endswith("Z")

    newest = operator.jobhost("changes", "--limit", "2").stdout.splitlines()
    assert newest == lines[1:]
    assert (
        "no change of job sample.none logged"
        in operator.jobhost("changes", "--job", "sample.none").stdout
    )
    assert operator.jobhost("changes", "--limit", "0").returncode == 2
