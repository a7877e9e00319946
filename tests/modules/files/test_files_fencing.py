"""Two replicas on one tree, one of them holding a lease that was taken over.

The state is the host's real store (``StoreJobState`` on a migrated SQLite file): the job's
fencing token lives in its ``schedules`` row, and a claim by another replica bumps it.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from files_support import (
    JOB,
    NOW,
    ORPHANS,
    REFERENCED,
    YOUNG_ORPHAN,
    files_settings,
    files_under,
    make_context,
)
from jobhost_contracts import JobState
from jobhost_files.cleanup import OrphanCleanup
from jobhost_files.outcome import LeaseLost
from jobhost_files.walk import QUARANTINE_DIR
from returns.result import Failure
from sqlalchemy import text
from sqlalchemy.engine import Engine

from jobhost.store import StoreJobState, create_store_engine, upgrade

DAY = NOW.date().isoformat()


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[Engine]:
    engine = create_store_engine(f"sqlite:///{tmp_path}/store.db")
    upgrade(engine)
    with engine.begin() as connection:
        connection.execute(
            text(
                "INSERT INTO schedules (job_name, module, timezone, trigger_source, enabled, "
                "orphaned, paused, fencing_token, created_at, updated_at) "
                "VALUES (:job, 'files', 'UTC', 'declaration', 1, 0, 0, 1, :now, :now)"
            ),
            {"job": JOB, "now": datetime.now(UTC).replace(tzinfo=None)},
        )
    yield engine
    engine.dispose()


def take_over(engine: Engine, token: int) -> None:
    """What a claim by another replica does to the job's fence."""
    with engine.begin() as connection:
        connection.execute(
            text("UPDATE schedules SET fencing_token = :token WHERE job_name = :job"),
            {"token": token, "job": JOB},
        )


def stored_cursor(engine: Engine) -> str | None:
    with engine.connect() as connection:
        value = connection.execute(
            text("SELECT value FROM job_state WHERE job_name = :job AND key = 'cursor'"),
            {"job": JOB},
        ).scalar()
    return None if value is None else str(value)


def state(engine: Engine, token: int) -> StoreJobState:
    return StoreJobState(engine, JOB, token, lambda: datetime.now(UTC))


def run(section: dict[str, Any], job_state: JobState, token: int) -> Any:
    executor = OrphanCleanup(files_settings(section), clock=lambda: NOW)
    return executor.execute(make_context(job_state, config=section, token=token))


class _StolenAfterFirstCommit:
    """Replica A's state, whose lease is taken over by replica B right after A's first commit.

    Delegates every call to the real store; the takeover and B's whole run happen in between,
    as they would on another machine.
    """

    def __init__(self, inner: StoreJobState, steal: Any) -> None:
        self._inner = inner
        self._steal = steal
        self._sets = 0

    def get(self, key: str) -> str | None:
        return self._inner.get(key)

    def set(self, key: str, value: str) -> None:
        self._inner.set(key, value)
        self._sets += 1
        if self._sets == 2:  # 1 proves the lease, 2 commits batch 1
            self._steal()

    def record(self, idempotency_key: str) -> bool:
        return self._inner.record(idempotency_key)

    def seen(self, idempotency_key: str) -> bool:
        return self._inner.seen(idempotency_key)


def test_a_run_whose_lease_is_already_gone_touches_nothing(
    tree: dict[str, Any], engine: Engine
) -> None:
    root = Path(tree["root"])
    before = files_under(root)
    take_over(engine, 2)

    result = run(tree, state(engine, 1), token=1)

    assert isinstance(result, Failure) and isinstance(result.failure(), LeaseLost)
    assert "lease lost" in str(result.failure())
    assert files_under(root) == before
    assert stored_cursor(engine) is None


def test_the_stale_replica_cursor_write_is_rejected_and_no_effect_is_doubled(
    tree: dict[str, Any], engine: Engine
) -> None:
    root = Path(tree["root"])
    outcomes: dict[str, Any] = {}

    def replica_b_takes_over() -> None:
        take_over(engine, 2)
        outcomes["b"] = run(tree, state(engine, 2), token=2)

    replica_a = _StolenAfterFirstCommit(state(engine, 1), replica_b_takes_over)
    outcomes["a"] = run(tree, replica_a, token=1)

    # B resumed from A's committed cursor and finished the walk.
    assert outcomes["b"].unwrap().complete
    # A went on with one more batch (it cannot know sooner) and was stopped at its commit.
    result_a = outcomes["a"]
    assert isinstance(result_a, Failure)
    lost = result_a.failure()
    assert isinstance(lost, LeaseLost) and "token 1 < 2" in str(lost)
    # The stale write changed nothing: the cursor is B's (walk finished), not A's.
    assert stored_cursor(engine) == ""
    # Every orphan moved exactly once (no ".1" copy), nothing referenced touched.
    assert files_under(root / QUARANTINE_DIR / DAY) == set(ORPHANS)
    assert {*REFERENCED, YOUNG_ORPHAN} <= files_under(root)
    moved = lost.report.moved + outcomes["b"].unwrap().moved
    assert moved == len(ORPHANS)
