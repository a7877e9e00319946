"""A PostgreSQL store session runs in UTC, so instants are decoded straight to UTC."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url

from jobhost.store import create_store_engine, reading
from jobhost.store.reports import list_schedules
from jobhost.store.schema import schedules
from tests.migrated import migrate

pytestmark = pytest.mark.postgres

_AT = datetime(2026, 5, 4, 10, 0, 1, 250000, tzinfo=UTC)


def test_the_session_zone_is_utc_and_instants_come_back_in_utc(postgres_url: str) -> None:
    engine = create_store_engine(postgres_url)
    try:
        migrate(engine)
        with engine.begin() as connection:
            connection.execute(schedules.insert().values(**_row()))
        with reading(engine) as connection:
            zone = connection.execute(text("SHOW TimeZone")).scalar_one()
            row = list_schedules(connection)["a.job"]
    finally:
        engine.dispose()
    assert zone == "UTC"
    assert row.next_occurrence == _AT
    assert row.next_occurrence is not None and row.next_occurrence.tzinfo is UTC


def test_a_zone_the_url_names_is_kept_and_instants_still_come_back_in_utc(
    postgres_url: str,
) -> None:
    url = make_url(postgres_url)
    given = url.query["options"]
    berlin = url.update_query_dict({"options": f"{given} -c TimeZone=Europe/Berlin"})
    engine = create_store_engine(berlin.render_as_string(hide_password=False))
    try:
        migrate(engine)
        with engine.begin() as connection:
            connection.execute(schedules.insert().values(**_row()))
        with reading(engine) as connection:
            zone = connection.execute(text("SHOW TimeZone")).scalar_one()
            row = list_schedules(connection)["a.job"]
    finally:
        engine.dispose()
    assert zone == "Europe/Berlin"
    assert row.next_occurrence == _AT
    assert row.next_occurrence is not None and row.next_occurrence.tzinfo is UTC


def _row() -> dict[str, object]:
    return {
        "job_name": "a.job",
        "module": "a",
        "trigger_kind": "interval",
        "trigger_expression": "5m",
        "timezone": "UTC",
        "trigger_source": "declaration",
        "enabled": True,
        "next_occurrence": _AT,
        "created_at": _AT,
        "updated_at": _AT,
    }
