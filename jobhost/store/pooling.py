"""A store behind a connection pooler.

A session-mode pooler (or none) gives each connection one server session for its life, so the
store's settings travel as the startup parameter ``options``. A transaction-mode pooler hands
each transaction whichever server connection is free: a prepared statement, a setting or a
``LISTEN`` is gone, or someone else's, in the next. With ``store_pooling = "transaction"`` the
engine prepares nothing, sends no ``options``, and sets what the session would have held with
``set_config(..., true)`` at the start of every transaction; wake-ups come through
``store_listen_url`` or by polling. Without it, a host behind a transaction pooler stops at
start-up (:func:`check_pooling`): its timeouts would not hold.
"""

from __future__ import annotations

import logging
import weakref
from dataclasses import dataclass
from typing import Any, Literal

from sqlalchemy import bindparam, event, text
from sqlalchemy.engine import URL, Connection, Engine

from jobhost.errors import JobhostError

__all__ = [
    "PooledOptionsError",
    "Pooling",
    "PoolingMode",
    "TransactionPoolerError",
    "check_pooling",
    "option_pairs",
    "pooling_of",
    "set_locally",
    "startup_refused",
]

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

    @property
    def per_transaction(self) -> bool:
        return self.mode == "transaction"


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


def set_locally(engine: Engine, pooling: Pooling, settings: dict[str, str]) -> None:
    """Remember ``pooling`` for ``engine``; when it pools transactions, give every transaction
    the server ``settings`` (name to value) as ``SET LOCAL`` would, in one statement."""
    _POOLINGS[engine] = pooling
    if not pooling.per_transaction or not settings:
        return
    statement = "SELECT " + ", ".join("set_config(%s, %s, true)" for _ in settings)
    values = tuple(item for pair in settings.items() for item in pair)

    def begin(connection: Connection) -> None:
        connection.exec_driver_sql(statement, values)

    event.listen(engine, "begin", begin)


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
    if pooling is None or pooling.per_transaction:
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
