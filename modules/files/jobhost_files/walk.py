"""A stable, resumable walk of the tree under root that never leaves it.

Entries come in one total order (path components compared one by one, names sorted as strings),
so a cursor holding the last relative path done says exactly where a later run resumes. Symbolic
links are reported, never followed; the quarantine folder is reported, never entered.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

__all__ = ["QUARANTINE_DIR", "Entry", "EntryKind", "is_inside", "sort_key", "walk"]

QUARANTINE_DIR = ".jobhost-quarantine"
"""The folder directly under root where quarantined files wait to be purged."""


class EntryKind(StrEnum):
    FILE = "file"
    SYMLINK = "symlink"
    QUARANTINE = "quarantine"
    SPECIAL = "special"
    """A socket, a FIFO, a device, or a name that cannot be stored as text."""


@dataclass(frozen=True, slots=True)
class Entry:
    """One thing the walk found: ``relative`` uses ``/`` whatever the platform."""

    relative: str
    kind: EntryKind


def walk(root: Path, after: str = "") -> Iterator[Entry]:
    """Every entry under ``root`` whose relative path sorts after ``after``, in sorted order.

    Directories are not entries of their own: a directory is entered, unless it is a symbolic
    link or the quarantine folder, which are entries (and are not entered).
    """
    cursor = sort_key(after) if after else ()
    yield from _walk_dir(root, (), cursor)


def sort_key(relative: str) -> tuple[str, ...]:
    """The order of the walk: by path components, so ``a/b`` comes before ``a-b``."""
    return tuple(relative.split("/"))


def is_inside(root: Path, path: Path) -> bool:
    """Whether ``path`` is under ``root`` with no symbolic link on the way (root is resolved)."""
    real = os.path.realpath(path)
    return real == os.path.normpath(path) and Path(real).is_relative_to(root)


def _walk_dir(directory: Path, prefix: tuple[str, ...], cursor: tuple[str, ...]) -> Iterator[Entry]:
    try:
        with os.scandir(directory) as scan:
            entries = sorted(scan, key=lambda item: item.name)
    except FileNotFoundError:
        # Removed since its parent was listed (another replica, the application): nothing left.
        return
    for item in entries:
        parts = (*prefix, item.name)
        # Everything under a directory sorts before the cursor when its own path does, unless
        # the cursor lies inside it; so whole subtrees already done are never listed again.
        if parts < cursor[: len(parts)]:
            continue
        relative = "/".join(parts)
        if not _storable(item.name):
            if not cursor or parts > cursor:
                yield Entry(relative, EntryKind.SPECIAL)
            continue
        try:
            info = item.stat(follow_symlinks=False)
        except FileNotFoundError:
            continue
        if stat.S_ISDIR(info.st_mode):
            if not prefix and item.name == QUARANTINE_DIR:
                if not cursor or parts > cursor:
                    yield Entry(relative, EntryKind.QUARANTINE)
                continue
            inside = cursor if cursor[: len(parts)] == parts else ()
            yield from _walk_dir(Path(item.path), parts, inside)
            continue
        if cursor and parts <= cursor:
            continue
        if stat.S_ISLNK(info.st_mode):
            yield Entry(relative, EntryKind.SYMLINK)
        elif stat.S_ISREG(info.st_mode):
            yield Entry(relative, EntryKind.FILE)
        else:
            yield Entry(relative, EntryKind.SPECIAL)


def _storable(name: str) -> bool:
    # A name that is not valid UTF-8 cannot be written as a cursor or matched against the
    # application's references; it is reported, not guessed at.
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
