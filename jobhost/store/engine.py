"""Opening the store and speaking to it: one engine per process, tuned for each database
(:mod:`jobhost.store.sqlite`, :mod:`jobhost.store.postgres`); :func:`database` says which."""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from jobhost_contracts import redact_text
from sqlalchemy import (
    JSON,
    DateTime,
    Select,
    Table,
    Text,
    bindparam,
    cast,
    column,
    func,
    select,
)
from sqlalchemy.engine import URL, Connection, Dialect, Engine, make_url
from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError
from sqlalchemy.types import TypeDecorator, TypeEngine

from jobhost.clock import Clock, utc_instant
from jobhost.store.postgres import DEADLINE_MARGIN, PoolingMode, Postgres
from jobhost.store.sqlite import (
    READ_ONLY,
    SQLite,
    is_away,
    is_read_only,
    sqlite_path,
)

if TYPE_CHECKING:
    from tenacity import RetryCallState

__all__ = [
    "COPY_FROM",
    "DEADLINE_MARGIN",
    "DEFAULT_STATEMENT_TIMEOUT",
    "BatchValue",
    "Database",
    "StoreRetry",
    "StoreTime",
    "UTCDateTime",
    "answers",
    "built",
    "copy_ignoring_duplicates",
    "create_store_engine",
    "database",
    "database_now",
    "execute_batch",
    "execute_isolating",
    "from_json",
    "insert_returning_new",
    "is_read_only",
    "is_store_down",
    "lift_deadline",
    "locked",
    "reading",
    "rows_json",
    "sqlite_path",
    "store_now",
    "writing",
]

_log = logging.getLogger("jobhost.store")
# Seconds: the defaults of store_connect_timeout, store_statement_timeout and lease_duration
# (which a host's engine uses for the idle transaction timeout).
DEFAULT_CONNECT_TIMEOUT = 10.0
DEFAULT_STATEMENT_TIMEOUT = 60.0
DEFAULT_IDLE_TRANSACTION_TIMEOUT = 60.0
_ANSWER_FRESH = 1.0  # seconds one look of answers() stands for every caller
Database = Postgres | SQLite
"""What differs between the store's two databases, one class each; :func:`database` picks it."""
_DATABASES: dict[str, Database] = {"postgresql": Postgres(), "sqlite": SQLite()}


def create_store_engine(
    url: str | URL,
    *,
    create: bool = True,
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
    statement_timeout: float = DEFAULT_STATEMENT_TIMEOUT,
    idle_transaction_timeout: float = DEFAULT_IDLE_TRANSACTION_TIMEOUT,
    pooling: PoolingMode = "none",
    listen_url: str | None = None,
    **options: Any,
) -> Engine:
    """An engine for the store at ``url``; without ``create``, a missing SQLite file is refused.
    The PostgreSQL timeouts are seconds (0: off): ``connect_timeout`` bounds opening a
    connection, waiting for one from the pool, and unacknowledged data; ``statement_timeout``
    each statement; ``idle_transaction_timeout`` a transaction left idle, whose locked rows every
    other replica would skip for ever. ``pooling``, ``listen_url``: see
    :mod:`jobhost.store.postgres`."""
    parsed = make_url(url)
    if parsed.drivername in {"postgresql", "postgres"}:
        parsed = parsed.set(drivername="postgresql+psycopg")
    return _DATABASES[parsed.get_backend_name()].open(
        parsed,
        create,
        options,
        connect_timeout=connect_timeout,
        statement_timeout=statement_timeout,
        idle_transaction_timeout=idle_transaction_timeout,
        pooling=pooling,
        listen_url=listen_url,
    )


def database(bound: Connection | Engine) -> Database:
    return _DATABASES[bound.dialect.name]


def lift_deadline(connection: Connection) -> None:
    """No client-side deadline on ``connection`` until it goes back to the pool (a migration,
    which may take longer than any statement of the store's operations)."""
    raw: Any = connection.connection.dbapi_connection
    if hasattr(raw, "deadline"):
        raw.deadline = None


def answers(engine: Engine, within: float = 1.0) -> bool:
    """Whether the store answered a trivial read within ``within`` seconds (one look per engine
    at a time, on its own thread, standing for :data:`_ANSWER_FRESH` seconds)."""
    look = _LOOKS.setdefault(engine, _Look())
    return look.answered(engine, within)


