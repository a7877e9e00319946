"""Calling one store function in a transaction the store opens: the way code outside the store
runs a read or a single write without holding a connection.

``read(engine, get_run, run_id)`` runs ``get_run(connection, run_id)`` on a connection that does
not take SQLite's write lock; ``write(engine, mark_stuck, run_id, host_id, message)`` runs it in
a transaction of its own, committed when it returns. An operation that writes several things at
once is a function of its own in the store (``jobhost.store.actions``, ``ledger``, ``claims``).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Concatenate, ParamSpec, TypeVar

from sqlalchemy.engine import Connection, Engine

from jobhost.clock import Clock
from jobhost.store.clock import database_now
from jobhost.store.engine import reading

__all__ = ["read", "read_at", "write"]

_P = ParamSpec("_P")
_T = TypeVar("_T")


def read(
    engine: Engine,
    query: Callable[Concatenate[Connection, _P], _T],
    /,
    *args: _P.args,
    **kwargs: _P.kwargs,
) -> _T:
    """``query(connection, *args, **kwargs)`` on a read-only connection."""
    with reading(engine) as connection:
        return query(connection, *args, **kwargs)


def read_at(
    engine: Engine,
    clock: Clock,
    query: Callable[Concatenate[Connection, datetime, _P], _T],
    /,
    *args: _P.args,
    **kwargs: _P.kwargs,
) -> tuple[datetime, _T]:
    """The store's instant (see :func:`~jobhost.store.clock.database_now`) and
    ``query(connection, now, *args, **kwargs)``, read together."""
    with reading(engine) as connection:
        now = database_now(connection, clock)
        return now, query(connection, now, *args, **kwargs)


def write(
    engine: Engine,
    operation: Callable[Concatenate[Connection, _P], _T],
    /,
    *args: _P.args,
    **kwargs: _P.kwargs,
) -> _T:
    """``operation(connection, *args, **kwargs)`` in a transaction of its own."""
    with engine.begin() as connection:
        return operation(connection, *args, **kwargs)
