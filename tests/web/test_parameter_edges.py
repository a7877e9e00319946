"""Every query and body parameter of the API and the dashboard, fed its edge values through the
real server on each store, answers below 500: instants at years 1 and 9999 with any offset,
whole numbers past every column's range, text with lone surrogates and control characters, and
text one past its documented length."""

from __future__ import annotations

import base64
import json
import re
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import quote

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jobhost.records import LogLine
from jobhost.store.schema import runs
from tests.api.api_support import SECRETS, call, served_api
from tests.support import append_lines
from tests.web.console_support import Client, csrf_of, sign_in

JOB = "hooks.edge"
OPERATOR = "edge-operator-0123456789"

_EDGE_INTS = ["-1", "0", "1", "2147483647", "2147483648", "9223372036854775808"]
_EDGE_INTS += ["99999999999999999999", "1" * 40, "1e3", "0x10", " 1", "+1", "٣"]
_EDGE_TEXTS = ["", " ", "x\ud800y", "\udfff", "\x1b]0;title\x07", "\x1b]8;;http://x/\x1b\\a"]
_EDGE_TEXTS += ["a\x00b", "\u202e", "x" * 500, "x" * 501, "\t\n", "é" * 300]
_DURATIONS = ["0s", "1s", "2h", "7d", "99999999999d", "1" * 30 + "w", "-1h", "1.5h"]


def _instant(year: int, month: int, day: int, clock: str, offset: int, form: str) -> str:
    date = f"{year:04d}-{month:02d}-{day:02d}"
    if form == "date":
        return date
    if form == "naive":
        return f"{date}T{clock}"
    if form == "Z":
        return f"{date}T{clock}Z"
    sign, minutes = "-" if offset < 0 else "+", abs(offset)
    return f"{date}T{clock}{sign}{minutes // 60:02d}:{minutes % 60:02d}"


INSTANTS = st.builds(
    _instant,
    st.sampled_from([1, 2, 1970, 9998, 9999]) | st.integers(1, 9999),
    st.sampled_from([1, 12]),
    st.sampled_from([1, 31]),
    st.sampled_from(["00:00:00", "23:59:59.999999", "12:00"]),
    st.sampled_from([-1439, -60, 0, 60, 1439]) | st.integers(-1439, 1439),
    st.sampled_from(["date", "naive", "Z", "offset", "offset"]),
)
INTS = st.sampled_from(_EDGE_INTS) | st.integers(-(2**70), 2**70).map(str)
TEXTS = (
    st.sampled_from(_EDGE_TEXTS)
    | st.text(st.characters(codec=None), max_size=8)
    | st.characters(categories=["Cs", "Cc"]).map(lambda c: f"a{c}b")
)
SINCES = INSTANTS | st.sampled_from(_DURATIONS)
CURSORS = st.sampled_from(["start", "", "!!", "x" * 201]) | st.builds(
    lambda at, run: base64.urlsafe_b64encode(f"{at}|{run}".encode()).decode().rstrip("="),
    INSTANTS,
    st.sampled_from(["r1", "x" * 65, "a|b"]),
)


def _number(text: str) -> object:
    try:
        return int(text)
    except ValueError:
        return text


def _definition(field: str, value: object) -> dict[str, object]:
    body: dict[str, object] = {
        "kind": "http",
        "interval": "1h",
        "settings": {"url": "http://127.0.0.1:9/"},
        "reason": "edge",
    }
    if field == "cron":
        del body["interval"]
    body[field] = value
    return body


@dataclass(frozen=True)
class Ask:
    """One request: ``form`` posts to the dashboard signed in, ``body`` is JSON to the API."""

    method: str
    path: str
    token: str | None = None
    body: Any = None
    form: dict[str, str] | None = None


def q(value: str) -> str:
    # Lone surrogates go out as the bytes a careless client would send.
    return quote(value.encode("utf-8", "surrogatepass"), safe="")