class _Look:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._done.set()
        self._ok = True
        self._at = -_ANSWER_FRESH

    def answered(self, engine: Engine, within: float) -> bool:
        with self._lock:
            if self._done.is_set() and time.monotonic() - self._at >= _ANSWER_FRESH:
                self._done.clear()
                threading.Thread(
                    target=self._look, args=(engine,), name="jobhost-store-look", daemon=True
                ).start()
            done = self._done
        return done.wait(within) and self._ok

    def _look(self, engine: Engine) -> None:
        ok = False
        try:
            with reading(engine) as connection:
                connection.exec_driver_sql("SELECT 1")
            ok = True
        except Exception:  # the store's error is the caller's to meet and say, not this look's
            ok = False
        finally:
            self._ok, self._at = ok, time.monotonic()
            self._done.set()


_LOOKS: weakref.WeakKeyDictionary[Engine, _Look] = weakref.WeakKeyDictionary()


def reading(engine: Engine) -> Connection:
    """A connection for reads only: on SQLite it does not take the write lock."""
    return engine.connect().execution_options(**{READ_ONLY: True})


@contextlib.contextmanager
def writing(engine: Engine, clock: Clock) -> Iterator[tuple[Connection, datetime]]:
    """A transaction, committed when the block ends, and the store's instant read in it."""
    with engine.begin() as connection:
        yield connection, database_now(connection, clock)


def database_now(connection: Connection, fallback: Clock) -> datetime:
    """The database's current instant on PostgreSQL; ``fallback()`` on SQLite."""
    return database(connection).now(connection, fallback)


def store_now(engine: Engine, fallback: Clock) -> datetime:
    """:func:`database_now` in a short read of its own."""
    if not database(engine).server:
        return fallback()
    with engine.connect() as connection:
        return database_now(connection, fallback)


class StoreTime:
    """The store's time as one host keeps it: on PostgreSQL read now and then, and estimated in
    between as the last reading moved on by the monotonic clock; on SQLite the host's clock."""

    def __init__(self, engine: Engine, clock: Clock) -> None:
        self._engine = engine
        self._clock = clock
        self._local = not database(engine).server
        self._read_at: tuple[datetime, float] | None = None

    def estimate(self) -> datetime:
        if self._local:
            return self._clock()
        if self._read_at is None:
            return self.read()
        read, at = self._read_at
        return read + timedelta(seconds=time.monotonic() - at)

    def read(self) -> datetime:
        return self.noted(store_now(self._engine, self._clock), time.monotonic())

    def noted(self, now: datetime, at: float) -> datetime:
        """Note ``now`` as the store's time read at monotonic ``at``."""
        self._read_at = (now, at)
        return now


def built(connection: Connection, name: str, build: Callable[[Database], Any]) -> Any:
    """The statement ``name`` for this dialect, built (and cache-keyed) once per process."""
    key = (name, connection.dialect.name)
    statement = _BUILT.get(key)
    if statement is None:
        statement = _BUILT[key] = build(database(connection))
    return statement


_BUILT: dict[tuple[str, str], Any] = {}


def locked(connection: Connection, statement: Select[Any]) -> Select[Any]:
    """Lock the selected rows, skipping rows another replica holds (PostgreSQL only: every
    SQLite transaction of the store holds the write lock)."""
    found: Select[Any] = database(connection).locked(statement, skip_locked=True)
    return found


COPY_FROM = 100
"""The fewest rows :func:`copy_ignoring_duplicates` sends by ``COPY`` on PostgreSQL."""


def copy_ignoring_duplicates(
    connection: Connection, table: Table, rows: Sequence[dict[str, Any]], column: str
) -> set[Any]:
    """:func:`insert_returning_new` for many rows; the ``column`` values that went in. On
    PostgreSQL, :data:`COPY_FROM` rows or more travel by ``COPY`` (formatted in C) into a
    temporary table, then over in one ``INSERT ... SELECT``."""
    if not rows:
        return set()
    if not database(connection).batches or len(rows) < COPY_FROM:
        return set(insert_returning_new(connection, table, rows, [column]))
    names = list(rows[0])
    listed = ", ".join(f'"{name}"' for name in names)
    staging = f"jobhost_copy_{table.name}"
    # Only the copied columns, without the table's constraints: a NOT NULL column the rows
    # leave to its server default is filled by the INSERT below, not refused by the COPY.
    connection.exec_driver_sql(
        f'CREATE TEMPORARY TABLE "{staging}" ON COMMIT DROP AS '
        f'SELECT {listed} FROM "{table.name}" WITH NO DATA'
    )
    # COPY bypasses SQLAlchemy's binding: run each column's own bind step (UTCDateTime refuses
    # a naive instant) before psycopg formats the row.
    dialect = connection.dialect
    binds = [table.c[name].type.dialect_impl(dialect).bind_processor(dialect) for name in names]
    cursor = connection.connection.driver_connection.cursor()  # type: ignore[union-attr]
    with cursor.copy(f'COPY "{staging}" ({listed}) FROM STDIN') as copy:
        for row in rows:
            copy.write_row(
                [
                    row[name] if bind is None else bind(row[name])
                    for name, bind in zip(names, binds, strict=True)
                ]
            )
    inserted = connection.exec_driver_sql(
        f'INSERT INTO "{table.name}" ({listed}) SELECT {listed} FROM "{staging}" '
        f'ON CONFLICT ("{column}") DO NOTHING RETURNING "{column}"'
    )
    keys = set(inserted.scalars())
    # Dropped now, not only at commit: a second call in the same transaction creates it again.
    connection.exec_driver_sql(f'DROP TABLE "{staging}"')
    return keys


