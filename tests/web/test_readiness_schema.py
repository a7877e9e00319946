"""``/readyz`` of a process serving the store (no host) says what to do about the schema: run
the migration when the store is behind, upgrade jobhost when a newer release migrated it."""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.engine import Engine

from jobhost.catalog import build_catalog
from jobhost.config import Settings
from jobhost.store import Store, head_revision
from jobhost.web import store_endpoints


def _readiness(store_url: str, engine: Engine) -> tuple[bool, str]:
    settings = Settings(database_url=store_url)
    return store_endpoints(settings, build_catalog(settings), Store(engine)).readiness()


def test_a_current_schema_is_ready(store_url: str, engine: Engine) -> None:
    ready, detail = _readiness(store_url, engine)
    assert ready and f"schema {head_revision()}" in detail


def test_a_schema_behind_names_the_revision_this_version_needs(
    store_url: str, engine: Engine
) -> None:
    with engine.begin() as connection:
        connection.execute(text("UPDATE alembic_version SET version_num = '0001'"))
    ready, detail = _readiness(store_url, engine)
    assert not ready
    assert detail == f"store schema at 0001, this version needs {head_revision()}"


def test_a_schema_a_newer_release_wrote_says_upgrade_jobhost(
    store_url: str, engine: Engine
) -> None:
    with engine.begin() as connection:
        connection.execute(text("UPDATE alembic_version SET version_num = '0999'"))
    ready, detail = _readiness(store_url, engine)
    assert not ready
    assert detail.startswith(f"store schema 0999 is newer than this jobhost ({head_revision()})")
    assert "upgrade jobhost" in detail