PARAMETERS: dict[str, tuple[st.SearchStrategy[str], Callable[[str], Ask]]] = {
    # -- API queries
    "jobs search": (TEXTS, lambda v: Ask("GET", f"/api/v1/jobs?search={q(v)}", "reader")),
    "jobs module": (TEXTS, lambda v: Ask("GET", f"/api/v1/jobs?module={q(v)}", "reader")),
    "jobs limit": (INTS, lambda v: Ask("GET", f"/api/v1/jobs?limit={q(v)}", "reader")),
    "jobs state": (TEXTS, lambda v: Ask("GET", f"/api/v1/jobs?state={q(v)}&sort={q(v)}", "reader")),
    "runs limit": (INTS, lambda v: Ask("GET", f"/api/v1/jobs/{JOB}/runs?limit={q(v)}", "reader")),
    "runs outcome": (
        TEXTS,
        lambda v: Ask("GET", f"/api/v1/jobs/{JOB}/runs?outcome={q(v)}", "reader"),
    ),
    "logs after": (INTS, lambda v: Ask("GET", f"/api/v1/runs/RUN/logs?after={q(v)}", "reader")),
    "logs limit": (INTS, lambda v: Ask("GET", f"/api/v1/runs/RUN/logs?limit={q(v)}", "reader")),
    "changes after": (INTS, lambda v: Ask("GET", f"/api/v1/changes?after={q(v)}", "reader")),
    "changes job": (TEXTS, lambda v: Ask("GET", f"/api/v1/changes?job={q(v)}", "reader")),
    "changes limit": (INTS, lambda v: Ask("GET", f"/api/v1/changes?limit={q(v)}", "reader")),
    "failures since": (SINCES, lambda v: Ask("GET", f"/api/v1/failures?since={q(v)}", "reader")),
    "failures cursor": (CURSORS, lambda v: Ask("GET", f"/api/v1/failures?cursor={q(v)}", "reader")),
    "failures q": (TEXTS, lambda v: Ask("GET", f"/api/v1/failures?q={q(v)}&job={q(v)}", "reader")),
    "failures limit": (INTS, lambda v: Ask("GET", f"/api/v1/failures?limit={q(v)}", "reader")),
    "backfill id": (TEXTS, lambda v: Ask("GET", f"/api/v1/backfills/{q(v)}", "reader")),
    "run id": (TEXTS, lambda v: Ask("GET", f"/api/v1/runs/{q(v) or 'x'}/logs", "reader")),
    # -- API bodies
    "pause reason": (
        TEXTS,
        lambda v: Ask("POST", f"/api/v1/jobs/{JOB}/pause", "deployer", {"reason": v}),
    ),
    "resume reason": (
        TEXTS,
        lambda v: Ask("POST", f"/api/v1/jobs/{JOB}/resume", "deployer", {"reason": v}),
    ),
    "trigger reason": (
        TEXTS,
        lambda v: Ask("POST", f"/api/v1/jobs/{JOB}/trigger", "ops", {"reason": v}),
    ),
    "retry reason": (TEXTS, lambda v: Ask("POST", "/api/v1/runs/RUN/retry", "ops", {"reason": v})),
    "cancel reason": (TEXTS, lambda v: Ask("POST", "/api/v1/runs/x/cancel", "ops", {"reason": v})),
    "selection": (
        TEXTS,
        lambda v: Ask("POST", "/api/v1/pause", "deployer", {"match": [v], "reason": v}),
    ),
    "state value": (
        TEXTS,
        lambda v: Ask("PUT", f"/api/v1/jobs/{JOB}/state/k", "deployer", {"value": v, "reason": v}),
    ),
    "backfill from": (
        INSTANTS,
        lambda v: Ask(
            "POST",
            f"/api/v1/jobs/{JOB}/backfills",
            "ops",
            {"from": v, "to": "2026-01-01T00:00:00Z", "reason": "edge", "dry_run": True},
        ),
    ),
    "backfill to": (
        INSTANTS,
        lambda v: Ask(
            "POST",
            f"/api/v1/jobs/{JOB}/backfills",
            "ops",
            {"from": "0002-01-01", "to": v, "reason": "edge", "dry_run": True},
        ),
    ),
    "backfill reason": (
        TEXTS,
        lambda v: Ask(
            "POST",
            f"/api/v1/jobs/{JOB}/backfills",
            "ops",
            {"from": "2025-01-01", "to": "2025-01-02", "reason": v, "dry_run": True},
        ),
    ),
    "retry failures": (
        SINCES,
        lambda v: Ask("POST", "/api/v1/failures", "ops", {"since": v, "reason": "edge"}),
    ),
    "definition": (
        st.sampled_from(
            ["interval", "timeout", "misfire_grace", "backoff", "backoff_max", "timezone", "cron"]
        )
        .flatmap(lambda field: st.tuples(st.just(field), SINCES | TEXTS))
        .map(json.dumps),
        lambda v: Ask(
            "PUT", "/api/v1/jobs/hooks.edge-def", "deployer", _definition(*json.loads(v))
        ),
    ),
    "definition numbers": (
        st.sampled_from(["catch_up_limit", "max_concurrent", "max_attempts"]).flatmap(
            lambda field: st.tuples(st.just(field), INTS.map(_number)).map(json.dumps)
        ),
        lambda v: Ask(
            "PUT", "/api/v1/jobs/hooks.edge-def", "deployer", _definition(*json.loads(v))
        ),
    ),
    # -- dashboard pages (no credential needed to read on loopback)
    "overview": (TEXTS, lambda v: Ask("GET", f"/?q={q(v)}&module={q(v)}&sort={q(v)}")),
    "overview page": (INTS, lambda v: Ask("GET", f"/?page={q(v)}")),
    "job page": (INTS, lambda v: Ask("GET", f"/jobs/{JOB}?page={q(v)}&range={q(v)}")),
    "run after": (INTS, lambda v: Ask("GET", f"/runs/RUN?after={q(v)}")),
    "failures page since": (SINCES, lambda v: Ask("GET", f"/failures?since={q(v)}")),
    "failures page cursor": (CURSORS, lambda v: Ask("GET", f"/failures?cursor={q(v)}")),
    "failures page text": (
        TEXTS,
        lambda v: Ask("GET", f"/failures?q={q(v)}&job={q(v)}&range={q(v)}"),
    ),
    "request page": (TEXTS, lambda v: Ask("GET", f"/requests/{q(v) or 'x'}")),
    # -- dashboard forms, signed in as an operator
    "form reason": (TEXTS, lambda v: Ask("POST", f"/jobs/{JOB}/pause", form={"reason": v})),
    "form backfill": (
        INSTANTS,
        lambda v: Ask("POST", f"/jobs/{JOB}/backfill", form={"from": v, "to": v, "reason": "e"}),
    ),
}