def insert_returning_new(
    connection: Connection, table: Table, rows: Sequence[dict[str, Any]], columns: Sequence[str]
) -> list[Any]:
    """Insert ``rows`` in one statement, leaving out (not raising) those whose ``columns``
    collide with a stored row; the primary keys (their first column) of those that went in."""
    if not rows:
        return []
    batches = database(connection).batches
    names = tuple(rows[0]) if batches else ()

    def build(db: Database) -> Any:
        insert = db.insert(table)
        if names:
            source = json_rows([(name, table.c[name].type) for name in names])
            insert = insert.from_select(list(names), select(*(source.c[n] for n in names)))
        return insert.on_conflict_do_nothing(index_elements=list(columns)).returning(
            *table.primary_key.columns
        )

    name = f"insert-new:{table.name}:{','.join(columns)}:{','.join(names)}"
    statement = built(connection, name, build)
    values = rows_json(rows) if batches else [dict(row) for row in rows]
    return [row[0] for row in connection.execute(statement, values)]


def json_rows(columns: Sequence[tuple[str, Any]]) -> Any:
    """PostgreSQL: rows decoded from :func:`rows_json`'s one parameter, a column per ``(name,
    type)``: one prepared text whatever the batch size, and one string the C encoder writes
    (arrays dumped in Python cost a busy host a sixth of its CPU)."""
    return (
        func.json_to_recordset(cast(bindparam(_ROWS, type_=Text), JSON))
        .table_valued(*(column(name, kind) for name, kind in columns))
        .render_derived(name="v", with_types=True)
    )


