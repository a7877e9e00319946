"""Reading behind a credential when asked, sessions that end on sign-out on every replica, and a
brake on guessing counted through the store (two replicas brake one guesser together): on both
stores, where the session versions and the wrong guesses live."""

from __future__ import annotations

import dataclasses
import hashlib
import http.cookiejar
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from importlib.resources import files
from typing import Any

import pytest
from alembic import command
from alembic.config import Config
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from sqlalchemy import inspect, select
from sqlalchemy.engine import Engine

from jobhost.catalog import build_catalog
from jobhost.config import Settings
from jobhost.store import Store, create_store_engine, upgrade
from jobhost.store.sessions import wrong_guesses
from jobhost.web import WebServer, create_app, store_endpoints
from jobhost.web.access import GUESS_LIMIT, GuessBrake, ReadAccess
from jobhost.web.api.routes import api_routes
from jobhost.web.console.pages import Console

OPERATOR = "bob-token-0123456789"
READER = "reader-secret-0123456789abc"
WRITER = "writer-secret-0123456789abc"


def _token(name: str, secret: str, scopes: list[str]) -> dict[str, Any]:
    return {"name": name, "sha256": hashlib.sha256(secret.encode()).hexdigest(), "scopes": scopes}


class Client:
    """A browser of sorts: keeps cookies, follows redirects; ``cookie`` overrides the jar."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.jar = http.cookiejar.CookieJar()
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.jar))

    def open(
        self, method: str, path: str, body: str | None = None, **headers: str
    ) -> tuple[int, dict[str, str], str]:
        data = body.encode() if body is not None else None
        if data is not None:
            headers.setdefault("Content-Type", "application/x-www-form-urlencoded")
        request = urllib.request.Request(self.base + path, data, headers, method=method)
        try:
            with self.opener.open(request, timeout=30) as response:
                found = {k.lower(): v for k, v in response.headers.items()}
                return response.status, found, response.read().decode()
        except urllib.error.HTTPError as error:
            with error:
                found = {k.lower(): v for k, v in error.headers.items()}
                return error.code, found, error.read().decode()

    def cookie(self) -> str:
        return "; ".join(f"{c.name}={c.value}" for c in self.jar)


@pytest.fixture
def serve(store_url: str) -> Iterator[Callable[..., tuple[str, GuessBrake]]]:
    """Start an application (a replica) over this test's store with the given settings."""
    servers: list[WebServer] = []
    engines: list[Engine] = []

    def start(**values: Any) -> tuple[str, GuessBrake]:
        settings = Settings(
            database_url=store_url,
            console_actions=True,
            operator_tokens={"bob": OPERATOR},
            api_tokens=[
                _token("reader", READER, ["read"]),
                _token("writer", WRITER, ["write"]),
            ],
            **values,
        )
        engine = create_store_engine(settings.database_url)
        upgrade(engine)
        engines.append(engine)
        catalog = build_catalog(settings)
        brake = GuessBrake(Store(engine), clock=lambda: MINUTE_START + 30, meter=METER)
        endpoints = dataclasses.replace(
            store_endpoints(settings, catalog, Store(engine)), metrics=lambda: b"# metrics\n"
        )
        app = create_app(
            endpoints,
            routes=api_routes(settings, catalog, Store(engine), brake=brake),
            pages=Console(
                settings, catalog, Store(engine), allow_actions=True, brake=brake
            ).routes(),
            access=ReadAccess(settings, brake),
        )
        server = WebServer(("127.0.0.1", 0), app)
        server.start()
        servers.append(server)
        return f"http://127.0.0.1:{server.address[1]}", brake

    yield start
    for server in servers:
        server.stop()
    for engine in engines:
        engine.dispose()


MINUTE_START = 1_800_000_000.0  # a whole minute: every test's guesses fall in one window
READER_METRICS = InMemoryMetricReader()
METER = MeterProvider(metric_readers=[READER_METRICS]).get_meter("jobhost")


def refused_credentials() -> int:
    data = READER_METRICS.get_metrics_data()
    total = 0
    for resource in data.resource_metrics if data else []:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                if metric.name == "jobhost.http.refused_credentials":
                    total += sum(int(point.value) for point in metric.data.data_points)
    return total


