"""Fixtures of the reliability suite: a cuttable proxy to PostgreSQL and clusters of replicas."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.engine import Engine, make_url

from jobhost.store import create_store_engine, upgrade
from tests.reliability.harness import Cluster
from tests.reliability.proxy import CutProxy


@pytest.fixture
def proxy(postgres_url: str) -> Iterator[CutProxy]:
    """A proxy in front of the test server; the test cuts it, never the server."""
    server = make_url(postgres_url)
    with CutProxy(server.host or "127.0.0.1", server.port or 5432) as started:
        yield started


@pytest.fixture
def store(postgres_url: str) -> Iterator[Engine]:
    """An engine on this test's PostgreSQL schema, migrated before any replica starts."""
    engine = create_store_engine(postgres_url)
    upgrade(engine)
    yield engine
    engine.dispose()


@pytest.fixture
def make_cluster(tmp_path: Path) -> Iterator[Callable[..., Cluster]]:
    """``make_cluster(database_url, jobs, **settings)``; every replica is stopped afterwards."""
    made: list[Cluster] = []

    def make(database_url: str, jobs: list[dict[str, Any]], **settings: str) -> Cluster:
        directory = tmp_path / f"cluster-{len(made)}"
        directory.mkdir()
        cluster = Cluster(directory, database_url, jobs, **settings)
        made.append(cluster)
        return cluster

    yield make
    for cluster in made:
        for replica in cluster.replicas:
            if replica.alive:
                replica.kill()