def rows_json(rows: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """The rows as the one parameter of :func:`json_rows`, instants in ISO 8601 UTC (a naive
    one refused)."""
    return {_ROWS: _ENCODER.encode(rows)}


_ROWS = "json_rows"


def _instant(value: object) -> str:
    if not isinstance(value, datetime):
        raise TypeError(f"a {type(value).__name__} cannot be written in a batch of rows")
    return utc_instant(value).isoformat()


_ENCODER = json.JSONEncoder(default=_instant, allow_nan=False, separators=(",", ":"))


def execute_isolating(
    connection: Connection,
    statement: Any,
    rows: Sequence[dict[str, Any]],
    *,
    isolate: bool = True,
) -> list[dict[str, Any]]:
    """Run ``statement`` for every row; return the rows refused, each tried alone when the batch
    is (``isolate=False``: the batch plainly, its caller retries isolated)."""
    if not rows:
        return []
    if not isolate:
        connection.execute(statement, list(rows))
        return []
    if _went_in(connection, statement, list(rows)):
        return []
    return [row for row in rows if not _went_in(connection, statement, [row])]


def _went_in(connection: Connection, statement: Any, rows: list[dict[str, Any]]) -> bool:
    """Whether ``rows`` went in, in a savepoint of their own (refused: rolled back to it)."""
    try:
        with connection.begin_nested():
            connection.execute(statement, rows)
    except DBAPIError as error:
        if is_store_down(error):
            raise
        return False
    return True


BatchValue = Callable[[str, Any], Any]
"""A batch statement's value for one row: ``value(name, type)``."""


def execute_batch(
    connection: Connection,
    name: str,
    build: Callable[[BatchValue], Any],
    rows: list[dict[str, Any]],
    *,
    isolate: bool,
) -> list[dict[str, Any]]:
    """:func:`execute_isolating` for the statement ``build`` makes, which names its values
    through ``value(name, type)``: on PostgreSQL, unless isolating, the JSON rows' columns."""
    if not rows:
        return []
    if not database(connection).batches or isolate:
        statement = built(connection, name, lambda _: build(_bound))
        return execute_isolating(connection, statement, rows, isolate=isolate)
    statement = built(connection, f"{name}:json", lambda _: from_json(build))
    connection.execute(statement, rows_json(rows))
    return []


def from_json(build: Callable[[BatchValue], Any]) -> Any:
    """The statement ``build`` makes, its values the columns of JSON rows (PostgreSQL)."""
    kinds: dict[str, Any] = {}

    def note(key: str, kind: Any) -> Any:
        kinds.setdefault(key, kind)
        return _bound(key, kind)

    build(note)  # once to learn the values' names and types
    source = json_rows(list(kinds.items()))
    return build(lambda key, _kind: source.c[key])


def _bound(name: str, kind: Any) -> Any:
    return bindparam(name, type_=kind)


class UTCDateTime(TypeDecorator[datetime]):
    """An instant, stored in UTC (SQLite: as naive text), returned aware; text that is not a
    time (a hand edit) is read as missing, so the loop repairs the row. A naive value going in
    is refused: it is a bug that would be off by the local offset."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def load_dialect_impl(self, dialect: Dialect) -> TypeEngine[Any]:
        return dialect.type_descriptor(_DATABASES[dialect.name].instant_type)

    def bind_processor(self, dialect: Dialect) -> Any:
        return _DATABASES[dialect.name].bind_instant

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> Any:
        return self.bind_processor(dialect)(value)

    def result_processor(self, dialect: Dialect, coltype: object) -> Any:
        # A direct conversion: reports read a hundred thousand of these.
        if self.impl_instance.result_processor(dialect, coltype) is not None:
            return super().result_processor(dialect, coltype)
        return _DATABASES[dialect.name].read_instant(self.process_result_value, dialect)

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if isinstance(value, str):
            with contextlib.suppress(ValueError):
                value = datetime.fromisoformat(value)
        if not isinstance(value, datetime):
            _log.warning("stored time %r is not a time; treating it as missing", value)
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)


_T = TypeVar("_T")


def is_store_down(error: BaseException) -> bool:
    """Whether ``error`` says the store cannot be reached (as opposed to a bad row or statement)."""
    if isinstance(error, DBAPIError) and error.connection_invalidated:
        return True
    if isinstance(error, OperationalError | InterfaceError):
        return True
    return is_away(error)


class _Stopped(Exception):
    pass


@dataclass(frozen=True, kw_only=True)
class StoreRetry:
    """How one kind of store call is retried and logged; once it stops trying, the last error
    is raised. Threads may share it."""

    what: str
    """Names the call in the log: ``"heartbeat"``, ``"recording finished runs"``."""
    waits: Sequence[float]
    """Seconds between tries; the last repeats."""
    retry_on: Callable[[BaseException], bool] = is_store_down
    give_up: Callable[[int], bool] | None = None
    """Given the number of tries made, whether to stop now."""
    stopping: threading.Event | None = None
    """Set: stop at once, even during a pause."""
    on_failure: Callable[[BaseException], None] | None = None
    """Called with every error that is retried (e.g. to mark the store lost)."""
    warn: Literal["once", "each"] = "once"
    """Warn once per outage, or at every failure."""

    def call(self, operation: Callable[[], _T], *, what: str | None = None) -> _T:
        # Imported on the first retried call: a command that only reads never makes one.
        from tenacity import Retrying, retry_if_exception, wait_chain, wait_fixed

        name = what or self.what
        last: list[BaseException] = []
        retrying = Retrying(
            retry=retry_if_exception(self.retry_on),
            wait=wait_chain(*(wait_fixed(seconds) for seconds in self.waits or (0.0,))),
            stop=self._stop,
            sleep=self._sleep,
            before_sleep=lambda state: self._failed(name, state, last),
            reraise=True,
        )
        try:
            result = retrying(operation)
        except _Stopped:
            raise last[-1] from None
        if last:
            _log.info("%s: the store answers again after %d failed tries", name, len(last))
        return result

    def _stop(self, state: RetryCallState) -> bool:
        if self.stopping is not None and self.stopping.is_set():
            return True
        return self.give_up is not None and self.give_up(state.attempt_number)

    def _sleep(self, seconds: float) -> None:
        if self.stopping is None:
            time.sleep(seconds)
        elif self.stopping.wait(seconds):
            raise _Stopped

    def _failed(self, name: str, state: RetryCallState, last: list[BaseException]) -> None:
        error = state.outcome.exception() if state.outcome is not None else None
        if error is None:
            return
        last.append(error)
        if self.on_failure is not None:
            self.on_failure(error)
        if self.warn == "each" or len(last) == 1:
            first_line = str(error).splitlines()[0] if str(error) else ""
            kind = "store unreachable" if is_store_down(error) else "error"
            pause = state.upcoming_sleep
            _log.warning(
                "%s failed: %s (%s: %s); retrying in %gs",
                name,
                kind,
                type(error).__name__,
                redact_text(first_line),
                pause,
            )
