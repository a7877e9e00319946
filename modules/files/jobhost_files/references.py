"""The set of paths the application still references, read once per run from its database.

An error while reading is a :class:`ReferencesUnavailable` value, never an empty set: a cleanup
that took "no rows because the query failed" for "nothing is referenced" would remove everything.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from pathlib import PurePosixPath

from returns.result import Failure, Result, Success
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.pool import NullPool

from jobhost_files.outcome import ReferencesUnavailable

__all__ = ["References", "load_references"]


@dataclass(frozen=True)
class References:
    """Referenced paths relative to root, normalised (an absolute one under root made
    relative). ``refused`` counts values empty, not text, outside root or with a ``..``; one that
    still names a place inside root (``a/../b``) protects that file all the same."""

    paths: frozenset[str]
    refused: int


def load_references(
    url: str, query: str, root: PurePosixPath
) -> Result[References, ReferencesUnavailable]:
    """Run ``query`` on the database at ``url``: one column of paths relative to ``root``."""
    try:
        rows = _fetch(url, query)
    except (SQLAlchemyError, ImportError, OSError, ValueError) as error:
        return Failure(ReferencesUnavailable(f"{type(error).__name__}: {_first_line(error)}"))
    if isinstance(rows, str):
        return Failure(ReferencesUnavailable(rows))
    normalised = [_normalise(value, root) for value in rows]
    paths = frozenset(path for path, _ in normalised if path is not None)
    return Success(References(paths, sum(not accepted for _, accepted in normalised)))


def _fetch(url: str, query: str) -> list[object] | str:
    """The first column of every row, or a message when the query does not return one column."""
    parsed = make_url(url)
    if parsed.drivername in {"postgresql", "postgres"}:
        # psycopg 3 is the driver installed with jobhost; the bare name means psycopg2.
        parsed = parsed.set(drivername="postgresql+psycopg")
    engine = create_engine(parsed, poolclass=NullPool)
    try:
        with engine.connect() as connection:
            result = connection.execute(text(query))
            columns = list(result.keys())
            if len(columns) != 1:
                # Taking the first of (id, path) would call every file orphaned.
                return (
                    f"references_query returned {len(columns)} columns "
                    f"({', '.join(columns) or 'none'}); it must return exactly one: the path"
                )
            return [row[0] for row in result]
    finally:
        engine.dispose()


def _normalise(value: object, root: PurePosixPath) -> tuple[str | None, bool]:
    """(path to protect or None, whether the value was a clean relative path)."""
    if isinstance(value, bytes):
        try:
            value = value.decode("utf-8")
        except UnicodeDecodeError:
            return None, False
    if not isinstance(value, str) or not value or "\x00" in value:
        return None, False
    if value.startswith("/"):
        candidate = PurePosixPath(posixpath.normpath(value))
        if not candidate.is_relative_to(root):
            return None, False
        value = str(candidate.relative_to(root))
    normal = posixpath.normpath(value)
    if normal in {".", ".."} or normal.startswith("../"):
        return None, False
    return normal, ".." not in value.split("/")


def _first_line(error: BaseException) -> str:
    # SQLAlchemy appends the statement and a documentation link; the driver's message is enough.
    original = getattr(error, "orig", None)
    message = str(original if original is not None else error).strip()
    return message.splitlines()[0] if message else type(error).__name__
