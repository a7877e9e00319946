"""Wrong credentials counted through the store, so every replica brakes the same guesser.

One row per (key, minute window): a wrong guess adds one to the row of each key it counts
under, in one upsert that answers the new counts. Windows before the previous one are of no
use and are deleted by :func:`purge_guesses`. The table is created by migration 0017.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import BigInteger, Column, Integer, String, Table, delete
from sqlalchemy.engine import Connection

from jobhost.records import GUESS_KEY_LENGTH
from jobhost.store._sql import dialect_module
from jobhost.store.schema import metadata

__all__ = ["count_wrong_guess", "purge_guesses", "wrong_guesses"]


wrong_guesses = Table(
    "wrong_guesses",
    metadata,
    Column("key", String(GUESS_KEY_LENGTH), primary_key=True),
    Column("minute", BigInteger, primary_key=True),
    Column("count", Integer, nullable=False),
)


def count_wrong_guess(connection: Connection, keys: Sequence[str], minute: int) -> dict[str, int]:
    """Add one wrong guess to each of ``keys`` (each at most :data:`GUESS_KEY_LENGTH`
    characters) in ``minute``; each key's count there now. The rows are written in the order of
    ``keys``: callers list them in one order, so two at once lock them alike and never deadlock."""
    insert: Any = dialect_module(connection.dialect.name).insert
    statement = insert(wrong_guesses).values(
        [{"key": key, "minute": minute, "count": 1} for key in keys]
    )
    statement = statement.on_conflict_do_update(
        index_elements=["key", "minute"],
        set_={"count": wrong_guesses.c.count + 1},
    ).returning(wrong_guesses.c.key, wrong_guesses.c.count)
    return {str(key): int(count) for key, count in connection.execute(statement)}


def purge_guesses(connection: Connection, before: int) -> int:
    """Delete the counts of windows before ``before``; how many rows went."""
    return connection.execute(delete(wrong_guesses).where(wrong_guesses.c.minute < before)).rowcount
