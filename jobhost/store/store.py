"""The store as the rest of jobhost sees it: one object, one method per operation, each opening
its own transaction, so code outside this package holds no connection and no engine.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from datetime import datetime
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar

from sqlalchemy.engine import Connection, Engine

from jobhost.clock import Clock, SystemClock
from jobhost.store import (
    actions,
    backfills,
    claims,
    engine,
    failures,
    integrity,
    ledger,
    migrate,
    postgres,
    purge,
    reports,
    runtime,
    sessions,
    snapshot,
)
from jobhost.store.engine import StoreTime, database_now, store_now
from jobhost.store.ledger import StoreJobState
from jobhost.store.signals import ChangeSignal, SignalWatcher

__all__ = ["Store"]

_P = ParamSpec("_P")
_T = TypeVar("_T")
_C = TypeVar("_C", bound=Callable[..., Any])


class _Operation(Generic[_C]):
    """Binds a store function to the store and keeps the bound callable among the store's own
    attributes, so every call, the firing loop's among them, goes straight to it."""

    _name = ""

    def __set_name__(self, _owner: type[Store], name: str) -> None:
        self._name = name

    def __get__(self, store: Store, _owner: type[Store]) -> _C:
        bound = self._bind(store)
        store.__dict__[self._name] = bound
        return bound

    def _bind(self, store: Store) -> _C:
        raise NotImplementedError


class _Read(_Operation[Callable[_P, _T]]):
    """A store function of a connection, run on a connection for reads only."""

    def __init__(self, query: Callable[Concatenate[Connection, _P], _T]) -> None:
        self._query = query

    def _bind(self, store: Store) -> Callable[_P, _T]:
        query = self._query

        def call(*args: _P.args, **kwargs: _P.kwargs) -> _T:
            with engine.reading(store._engine) as connection:
                return query(connection, *args, **kwargs)

        return call


class _ReadAt(_Operation[Callable[_P, tuple[datetime, _T]]]):
    """A store function of a connection and the store's instant: returns both, read together."""

    def __init__(self, query: Callable[Concatenate[Connection, datetime, _P], _T]) -> None:
        self._query = query

    def _bind(self, store: Store) -> Callable[_P, tuple[datetime, _T]]:
        query = self._query

        def call(*args: _P.args, **kwargs: _P.kwargs) -> tuple[datetime, _T]:
            with engine.reading(store._engine) as connection:
                now = database_now(connection, store.clock)
                return now, query(connection, now, *args, **kwargs)

        return call


class _Own(_Operation[Callable[_P, _T]]):
    """A store operation that opens its own transactions (several, or with a retry)."""

    def __init__(self, operation: Callable[Concatenate[Engine, _P], _T]) -> None:
        self._operation = operation

    def _bind(self, store: Store) -> Callable[_P, _T]:
        return functools.partial(self._operation, store._engine)


class Store:
    """One database holding the schedules, the run ledger, the hosts and the change log."""

    def __init__(self, store_engine: Engine, clock: Clock | None = None) -> None:
        self._engine = store_engine
        self.clock: Clock = clock or SystemClock()
        # Bound now, so no first call pays for it (a pass that runs once a minute included).
        for name in _OPERATIONS:
            getattr(self, name)

    @classmethod
    def open(cls, url: str, clock: Clock | None = None, /, **options: Any) -> Store:
        """The store at ``url`` (SQLite or PostgreSQL); ``options`` as
        :func:`~jobhost.store.engine.create_store_engine` takes them."""
        return cls(engine.create_store_engine(url, **options), clock)

    def with_clock(self, clock: Clock) -> Store:
        """This store read on ``clock`` where the database keeps no time (SQLite)."""
        return Store(self._engine, clock)

    def dispose(self) -> None:
        self._engine.dispose()

    @property
    def is_read_only(self) -> bool:
        return engine.is_read_only(self._engine)

    def answers(self, within: float = 1.0) -> bool:
        return engine.answers(self._engine, within)

    def now(self) -> datetime:
        """The store's instant: the database's on PostgreSQL, the clock's on SQLite."""
        return store_now(self._engine, self.clock)

    def time(self) -> StoreTime:
        return StoreTime(self._engine, self.clock)

    def signal_watcher(self, wake: Callable[[], None]) -> SignalWatcher:
        return SignalWatcher(self._engine, wake)

    def change_signal(self) -> ChangeSignal:
        return ChangeSignal(self._engine)

    # -- schema ------------------------------------------------------------------------------
    upgrade = _Own(migrate.upgrade)
    current_revision = _Own(migrate.current_revision)
    audit_store = _Own(integrity.audit_store)
    check_pooling = _Own(postgres.check_pooling)
    health_rows = _ReadAt(integrity.health_rows)

    # -- the firing loop ---------------------------------------------------------------------
    sync_catalog = _Own(claims.sync_catalog)
    claim = _Own(claims.claim)
    due_jobs = _Own(claims.due_jobs)
    look_ahead = _Own(claims.look_ahead)
    settle_backfill = _Own(actions.settle_backfill)
    record_finished = _Own(ledger.record_finished)
    job_state = _Own(StoreJobState)

    # -- hosts and leases --------------------------------------------------------------------
    start_host = _Own(ledger.start_host)
    beat = _Own(ledger.beat)
    release_runs = _Own(ledger.release_runs)
    abandon_dead_runs = _Own(ledger.abandon_dead_runs)

    # -- operator actions, each with its change-log entry ------------------------------------
    act = _Own(actions.act)
    purge = _Own(purge.purge)

    # -- runtime jobs and the change log -----------------------------------------------------
    write_runtime_job = _Own(runtime.write_runtime_job)
    list_runtime_jobs = _Read(runtime.list_runtime_jobs)
    search_changes = _Read(runtime.search_changes)

    # -- reads for the CLI, the API and the console ------------------------------------------
    list_schedules = _Read(reports.list_schedules)
    stored_job_names = _Read(reports.stored_job_names)
    read_snapshot = _Own(snapshot.read_snapshot)
    failure_rows = _ReadAt(failures.failure_rows)
    list_backfills = _Read(backfills.list_backfills)
    job_page = _Read(snapshot.job_page)
    run_pages = _Read(snapshot.run_pages)

    # -- the console's sessions and the brake on wrong guesses -------------------------------
    session_version = _Own(sessions.session_version)
    count_wrong_guess = _Own(sessions.count_wrong_guess)


_OPERATIONS = [name for name, value in vars(Store).items() if isinstance(value, _Operation)]
