"""One change log for every operator action: ``jobhost pause|resume|trigger`` write it with the
operating-system user and the reason, and ``jobhost changes`` shows it (filters, limit, JSON in
the shape of ``GET /api/v1/changes``), as real processes on both stores."""

from __future__ import annotations

import getpass
import hashlib
import json
import re

from jobhost.config import ApiToken
from jobhost.store import Store
from jobhost.web import WebServer, create_app, store_endpoints
from jobhost.web.api.routes import api_routes
from jobhost.web.console.pages import Console
from tests.api.api_support import SECRETS, call
from tests.cli.operator_support import Operator
from tests.commands import jobhost_command
from tests.web.console_support import Client, add_operator_token, csrf_of, sign_in

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
    who = re.escape(f"{user} (cli)")
    assert re.fullmatch(f"{_STAMP}  {who}  pause  sample.nightly: vendor outage", lines[0])
    assert re.fullmatch(f"{_STAMP}  {who}  resume  sample.nightly: vendor back", lines[1])
    assert re.fullmatch(f"{_STAMP}  {who}  trigger  sample.hourly: INC-9 rerun", lines[2])

    done = operator.jobhost("changes", "--json", "--job", "sample.hourly")
    assert done.returncode == 0, done.stderr
    (change,) = json.loads(done.stdout)["changes"]
    assert set(change) == {
        *("id", "at", "actor", "action", "job", "before", "after", "reason"),
        *("surface", "address"),
    }
    assert (change["surface"], change["address"]) == ("cli", None)
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


ALICE = "alice-token-0123456789"


def test_each_change_says_its_surface_and_the_http_clients_address(operator: Operator) -> None:
    operator.configure(JOBS, console_actions=True)
    add_operator_token(operator, "alice", ALICE)
    operator.sync()
    shell = operator.env(USER="alice", LOGNAME="alice")
    argv = ["--config", str(operator.config), "pause", "sample.nightly", "--reason", "shell"]
    assert jobhost_command(argv, env=shell).returncode == 0

    tokens = [
        ApiToken(name=name, sha256=hashlib.sha256(secret.encode()).hexdigest(), scopes=scopes)
        for name, (secret, scopes) in SECRETS.items()
    ]
    settings = operator.settings.model_copy(update={"api_tokens": tokens})
    console = Console(settings, operator.catalog(), Store(operator.engine), allow_actions=True)
    app = create_app(
        store_endpoints(settings, console.catalog, Store(operator.engine)),
        routes=api_routes(settings, console.catalog, Store(operator.engine)),
        pages=console.routes(),
    )
    server = WebServer(("127.0.0.1", 0), app)
    server.start()
    try:
        base = f"http://127.0.0.1:{server.address[1]}"
        client = Client(base)
        sign_in(client, ALICE)
        csrf = csrf_of(client, "/jobs/sample.nightly")
        assert client.post("/jobs/sample.nightly/resume", f"reason=board&csrf={csrf}")[0] == 200
        paused = call(base, "POST", "/api/v1/jobs/sample.hourly/pause", token="deployer", body={})
        assert paused.status == 422  # no reason
        body = {"reason": "api"}
        paused = call(base, "POST", "/api/v1/jobs/sample.hourly/pause", token="deployer", body=body)
        assert paused.status == 200, paused.body
        answered = call(base, "GET", "/api/v1/changes", token="reader").body["changes"]
        page = client.get("/changes")[2]
    finally:
        server.stop()

    expected = [
        ("alice", "cli", None),
        ("alice", "dashboard", "127.0.0.1"),
        ("deployer", "api", "127.0.0.1"),
    ]
    assert [(c["actor"], c["surface"], c["address"]) for c in answered] == expected
    _, listed = operator.json("changes")
    assert [(c["actor"], c["surface"], c["address"]) for c in listed["changes"]] == expected
    lines = operator.jobhost("changes").stdout.splitlines()
    assert [line.split("  ")[1] for line in lines] == [
        "alice (cli)",
        "alice (dashboard from 127.0.0.1)",
        "deployer (api from 127.0.0.1)",
    ]
    # The dashboard tells alice at a shell from alice signed in.
    origins = re.findall(r'data-surface="([^"]*)">([^<]*)<', page)
    assert origins == [
        ("api", "api from 127.0.0.1"),
        ("dashboard", "dashboard from 127.0.0.1"),
        ("cli", "cli"),
    ]
