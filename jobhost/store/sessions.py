"""The console's sessions and the brake on wrong guesses (migrations 0006 and 0017). A sign-out
ends every session of that person, on every replica, by moving their version on; wrong guesses
are counted in the store, one row per (key, minute), so every replica brakes the same guesser."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import BigInteger, Column, Integer, String, Table, delete, select, update
from sqlalchemy.engine import Engine

from jobhost.records import GUESS_KEY_LENGTH
from jobhost.store.engine import UTCDateTime, database, reading
from jobhost.store.schema import metadata

__all__ = [
    "console_sessions",
    "count_wrong_guess",
    "session_version",
    "wrong_guesses",
]


console_sessions = Table(
    "console_sessions",
    metadata,
    Column("who", String(200), primary_key=True),
    Column("version", BigInteger, nullable=False),
    Column("changed_at", UTCDateTime(), nullable=False),
)


def session_version(engine: Engine, who: str, *, ended_at: datetime | None = None) -> int:
    """The current session version of ``who`` (0 until they first sign out); with
    ``ended_at``, every session of theirs ends first."""
    query = select(console_sessions.c.version).where(console_sessions.c.who == who)
    if ended_at is None:
        with reading(engine) as connection:
            found = connection.execute(query).scalar_one_or_none()
            return int(found) if found is not None else 0
    with engine.begin() as connection:
        moved = connection.execute(
            update(console_sessions)
            .where(console_sessions.c.who == who)
            .values(version=console_sessions.c.version + 1, changed_at=ended_at)
        )
        if moved.rowcount == 0:
            connection.execute(
                console_sessions.insert().values(who=who, version=1, changed_at=ended_at)
            )
        return int(connection.execute(query).scalar_one())


wrong_guesses = Table(
    "wrong_guesses",
    metadata,
    Column("key", String(GUESS_KEY_LENGTH), primary_key=True),
    Column("minute", BigInteger, primary_key=True),
    Column("count", Integer, nullable=False),
)


def count_wrong_guess(
    engine: Engine, keys: Sequence[str], minute: int, *, purge: bool = False
) -> dict[str, int]:
    """Add one wrong guess to each of ``keys`` in ``minute``; each key's count there now. Rows
    are written in the order of ``keys``, so two callers lock them alike and never deadlock.
    With ``purge``, the windows before the previous one are deleted."""
    with engine.begin() as connection:
        rows = [{"key": key, "minute": minute, "count": 1} for key in keys]
        statement = database(connection).insert(wrong_guesses).values(rows)
        statement = statement.on_conflict_do_update(
            index_elements=["key", "minute"],
            set_={"count": wrong_guesses.c.count + 1},
        ).returning(wrong_guesses.c.key, wrong_guesses.c.count)
        counts = {str(key): int(count) for key, count in connection.execute(statement)}
        if purge:
            connection.execute(delete(wrong_guesses).where(wrong_guesses.c.minute < minute - 1))
        return counts