def test_reading_is_open_by_default(serve: Callable[..., tuple[str, GuessBrake]]) -> None:
    base, _ = serve()
    client = Client(base)
    for path in ("/", "/hosts", "/report", "/metrics", "/healthz"):
        assert client.open("GET", path)[0] == 200, path


def test_with_token_reading_needs_a_credential_and_probes_stay_open(
    serve: Callable[..., tuple[str, GuessBrake]],
) -> None:
    base, _ = serve(web_read_access="token")
    client = Client(base)
    for path in ("/", "/hosts", "/jobs/sample.x", "/runs/abc", "/changes", "/backfills"):
        status, _, page = client.open("GET", path)
        assert status == 401 and 'id="signin-form"' in page, path
    assert client.open("GET", "/report")[0] == 401
    assert client.open("GET", "/report", Authorization=f"Bearer {WRITER}")[0] == 401
    assert client.open("GET", "/report", Authorization=f"Bearer {READER}")[0] == 200
    assert client.open("GET", "/report", Authorization=f"Bearer {OPERATOR}")[0] == 200
    assert client.open("GET", "/api/v1/jobs")[0] == 401
    assert client.open("GET", "/healthz")[0] == 200
    assert client.open("GET", "/readyz")[0] in (200, 503)
    assert client.open("GET", "/metrics")[0] == 200  # its own switch, open by default

    closed, _ = serve(web_read_access="token", metrics_access="token")
    metrics = Client(closed)
    assert metrics.open("GET", "/metrics")[0] == 401
    assert metrics.open("GET", "/metrics", Authorization=f"Bearer {READER}")[0] == 200


def test_a_read_token_signs_in_to_look_and_only_an_operator_acts(
    serve: Callable[..., tuple[str, GuessBrake]],
) -> None:
    base, _ = serve(web_read_access="token")
    reader = Client(base)
    status, _, page = reader.open("POST", "/signin", f"token={READER}")
    assert status == 200 and 'id="signed-in-as">reader<' in page
    assert reader.open("GET", "/hosts")[0] == 200
    status, _, page = reader.open("POST", "/jobs/sample.x/pause", "reason=x&csrf=x")
    assert status == 403 and "operator token" in page

    operator = Client(base)
    status, _, page = operator.open("POST", "/signin", f"token={OPERATOR}")
    assert status == 200 and 'id="signed-in-as">bob<' in page


def test_a_nul_byte_in_a_form_is_refused_before_the_store(
    serve: Callable[..., tuple[str, GuessBrake]],
) -> None:
    base, _ = serve(web_read_access="token")
    status, _, page = Client(base).open("POST", "/signin", "token=a%00b")
    assert status == 400 and "NUL" in page


def test_sign_out_ends_the_session_on_every_replica(
    serve: Callable[..., tuple[str, GuessBrake]],
) -> None:
    first, _ = serve(web_read_access="token")
    second, _ = serve(web_read_access="token")
    client = Client(first)
    assert client.open("POST", "/signin", f"token={OPERATOR}")[0] == 200
    cookie = client.cookie()
    assert Client(second).open("GET", "/hosts", Cookie=cookie)[0] == 200

    assert client.open("POST", "/signout", "")[0] == 401  # redirected to / : signed out

    for base in (first, second):
        status, _, page = Client(base).open("GET", "/hosts", Cookie=cookie)
        assert status == 401 and 'id="signin-form"' in page
    # Signing in again starts a new session that holds.
    assert client.open("POST", "/signin", f"token={OPERATOR}")[0] == 200
    assert Client(second).open("GET", "/hosts", Cookie=client.cookie())[0] == 200