@dataclass
class Site:
    base: str
    run_id: str
    client: Client

    def send(self, ask: Ask) -> int:
        path = ask.path.replace("RUN", self.run_id)
        if ask.form is not None:
            fields = {**ask.form, "csrf": csrf_of(self.client, f"/jobs/{JOB}")}
            body = "&".join(f"{k}={q(v)}" for k, v in fields.items())
            return self.client.post(path, body)[0]
        if ask.body is None:
            return _raw_get(self.base + path, ask.token)
        return call(self.base, ask.method, path, token=ask.token, body=ask.body).status


def _raw_get(url: str, token: str | None) -> int:
    headers = {"Authorization": f"Bearer {SECRETS[token][0]}"} if token else {}
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=15):
            return 200
    except urllib.error.HTTPError as error:
        with error:
            return error.code


@pytest.fixture
def site(store_url: str) -> Iterator[Site]:
    with served_api(
        store_url,
        plugins="http",
        console=True,
        console_actions=True,
        operator_tokens={"alice": OPERATOR},
    ) as (base, engine):
        made = call(
            base,
            "PUT",
            f"/api/v1/jobs/{JOB}",
            token="deployer",
            body={
                "kind": "http",
                "cron": "0 * * * *",
                "settings": {"url": "http://127.0.0.1:9/"},
                "reason": "new hook",
            },
        )
        assert made.status == 201, made.body
        run_id = _failed_run(engine)
        client = Client(base)
        sign_in(client, OPERATOR)
        yield Site(base, run_id, client)


