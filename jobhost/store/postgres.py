"""The store on PostgreSQL, the database for several replicas: its clock is the store's, its
row locks let replicas claim side by side, and ``LISTEN``/``NOTIFY`` wakes the hosts. Every wait
for the server has a deadline kept by the client (:mod:`jobhost.store.deadline`).

Behind a connection pooler: a session-mode pooler (or none) gives each connection one server
session for its life, so the store's settings travel as the startup parameter ``options``. A
transaction-mode pooler hands each transaction whichever server connection is free: a prepared
statement, a setting or a ``LISTEN`` is gone, or someone else's, in the next. With
``store_pooling = "transaction"`` the engine prepares nothing, sends no ``options``, and sets
what the session would have held with ``set_config(..., true)`` at the start of every
transaction; wake-ups come through ``store_listen_url`` or by polling. Without it, a host behind
a transaction pooler stops at start-up (:func:`check_pooling`): its timeouts would not hold.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from sqlalchemy import (
    ColumnElement,
    DateTime,
    Table,
    bindparam,
    create_engine,
    event,
    func,
    literal,
    text,
)
from sqlalchemy.engine import URL, Connection, Dialect, Engine

from jobhost.clock import Clock, utc_instant
from jobhost.errors import JobhostError

DEADLINE_MARGIN = 5.0
"""Seconds the client waits for a statement beyond the server's own timeout: the server's
cancellation, and its answer saying so, arrive first whenever the server is there to send it."""
_CHANNEL_SQL = "'jobhost_' || left(md5(coalesce(current_schema(), '')), 16)"
"""The store's channel, computed by the server from the connection's schema: a name of fixed
length (a schema's name may be as long as a channel's may be) and of hexadecimal digits only."""
_NOTIFY = text(f"SELECT pg_notify({_CHANNEL_SQL}, '')")
_CHANNEL = text(f"SELECT {_CHANNEL_SQL}")
_NOW = text("SELECT clock_timestamp()")


class Postgres:
    # Whether a batch of any size travels as one parameter (JSON rows) of one text the server
    # plans once; elsewhere as an executemany.
    batches = True
    # Whether hosts hear a change by LISTEN; elsewhere they read the signal counter.
    listens = True
    # Whether the database is a server: its clock is the store's, and it answers in a process
    # of its own; elsewhere it answers in this process, and the host's clock is the store's.
    server = True
    # Whether a column holds only values of its type (an instant as a time, not text).
    typed = True
    # Whether a LATERAL subquery with a LIMIT is probed a row at a time, where a plain join is
    # planned as a hash join over the whole table.
    lateral = True
    marker = "%s"  # the driver's parameter marker in a raw statement
    instant_type = DateTime(timezone=True)  # the column type of UTCDateTime

    def open(
        self,
        url: URL,
        create: bool,
        options: dict[str, Any],
        *,
        connect_timeout: float,
        statement_timeout: float,
        idle_transaction_timeout: float,
        pooling: PoolingMode,
        listen_url: str | None,
    ) -> Engine:
        options.setdefault("pool_pre_ping", True)
        options.setdefault("pool_size", 10)
        if connect_timeout > 0:
            options.setdefault("pool_timeout", connect_timeout)
        # The server settings the timeouts ask for (0: not sent), in milliseconds.
        timeouts = {
            "statement_timeout": statement_timeout,
            "idle_in_transaction_session_timeout": idle_transaction_timeout,
        }
        server = {name: str(round(s * 1000)) for name, s in timeouts.items() if s > 0}
        if pooling == "transaction":
            # Nothing may live in the session: the pooler lends it to others between
            # transactions.
            pooled = Pooling(pooling, listen_url)
            server = {**option_pairs(url), **server}
            url = url.difference_update_query(["options"])
            args = {**_connect_timeouts(connect_timeout), "prepare_threshold": None}
        else:
            pooled = Pooling(pooling, listen_url, session=tuple(server.items()))
            args = {**_connect_timeouts(connect_timeout), **_startup_options(url, server)}
            server = {}
        options["connect_args"] = {**args, **options.get("connect_args", {})}
        engine = create_engine(url, **options)
        _POOLINGS[engine] = pooled
        if server:  # pooled per transaction: each one sets them as SET LOCAL would
            statement = "SELECT " + ", ".join("set_config(%s, %s, true)" for _ in server)
            values = tuple(item for pair in server.items() for item in pair)
            event.listen(
                engine, "begin", lambda connection: connection.exec_driver_sql(statement, values)
            )
        if statement_timeout > 0:
            from jobhost.store.deadline import keep_deadline

            deadline = statement_timeout + DEADLINE_MARGIN
            keep_deadline(engine, deadline, _connect_timeouts(connect_timeout))
        return engine

    def now(self, connection: Connection, fallback: Clock) -> datetime:
        value = connection.execute(_NOW).scalar_one()
        assert isinstance(value, datetime)
        return value.astimezone(UTC)

    def locked(self, query: Any, **for_update: Any) -> Any:
        return query.with_for_update(**for_update)

    def insert(self, table: Table) -> Any:
        # Imported when first needed: PostgreSQL's dialect pulls in every PostgreSQL driver's
        # dialect and asyncio, a tenth of a read-only command's start-up on an SQLite store.
        from sqlalchemy.dialects.postgresql import insert

        return insert(table)

    def notify(self, connection: Connection) -> None:
        connection.execute(_NOTIFY)

    def joined(self, value: Any, separator: str, *order: Any) -> ColumnElement[Any]:
        from sqlalchemy.dialects.postgresql import aggregate_order_by

        return func.string_agg(value, aggregate_order_by(literal(separator), *order))

    @staticmethod
    def bind_instant(value: datetime | None) -> datetime | None:
        return None if value is None else utc_instant(value)

    def read_instant(
        self, slow: Callable[[Any, Dialect], datetime | None], dialect: Dialect
    ) -> Callable[[Any], datetime | None]:
        utc = UTC

        def aware(value: Any) -> datetime | None:
            if value is None:
                return None
            if type(value) is datetime and value.tzinfo is not None:
                # The store's sessions are in UTC: nearly every value is already there.
                return value if value.tzinfo is utc else value.astimezone(utc)
            return slow(value, dialect)  # naive, or not a time: the generic path

        return aware


def channel(engine: Engine) -> str:
    """The store's ``LISTEN`` channel, as the connection's schema names it: a direct listener's
    URL need not repeat the store's search path."""
    with engine.connect() as connection:
        return str(connection.execute(_CHANNEL).scalar_one())