def test_wrong_credentials_are_braked_across_replicas_and_counted(
    serve: Callable[..., tuple[str, GuessBrake]],
) -> None:
    first, _ = serve(web_read_access="token")
    second, _ = serve(web_read_access="token")
    clients = [Client(first), Client(second)]
    before = refused_credentials()
    answers = []
    for attempt in range(GUESS_LIMIT):
        client = clients[attempt % 2]
        guess = f"guess-{attempt:04d}-0123456789"
        if attempt % 3 == 0:
            answers.append(client.open("POST", "/signin", f"token={guess}")[0])
        elif attempt % 3 == 1:
            answers.append(client.open("GET", "/api/v1/jobs", Authorization=f"Bearer {guess}")[0])
        else:
            answers.append(client.open("GET", "/report", Authorization=f"Bearer {guess}")[0])
    assert set(answers) <= {401, 403} and len(answers) == GUESS_LIMIT
    # The eleventh wrong guess in the minute, whichever replica it reaches, is braked.
    status, headers, _ = clients[1].open("POST", "/signin", "token=guess-9999-0123456789")
    assert status == 429 and headers["retry-after"] == "30"
    status, headers, _ = clients[0].open("GET", "/api/v1/jobs", Authorization="Bearer nope")
    assert status == 429 and headers["content-type"] == "application/problem+json"
    assert clients[1].open("GET", "/report", Authorization="Bearer nope")[0] == 429
    assert refused_credentials() - before == GUESS_LIMIT + 3
    # The right token from the same address is never braked, on either replica.
    assert clients[0].open("GET", "/api/v1/jobs", Authorization=f"Bearer {READER}")[0] == 200
    assert clients[1].open("GET", "/report", Authorization=f"Bearer {READER}")[0] == 200
    assert clients[1].open("POST", "/signin", f"token={OPERATOR}")[0] == 200


def test_an_api_token_without_the_read_scope_is_refused_but_never_braked(
    serve: Callable[..., tuple[str, GuessBrake]],
) -> None:
    base, _ = serve(web_read_access="token", metrics_access="token")
    client = Client(base)
    before = refused_credentials()
    for attempt in range(GUESS_LIMIT + 2):
        path = ("/report", "/metrics", "/signin")[attempt % 3]
        if path == "/signin":
            status, _, body = client.open("POST", path, f"token={WRITER}")
            assert status == 403 and "lacks the read scope" in body, (attempt, status)
            continue
        status, _, body = client.open("GET", path, Authorization=f"Bearer {WRITER}")
        assert status == 401 and "read scope" in body, (attempt, status, body)
    # A right secret is no guess: it is not counted, and a guess after it is not braked yet.
    assert refused_credentials() == before
    assert client.open("GET", "/report", Authorization="Bearer nope")[0] == 401


def test_the_brake_counts_per_address_and_in_all_and_forgets_old_minutes(
    engine: Engine,
) -> None:
    now = [MINUTE_START + 15]
    brake = GuessBrake(Store(engine), limit=3, limit_all=5, clock=lambda: now[0], meter=METER)
    assert [brake.wrong("10.0.0.1", "api") for _ in range(3)] == [None] * 3
    assert brake.wrong("10.0.0.1", "api") == 45
    assert brake.wrong("10.0.0.2", "api") is None  # another address has its own count
    # ... but all addresses together are bounded: rotating them does not dodge the brake.
    assert brake.wrong("10.0.0.3", "api") == 45
    now[0] += 45  # the next minute starts afresh
    assert brake.wrong("10.0.0.1", "api") is None
    now[0] += 60  # and the minute before last is deleted
    assert brake.wrong("10.0.0.1", "api") is None
    with engine.connect() as connection:
        minutes = connection.execute(select(wrong_guesses.c.minute).distinct()).scalars()
        assert sorted(minutes) == [int(MINUTE_START // 60) + 1, int(MINUTE_START // 60) + 2]


def test_migration_0017_adds_and_drops_the_brake_and_the_change_origin(store_url: str) -> None:
    engine = create_store_engine(store_url)
    try:
        upgrade(engine)
        assert inspect(engine).has_table("wrong_guesses")
        columns = {c["name"] for c in inspect(engine).get_columns("job_changes")}
        assert {"surface", "address"} <= columns
        config = Config()
        config.set_main_option("script_location", str(files("jobhost.store") / "migrations"))
        with engine.begin() as connection:
            config.attributes["connection"] = connection
            command.downgrade(config, "0016")
        assert not inspect(engine).has_table("wrong_guesses")
        columns = {c["name"] for c in inspect(engine).get_columns("job_changes")}
        assert not {"surface", "address"} & columns
        upgrade(engine)
        assert inspect(engine).has_table("wrong_guesses")
    finally:
        engine.dispose()
