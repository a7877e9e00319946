"""Fixtures shared by every test: a store on each backend.

PostgreSQL tests read the server's URL from ``JOBHOST_TEST_POSTGRES_URL`` (README; ``.ci/run``
sets it). Unset or unreachable, they fail rather than skip: a green run must have exercised both
backends. Each test gets a schema of its own on that server, dropped afterwards.
"""

from __future__ import annotations

import os
import signal
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from sqlalchemy import create_engine, text
from sqlalchemy.engine import Engine, make_url

from jobhost.config import Settings
from jobhost.envelope.reporting import Telemetry
from jobhost.store import create_store_engine, upgrade
from tests.cli.operator_support import Operator
from tests.reliability.proxy import CutProxy
from tests.support import SAMPLE_PLUGIN, ManualClock

POSTGRES_ENV = "JOBHOST_TEST_POSTGRES_URL"

# A shell starts a background command with SIGINT ignored, and every process it starts inherits
# that: the Ctrl-C tests (the commands' own and the interrupt hold's) would see no Ctrl-C at all.
# They test a terminal's Ctrl-C, so the suite runs with SIGINT as Python sets it up by default.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

BACKENDS = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


@pytest.fixture(autouse=True)
def _no_inherited_config(monkeypatch: pytest.MonkeyPatch) -> None:
    """A command run in-process with ``--config`` names its file in ``JOBHOST_CONFIG`` for the
    code that loads settings on its own; the next test's commands must not inherit it."""
    monkeypatch.delenv("JOBHOST_CONFIG", raising=False)


def postgres_base_url() -> str:
    url = os.environ.get(POSTGRES_ENV)
    if not url:
        pytest.fail(
            f"{POSTGRES_ENV} is not set: the PostgreSQL tests need a server, e.g. "
            f"{POSTGRES_ENV}=postgresql+psycopg://postgres@127.0.0.1:5432/test"
        )
    return url


@pytest.fixture
def postgres_url() -> Iterator[str]:
    """A fresh, empty schema on the test server, as a URL whose search_path points at it."""
    with postgres_schema() as url:
        yield url


@pytest.fixture
def proxied(postgres_url: str) -> Iterator[tuple[str, CutProxy]]:
    """The test's PostgreSQL store, migrated, reached through a proxy of the test's own."""
    server = make_url(postgres_url)
    engine = create_store_engine(postgres_url)
    upgrade(engine)
    engine.dispose()
    with CutProxy(server.host or "127.0.0.1", server.port or 5432) as proxy:
        url = server.set(host="127.0.0.1", port=proxy.port)
        yield url.render_as_string(hide_password=False), proxy


@contextmanager
def postgres_schema() -> Iterator[str]:
    """A fresh, empty schema on the test server while the block runs (for fixtures of a wider
    scope than a test)."""
    base = make_url(postgres_base_url()).set(drivername="postgresql+psycopg")
    schema = f"t_{uuid.uuid4().hex[:12]}"
    admin = create_engine(base, isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(text(f'CREATE SCHEMA "{schema}"'))
    url = base.update_query_dict({"options": f"-csearch_path={schema}"})
    try:
        yield url.render_as_string(hide_password=False)
    finally:
        with admin.connect() as connection:
            connection.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()


@pytest.fixture(params=BACKENDS)
def store_url(request: pytest.FixtureRequest, tmp_path: object) -> str:
    """The same test body against an SQLite file and a PostgreSQL schema."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/store.db"
    return str(request.getfixturevalue("postgres_url"))


@pytest.fixture
def engine(store_url: str) -> Iterator[Engine]:
    """The engine of a migrated store on each backend."""
    made = create_store_engine(store_url)
    upgrade(made)
    yield made
    made.dispose()


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(datetime(2026, 5, 4, 9, 59, 30, tzinfo=UTC))


@pytest.fixture
def run_log(tmp_path: Path) -> Path:
    """The file the sample plugin's executors append one line per run to."""
    return tmp_path / "runs.log"


@pytest.fixture
def sample_settings(store_url: str, run_log: Path) -> Callable[..., Settings]:
    """Settings on this test's store with ``[[modules.sample.jobs]]`` entries, no other plugin."""

    def make(jobs: list[dict[str, Any]], **values: Any) -> Settings:
        return Settings(
            database_url=store_url,
            plugins=[SAMPLE_PLUGIN],
            modules={"sample": {"log": str(run_log), "jobs": jobs}},
            **values,
        )

    return make


@pytest.fixture
def telemetry() -> Iterator[tuple[Telemetry, InMemorySpanExporter, InMemoryMetricReader]]:
    """Telemetry recorded in memory: (telemetry, span exporter, metric reader)."""
    spans = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    reader = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[reader])
    yield Telemetry(tracer_provider, meter_provider), spans, reader
    tracer_provider.shutdown()
    meter_provider.shutdown()


@pytest.fixture
def operator(store_url: str, tmp_path: Path) -> Iterator[Operator]:
    """A configuration on this test's store (SQLite or PostgreSQL); see :class:`Operator`."""
    made = Operator(store_url, tmp_path)
    yield made
    made.close()


@pytest.fixture
def sqlite_operator(tmp_path: Path) -> Iterator[Operator]:
    """An SQLite-only :class:`Operator`, for behaviour that does not depend on the backend."""
    made = Operator(f"sqlite:///{tmp_path}/store.db", tmp_path)
    yield made
    made.close()