def _connect_timeouts(connect: float) -> dict[str, Any]:
    """libpq's parameters for opening a connection and finding a dead peer."""
    if connect <= 0:
        return {}
    return {
        "connect_timeout": max(2, round(connect)),  # libpq's least
        "tcp_user_timeout": round(connect * 1000),
        # A connection whose peer vanished is found within about ``connect`` seconds idle.
        "keepalives": 1,
        "keepalives_idle": max(1, round(connect / 2)),
        "keepalives_interval": max(1, round(connect / 6)),
        "keepalives_count": 3,
    }


def _startup_options(url: URL, server: dict[str, str]) -> dict[str, Any]:
    """libpq's ``options`` for the server settings and the session's zone, after the URL's."""
    wanted = " ".join(f"-c {name}={value}" for name, value in server.items())
    given = url.query.get("options", "")
    given = given if isinstance(given, str) else " ".join(given)
    # The session's zone is UTC unless the URL's options name another: the driver then decodes
    # each instant straight to UTC, where any other zone name (``Etc/UTC`` too) makes a zoned
    # value every read moves to UTC again (a third of reading 10,000 schedule rows). Every
    # stored time is a timestamptz: nothing depends on the session's zone.
    if not (wanted or given):
        return {}
    return {"options": f"-c TimeZone=UTC {given} {wanted}".strip()}


PoolingMode = Literal["none", "transaction"]
_REFUSED = "unsupported startup parameter"
"""What PgBouncer answers a startup parameter it does not pass on (``options``)."""
_POOLINGS: weakref.WeakKeyDictionary[Engine, Pooling] = weakref.WeakKeyDictionary()
_SETTINGS = text("SELECT name, setting FROM pg_settings WHERE name IN :names").bindparams(
    bindparam("names", expanding=True)
)
_log = logging.getLogger("jobhost.store")


