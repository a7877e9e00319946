"""The harness's outage is real: a cut proxy drops open connections and refuses new ones."""

from __future__ import annotations

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.exc import OperationalError
from sqlalchemy.pool import NullPool

from tests.reliability.harness import through_proxy
from tests.reliability.proxy import CutProxy

pytestmark = [pytest.mark.postgres]


def test_a_cut_drops_open_connections_and_refuses_new_ones_until_restored(
    postgres_url: str, proxy: CutProxy
) -> None:
    engine = create_engine(through_proxy(postgres_url, proxy), poolclass=NullPool)
    try:
        with engine.connect() as open_connection:
            assert open_connection.execute(text("SELECT 1")).scalar() == 1
            proxy.cut()
            with pytest.raises(OperationalError):
                open_connection.execute(text("SELECT 1"))
        with pytest.raises(OperationalError), engine.connect():
            pass
        proxy.restore()
        with engine.connect() as connection:
            assert connection.execute(text("SELECT 1")).scalar() == 1
    finally:
        engine.dispose()
