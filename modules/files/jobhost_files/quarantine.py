"""The quarantine folder: where orphans wait, dated, before they are purged for good.

``root/.jobhost-quarantine/YYYY-MM-DD/<relative path>``: the folder's date is the day (UTC) the
file was moved there, so "older than ``quarantine_days``" counts time spent in quarantine, not
the file's own age (a move keeps the file's modification time).
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from logging import Logger
from pathlib import Path

from jobhost_contracts import Cancellation

from jobhost_files.walk import QUARANTINE_DIR

__all__ = ["PurgeCounts", "UnsafePath", "make_dirs", "purge", "quarantine_target"]

_DAY = re.compile(r"\d{4}-\d{2}-\d{2}")


class UnsafePath(OSError):
    """A directory on the way is a symbolic link or not a directory: following it could leave
    root."""

    def __init__(self, path: Path) -> None:
        super().__init__(f"{path} is a symbolic link or not a directory; refusing to go through")
        self.path = path


@dataclass(slots=True)
class PurgeCounts:
    purged: int = 0
    skipped: int = 0
    errors: int = 0


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
    """Create ``directory`` under ``root`` one level at a time, refusing any symbolic link.

    ``Path.mkdir(parents=True)`` would follow a link planted inside the quarantine folder and
    create (then fill) directories outside root.
    """
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
    *,
    dry_run: bool,
    cancellation: Cancellation,
    logger: Logger,
) -> PurgeCounts:
    """Delete quarantined files whose day folder is more than ``days`` days old."""
    counts = PurgeCounts()
    folder = root / QUARANTINE_DIR
    if not os.path.isdir(folder) or os.path.islink(folder):
        return counts
    cutoff = (now - timedelta(days=days)).date()
    with os.scandir(folder) as scan:
        days_found = sorted(scan, key=lambda item: item.name)
    for item in days_found:
        if cancellation.cancelled:
            break
        if item.is_symlink() or not item.is_dir(follow_symlinks=False) or not _is_day(item.name):
            logger.warning("quarantine: %s is not a day folder; left alone", item.path)
            counts.skipped += 1
            continue
        if date.fromisoformat(item.name) < cutoff:
            _purge_tree(Path(item.path), counts, dry_run=dry_run, logger=logger)
    return counts


def _is_day(name: str) -> bool:
    if not _DAY.fullmatch(name):
        return False
    try:
        date.fromisoformat(name)
    except ValueError:
        return False
    return True


def _purge_tree(directory: Path, counts: PurgeCounts, *, dry_run: bool, logger: Logger) -> None:
    try:
        with os.scandir(directory) as scan:
            entries = list(scan)
    except OSError as error:
        logger.warning("quarantine: cannot list %s: %s", directory, error)
        counts.errors += 1
        return
    for entry in entries:
        path = Path(entry.path)
        try:
            mode = entry.stat(follow_symlinks=False).st_mode
            if stat.S_ISDIR(mode):
                _purge_tree(path, counts, dry_run=dry_run, logger=logger)
            elif stat.S_ISREG(mode):
                if not dry_run:
                    os.unlink(path)
                counts.purged += 1
                logger.debug("quarantine: %s %s", "would purge" if dry_run else "purged", path)
            else:
                # We only ever move regular files in; anything else was put here by hand.
                logger.warning("quarantine: %s is not a regular file; left alone", path)
                counts.skipped += 1
        except FileNotFoundError:
            continue
        except OSError as error:
            logger.warning("quarantine: cannot purge %s: %s", path, error)
            counts.errors += 1
    if not dry_run:
        # Not empty when something was left alone above; that is reported there.
        with contextlib.suppress(OSError):
            os.rmdir(directory)