@dataclass(frozen=True, slots=True)
class Pooling:
    """How an engine's connections reach PostgreSQL."""

    mode: PoolingMode = "none"
    listen_url: str | None = None
    """A direct URL to ``LISTEN`` on, past the pooler; None: poll the signal counter."""
    session: tuple[tuple[str, str], ...] = ()
    """``none``: the server settings the ``options`` startup parameter asks each session for."""


class TransactionPoolerError(JobhostError):
    """The store's connections go through a transaction-mode pooler the settings do not name."""

    exit_code = 3

    def __init__(self, evidence: str) -> None:
        super().__init__(
            f"the store is behind a transaction-mode connection pooler ({evidence}): set "
            'store_pooling = "transaction" (JOBHOST_STORE_POOLING=transaction), or pool in '
            "session mode"
        )


class PooledOptionsError(JobhostError):
    """The URL's ``options`` hold something a transaction cannot set."""

    exit_code = 3

    def __init__(self, word: str) -> None:
        super().__init__(
            f"database_url's options word {word!r} is not '-c name=value', the only form "
            'store_pooling = "transaction" can apply (with SET LOCAL in each transaction)'
        )


def pooling_of(engine: Engine) -> Pooling:
    return _POOLINGS.get(engine, Pooling())


def option_pairs(url: URL) -> dict[str, str]:
    """The ``-c name=value`` settings of the URL's own ``options`` parameter, in order."""
    given = url.query.get("options", "")
    words = iter((given if isinstance(given, str) else " ".join(given)).split())
    pairs: dict[str, str] = {}
    for word in words:
        if word == "-c":
            setting = next(words, "")
        elif word.startswith(("-c", "--")):
            setting = word[2:]
        else:
            setting = ""
        name, equals, value = setting.partition("=")
        if not (equals and name):
            raise PooledOptionsError(word)
        pairs[name] = value
    return pairs


def startup_refused(error: BaseException) -> TransactionPoolerError | None:
    """The error to raise instead of ``error`` when it is a pooler refusing ``options``."""
    if _REFUSED not in str(error):
        return None
    return TransactionPoolerError(f'it refused the startup parameter "options": {_REFUSED}')


def check_pooling(engine: Engine) -> None:
    """Raise :class:`TransactionPoolerError` when ``engine`` pools sessions (``none``) but its
    transactions do not keep one server process; warn when its sessions lack the settings
    their ``options`` asked for. Two transactions of one connection, with one of another
    between them: a transaction pooler lends the first one's server process to the other (or
    the first one gets another)."""
    # Only a server's engine has a pooling set (SQLite's has no connections to compare).
    pooling = _POOLINGS.get(engine)
    if pooling is None or pooling.mode == "transaction":
        return
    with engine.connect() as first:
        before = _backend(first)
        with engine.connect() as second:
            other = _backend(second)
        after = _backend(first)
        dropped = _dropped(first, dict(pooling.session))
    if other == before:
        raise TransactionPoolerError("two connections were served by one server process")
    if after != before:
        raise TransactionPoolerError(
            "the server process changed between two transactions of one connection"
        )
    if dropped:
        _log.warning(
            "the store's sessions do not hold %s as the options startup parameter asked (a "
            'pooler that drops it?): set them on the role, or set store_pooling = "transaction"',
            ", ".join(dropped),
        )


def _backend(connection: Connection) -> Any:
    pid = connection.execute(text("SELECT pg_backend_pid()")).scalar()
    connection.commit()
    return pid


def _dropped(connection: Connection, wanted: dict[str, str]) -> list[str]:
    """The settings of ``wanted`` (milliseconds, as pg_settings shows them) the session lacks."""
    if not wanted:
        return []
    rows = connection.execute(_SETTINGS, {"names": list(wanted)}).all()
    held: dict[str, str] = {str(name): str(value) for name, value in rows}
    connection.commit()
    return [name for name, value in wanted.items() if held.get(name) != value]
