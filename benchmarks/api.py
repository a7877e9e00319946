"""The job API's cost: ``python benchmarks/api.py [sqlite|postgres ...]``.

Serves ``/api/v1`` (the ASGI application ``jobhost serve`` builds, with a token) over a store
holding ``JOBS`` runtime jobs, then prints the median and 95th percentile of ``REPEAT`` requests
each: ``PUT`` of a changed definition (validation, the job row, its schedule row and the change
log in one transaction), ``GET`` of one job, ``GET /jobs`` of all of them, and ``GET /changes``.
PostgreSQL comes from ``JOBHOST_TEST_POSTGRES_URL``, in a schema of its own, dropped afterwards.
"""

from __future__ import annotations

import hashlib
import json
import os
import statistics
import sys
import tempfile
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from sqlalchemy import create_engine, make_url, text

from jobhost.catalog import build_catalog
from jobhost.config import Settings
from jobhost.runtime.service import JobService
from jobhost.store import create_store_engine, upgrade
from jobhost.web import WebServer, create_app, store_endpoints
from jobhost.web.api.routes import api_routes

JOBS = 200
REPEAT = 50
SECRET = "benchmark-secret-0123456789"


@contextmanager
def store(kind: str) -> Iterator[str]:
    if kind == "sqlite":
        with tempfile.TemporaryDirectory() as directory:
            yield f"sqlite:///{directory}/store.db"
        return
    base = make_url(os.environ["JOBHOST_TEST_POSTGRES_URL"]).set(drivername="postgresql+psycopg")
    schema = f"bench_{uuid.uuid4().hex[:10]}"
    admin = create_engine(base, isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(text(f'CREATE SCHEMA "{schema}"'))
    try:
        url = base.update_query_dict({"options": f"-csearch_path={schema}"})
        yield url.render_as_string(hide_password=False)
    finally:
        with admin.connect() as connection:
            connection.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()


def timed(call: Callable[[], object]) -> tuple[float, float]:
    call()  # warm-up
    samples = []
    for _ in range(REPEAT):
        start = time.perf_counter()
        call()
        samples.append((time.perf_counter() - start) * 1000)
    samples.sort()
    return statistics.median(samples), samples[int(len(samples) * 0.95) - 1]


def request(base: str, method: str, path: str, body: object = None) -> None:
    data = None if body is None else json.dumps(body).encode()
    sent = urllib.request.Request(
        f"{base}{path}",
        data=data,
        method=method,
        headers={"Authorization": f"Bearer {SECRET}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(sent, timeout=30) as answer:
        answer.read()


def measure(kind: str) -> None:
    with store(kind) as url:
        settings = Settings(
            database_url=url,
            api_tokens=[
                {
                    "name": "bench",
                    "sha256": hashlib.sha256(SECRET.encode()).hexdigest(),
                    "scopes": ["read", "write", "trigger"],
                }
            ],
        )
        engine = create_store_engine(url)
        upgrade(engine)
        catalog = build_catalog(settings, environ={"JOBHOST_LOAD_PLUGINS": "http"})
        service = JobService(settings, catalog, engine)
        for index in range(JOBS):
            body = {"kind": "http", "interval": "1h", "settings": {"url": f"http://x/{index}"}}
            service.put(f"bench.job-{index:04d}", body, actor="setup", if_match=None)
        app = create_app(
            store_endpoints(settings, catalog, engine), routes=api_routes(settings, catalog, engine)
        )
        server = WebServer(("127.0.0.1", 0), app)
        server.start()
        base = f"http://127.0.0.1:{server.address[1]}/api/v1"
        turn = iter(range(10**6))
        try:
            figures = {
                "PUT /jobs/{name} (a change)": timed(
                    lambda: request(
                        base,
                        "PUT",
                        "/jobs/bench.job-0000",
                        {
                            "kind": "http",
                            "interval": f"{60 + next(turn)}m",
                            "settings": {"url": "http://x/0"},
                            "reason": "benchmark",
                        },
                    )
                ),
                "GET /jobs/{name}": timed(lambda: request(base, "GET", "/jobs/bench.job-0001")),
                f"GET /jobs ({JOBS} runtime jobs)": timed(lambda: request(base, "GET", "/jobs")),
                "GET /changes?limit=100": timed(lambda: request(base, "GET", "/changes")),
            }
        finally:
            server.stop()
            engine.dispose()
        for what, (median, p95) in figures.items():
            print(f"{kind:<9} {what:<34} median {median:7.1f} ms   p95 {p95:7.1f} ms")


if __name__ == "__main__":
    for name in sys.argv[1:] or ["sqlite"]:
        measure(name)