def _failed_run(engine: Any) -> str:
    """A failed run of the job with one log line, written to the store as a host would."""
    run_id, at = uuid.uuid4().hex, datetime(2026, 1, 1, tzinfo=UTC)
    with engine.begin() as connection:
        connection.execute(
            runs.insert().values(
                id=run_id,
                job_name=JOB,
                attempt=1,
                source="manual",
                outcome="failed",
                queued_at=at,
                started_at=at,
                finished_at=at + timedelta(seconds=1),
                error_type="Boom",
            )
        )
        stamp = int(at.timestamp() * 1_000_000)
        append_lines(connection, [LogLine(run_id, 1, stamp, "INFO", "line", offset=0, size=4)])
    return run_id


CASES = st.sampled_from(sorted(PARAMETERS)).flatmap(
    lambda name: st.tuples(st.just(name), PARAMETERS[name][0])
)


@settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    database=None,
)
@given(case=CASES)
def test_no_parameter_value_answers_a_server_error(site: Site, case: tuple[str, str]) -> None:
    name, value = case
    ask = PARAMETERS[name][1](value)
    status = site.send(ask)
    assert status < 500, f"{name} = {json.dumps(value)}: {ask.method} {ask.path} -> {status}"


_REFUSED = [
    ("pause reason", "x\ud800y"),
    ("trigger reason", "x\ud800y"),
    ("retry reason", "x\ud800y"),
    ("pause reason", "x" * 501),
    ("pause reason", "\x1b]0;owned\x07"),
    ("backfill from", "0001-01-01T00:00:00+01:00"),
    ("backfill to", "9999-12-31T23:59:59-01:00"),
    ("retry failures", "0001-01-01T00:30:00+01:00"),
]
_PAST_THE_RANGE = [
    "/api/v1/failures?since=0001-01-01T00:00:00%2B01:00",
    "/api/v1/failures?since=9999-12-31T23:59:59-01:00",
    "/failures?since=0001-01-01T00:00:00%2B01:00",
    "/failures?cursor=" + base64.urlsafe_b64encode(b"0001-01-01T00:00:00+01:00|r1").decode(),
    "/api/v1/failures?cursor=" + base64.urlsafe_b64encode(b"9999-12-31T23:00:00-01:00|r").decode(),
]


def test_the_reported_values_are_refused_naming_their_field(site: Site) -> None:
    for name, value in _REFUSED:
        ask = PARAMETERS[name][1](value)
        path = ask.path.replace("RUN", site.run_id)
        answer = call(site.base, ask.method, path, token=ask.token, body=ask.body)
        assert answer.status == 422, (name, answer.body)
        said = [answer.body.get("detail", "")] + [e["field"] for e in answer.body["errors"]]
        assert any(f in " ".join(said) for f in ("reason", "from", "to", "since")), answer.body
    for path in _PAST_THE_RANGE:
        assert 400 <= _raw_get(site.base + path, "reader") < 500, path
    for reason in ("\x1b]0;owned\x07", "x" * 501):
        assert site.send(PARAMETERS["form reason"][1](reason)) == 422, reason
    after = f"{site.base}/runs/{site.run_id}?after=99999999999999999999"
    assert _raw_get(after, None) == 200


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    database=None,
)
# A lone surrogate is no Unicode text, so no schema speaks of it: the first test covers it.
@given(reason=TEXTS.filter(lambda text: not re.search("[\ud800-\udfff]", text)))
def test_the_document_and_the_server_agree_on_a_reason(site: Site, reason: str) -> None:
    document = call(site.base, "GET", "/api/v1/openapi.json").body
    schema = document["components"]["schemas"]["Reason"]["properties"]["reason"]
    valid = (
        schema["minLength"] <= len(reason) <= schema["maxLength"]
        and re.search(schema["pattern"], reason) is not None
    )
    ask = PARAMETERS["pause reason"][1](reason)
    answer = call(site.base, ask.method, ask.path, token=ask.token, body=ask.body)
    assert (answer.status == 200) == valid, (reason, answer.status, answer.body)
