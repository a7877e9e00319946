"""Concurrent PUTs of one job without If-Match: every writer succeeds, the last one wins.

With If-Match a PUT is conditional and a lost race is refused (412); without it the writer
asked for no condition, so a race it loses is made again on top of the winner's change.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import UTC, datetime

import pytest

from jobhost.catalog import build_catalog
from jobhost.config import Settings
from jobhost.records import ChangeSearch
from jobhost.runtime.service import JobService
from jobhost.store import Store, create_store_engine, reading, upgrade
from jobhost.store.runtime import get_runtime_job, search_changes
from tests.support import ManualClock

WRITERS = 12


def _body(minutes: int) -> dict[str, object]:
    return {
        "kind": "http",
        "interval": f"{minutes}m",
        "settings": {"url": "http://127.0.0.1:9/ping"},
    }


def test_concurrent_puts_without_if_match_all_succeed_and_the_last_wins(
    sample_settings: Callable[..., Settings], monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = sample_settings([])
    monkeypatch.setenv("JOBHOST_LOAD_PLUGINS", "http")
    engine = create_store_engine(settings.database_url)
    upgrade(engine)
    catalog = build_catalog(settings)
    clock = ManualClock(datetime(2026, 5, 4, 10, 0, tzinfo=UTC))
    start = threading.Barrier(WRITERS)
    errors: list[BaseException] = []

    def write(minutes: int) -> None:
        service = JobService(settings, catalog, Store(engine, clock), trigger_wait=0)
        start.wait()
        try:
            service.put("hooks.race", _body(minutes), actor=f"w{minutes}", if_match=None)
        except BaseException as error:  # every failure is the finding
            errors.append(error)

    threads = [threading.Thread(target=write, args=(m,)) for m in range(1, WRITERS + 1)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert errors == []
        with reading(engine) as connection:
            row = get_runtime_job(connection, "hooks.race")
            changes = search_changes(
                connection, ChangeSearch(job="hooks.race"), 100, oldest_first=True
            )
        assert row is not None
        # The stored definition is the last recorded change's: the last writer's.
        assert changes[-1].after == row.definition
        assert changes[0].action == "create"
        assert len(changes) == row.version
    finally:
        engine.dispose()
