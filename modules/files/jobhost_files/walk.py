"""The tree under root: a walk in one total order (path components compared one by one), so a
cursor holding the last relative path done says where a later run resumes; links and the
quarantine folder are reported, never entered.

Orphans wait in ``root/.jobhost-quarantine/YYYY-MM-DD/<relative path>``, dated the day (UTC) they
were moved: ``quarantine_days`` counts time in quarantine, not the file's age.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from enum import StrEnum
from logging import Logger
from pathlib import Path

from jobhost_contracts import Cancellation

from jobhost_files.outcome import CleanupReport

__all__ = [
    "QUARANTINE_DIR",
    "Entry",
    "EntryKind",
    "UnsafePath",
    "is_inside",
    "make_dirs",
    "purge",
    "quarantine_target",
    "walk",
]

QUARANTINE_DIR = ".jobhost-quarantine"
"""The folder directly under root where quarantined files wait to be purged."""

_DAY = re.compile(r"\d{4}-\d{2}-\d{2}")


class EntryKind(StrEnum):
    FILE = "file"
    SYMLINK = "symlink"
    QUARANTINE = "quarantine"
    SPECIAL = "special"  # a socket, a FIFO, a device, or a name that is not text


@dataclass(frozen=True, slots=True)
class Entry:
    """One thing the walk found: ``relative`` uses ``/`` whatever the platform."""

    relative: str
    kind: EntryKind


def walk(root: Path, after: str = "") -> Iterator[Entry]:
    """Every entry under ``root`` whose relative path sorts after ``after``, in order (``a/b``
    before ``a-b``). A directory is entered, not an entry, unless a link or the quarantine."""
    cursor = tuple(after.split("/")) if after else ()
    yield from _walk_dir(root, (), cursor)


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


class UnsafePath(OSError):
    def __init__(self, path: Path) -> None:
        super().__init__(f"{path} is a symbolic link or not a directory; refusing to go through")
        self.path = path


def quarantine_target(root: Path, day: date, relative: str) -> Path:
    """Where ``relative`` goes when quarantined on ``day``; a free name if that one is taken."""
    target = root / QUARANTINE_DIR / day.isoformat() / relative
    candidate = target
    number = 1
    while os.path.lexists(candidate):
        # The same path orphaned twice in one day: keep both, the later one numbered.
        candidate = target.with_name(f"{target.name}.{number}")
        number += 1
    return candidate


def make_dirs(root: Path, directory: Path) -> None:
    """Create ``directory`` under ``root`` one level at a time, refusing any symbolic link:
    ``Path.mkdir(parents=True)`` would follow one planted in the quarantine out of root."""
    current = root
    for part in directory.relative_to(root).parts:
        current = current / part
        try:
            os.mkdir(current)
        except FileExistsError:
            if not stat.S_ISDIR(os.lstat(current).st_mode):
                raise UnsafePath(current) from None


def purge(
    root: Path,
    now: datetime,
    days: int,
    report: CleanupReport,
    *,
    cancellation: Cancellation,
    logger: Logger,
) -> None:
    """Delete quarantined files whose day folder is more than ``days`` days old, counted in
    ``report`` (a dry run only counts them)."""
    folder = root / QUARANTINE_DIR
    if not os.path.isdir(folder) or os.path.islink(folder):
        return
    cutoff = (now - timedelta(days=days)).date()
    with os.scandir(folder) as scan:
        days_found = sorted(scan, key=lambda item: item.name)
    for item in days_found:
        if cancellation.cancelled:
            break
        day = None if item.is_symlink() or not item.is_dir(follow_symlinks=False) else _day(item)
        if day is None:
            logger.warning("quarantine: %s is not a day folder; left alone", item.path)
            report.skipped += 1
        elif day < cutoff:
            _purge_tree(Path(item.path), report, logger)


def _day(item: os.DirEntry[str]) -> date | None:
    try:
        return date.fromisoformat(item.name) if _DAY.fullmatch(item.name) else None
    except ValueError:
        return None


def _purge_tree(directory: Path, report: CleanupReport, logger: Logger) -> None:
    dry_run = report.dry_run
    try:
        with os.scandir(directory) as scan:
            entries = list(scan)
    except OSError as error:
        logger.warning("quarantine: cannot list %s: %s", directory, error)
        report.errors += 1
        return
    for entry in entries:
        path = Path(entry.path)
        try:
            mode = entry.stat(follow_symlinks=False).st_mode
            if stat.S_ISDIR(mode):
                _purge_tree(path, report, logger)
            elif stat.S_ISREG(mode):
                if not dry_run:
                    os.unlink(path)
                report.purged += 1
                logger.debug("quarantine: %s %s", "would purge" if dry_run else "purged", path)
            else:
                # We only ever move regular files in; anything else was put here by hand.
                logger.warning("quarantine: %s is not a regular file; left alone", path)
                report.skipped += 1
        except FileNotFoundError:
            continue
        except OSError as error:
            logger.warning("quarantine: cannot purge %s: %s", path, error)
            report.errors += 1
    if not dry_run:
        # Not empty when something was left alone above; that is reported there.
        with contextlib.suppress(OSError):
            os.rmdir(directory)
