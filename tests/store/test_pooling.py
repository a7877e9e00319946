"""``store_pooling = "transaction"``: nothing in the session, everything in the transaction; and
the check that a store with the default keeps its server process."""

from __future__ import annotations

import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url

from jobhost.store import create_store_engine, reading
from jobhost.store.postgres import PooledOptionsError, check_pooling, option_pairs

SETTINGS = (
    "SELECT current_setting('statement_timeout'), "
    "current_setting('idle_in_transaction_session_timeout'), current_schema()"
)


@pytest.mark.postgres
def test_every_transaction_sets_the_timeouts_and_the_urls_settings_and_nothing_is_prepared(
    postgres_url: str,
) -> None:
    engine = create_store_engine(
        postgres_url, pooling="transaction", statement_timeout=7, idle_transaction_timeout=9
    )
    schema = option_pairs(make_url(postgres_url))["search_path"]
    try:
        for _ in range(3):  # a pooled connection's next transaction too
            with reading(engine) as connection:
                assert tuple(connection.execute(text(SETTINGS)).one()) == ("7s", "9s", schema)
                raw = connection.connection.dbapi_connection
                assert raw is not None
                assert raw.prepare_threshold is None
                assert "options" not in raw.info.get_parameters()
        check_pooling(engine)  # told of the pooling: nothing to check
    finally:
        engine.dispose()


@pytest.mark.postgres
def test_a_direct_connection_passes_the_pooler_check(postgres_url: str) -> None:
    engine = create_store_engine(postgres_url)
    try:
        check_pooling(engine)
    finally:
        engine.dispose()


@pytest.mark.parametrize(
    ("options", "pairs"),
    [
        ("-csearch_path=a", {"search_path": "a"}),
        ("-c search_path=a -cTimeZone=UTC", {"search_path": "a", "TimeZone": "UTC"}),
        ("--work_mem=4MB", {"work_mem": "4MB"}),
        ("", {}),
    ],
)
def test_the_urls_options_are_read_as_settings(options: str, pairs: dict[str, str]) -> None:
    url = make_url("postgresql+psycopg://u@h/db").update_query_dict({"options": options})
    assert option_pairs(url) == pairs


@pytest.mark.parametrize("options", ["-csearch_path", "-c", "search_path=a", "-d 2"])
def test_options_a_transaction_cannot_set_are_refused_naming_the_word(options: str) -> None:
    url = make_url("postgresql+psycopg://u@h/db").update_query_dict({"options": options})
    with pytest.raises(PooledOptionsError, match="store_pooling"):
        option_pairs(url)
