"""``files.orphan-cleanup``: read the referenced set (a failure touches nothing), prove the lease
with a cursor write, purge old quarantine, then walk the tree after the cursor in batches,
committing it after each. Every action is idempotent, so a replayed batch is harmless.
"""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from itertools import islice
from pathlib import Path, PurePosixPath

from jobhost_contracts import JobContext, StaleLeaseError
from returns.result import Failure, Result, Success

from jobhost_files.outcome import (
    CleanupError,
    CleanupReport,
    LeaseLost,
    NoReferences,
    NotConfigured,
    RootUnavailable,
)
from jobhost_files.references import References, load_references
from jobhost_files.settings import CleanupMode, FilesSettings
from jobhost_files.walk import (
    QUARANTINE_DIR,
    Entry,
    EntryKind,
    UnsafePath,
    is_inside,
    make_dirs,
    purge,
    quarantine_target,
    walk,
)

__all__ = ["CURSOR_KEY", "OrphanCleanup"]

CURSOR_KEY = "cursor"
"""The job-state key holding the last relative path done; empty when no walk is under way."""


@dataclass(frozen=True, eq=False, repr=False)
class OrphanCleanup:
    """The executor. ``settings`` is None when ``[modules.files]`` is absent."""

    settings: FilesSettings | None
    clock: Callable[[], datetime] = lambda: datetime.now(UTC)

    def execute(self, context: JobContext) -> Result[CleanupReport, CleanupError]:
        settings = self.settings
        if settings is None:
            return Failure(NotConfigured())
        unsafe = _root_problem(settings.root)
        if unsafe is not None:
            return Failure(RootUnavailable(settings.root, unsafe))
        now = self.clock()
        loaded = load_references(
            settings.references_url, settings.references_query, PurePosixPath(settings.root)
        )
        match loaded:
            case Failure(error):
                context.logger.error("%s", error)
                return Failure(error)
            case Success(found):
                references: References = found
        if not references.paths and not settings.allow_empty_references:
            empty = NoReferences()
            context.logger.error("%s", empty)
            return Failure(empty)
        report = CleanupReport(dry_run=settings.dry_run, skipped=references.refused)
        try:
            _Run(settings, context, now, references, report).go()
        except StaleLeaseError as error:
            lost = LeaseLost(error, report)
            context.logger.warning("%s", lost)
            return Failure(lost)
        context.logger.info(
            "%s%s", "dry run, nothing touched: " if settings.dry_run else "", report
        )
        return Success(report)


@dataclass
class _Run:
    """The state of one run; its writes to ``context.state`` may raise StaleLeaseError."""

    settings: FilesSettings
    context: JobContext
    now: datetime
    references: References
    report: CleanupReport

    def go(self) -> None:
        settings, context, report = self.settings, self.context, self.report
        dry = settings.dry_run
        # A dry run reports on the whole tree and leaves the real runs' cursor where it is.
        cursor = "" if dry else (context.state.get(CURSOR_KEY) or "")
        if not dry:
            # Rewriting the cursor proves the lease is still ours before anything is touched.
            context.state.set(CURSOR_KEY, cursor)
        purge(
            settings.root,
            self.now,
            settings.quarantine_days,
            report,
            cancellation=context.cancellation,
            logger=context.logger,
        )
        if cursor:
            context.logger.info("resuming the walk after %r", cursor)
        entries = walk(settings.root, cursor)
        while not context.cancellation.cancelled:
            batch = list(islice(entries, settings.batch_size))
            for entry in batch:
                self._handle(entry)
            if len(batch) < settings.batch_size:
                report.complete = True
                break
            if not dry:
                context.state.set(CURSOR_KEY, batch[-1].relative)
        if report.complete and not dry:
            context.state.set(CURSOR_KEY, "")
        elif not report.complete:
            context.logger.info("cancelled (%s); the next run resumes", context.cancellation.reason)

    def _handle(self, entry: Entry) -> None:
        report = self.report
        report.scanned += 1
        if entry.kind is not EntryKind.FILE:
            report.skipped += 1
            # Our own quarantine is expected every run; a link or a socket is worth a look.
            level = logging.DEBUG if entry.kind is EntryKind.QUARANTINE else logging.INFO
            self.context.logger.log(level, "skipped %s (%s)", entry.relative, entry.kind.value)
            return
        if entry.relative in self.references.paths:
            return
        path = self.settings.root / entry.relative
        try:
            info = os.lstat(path)
            if not stat.S_ISREG(info.st_mode) or not is_inside(self.settings.root, path):
                # Changed since it was listed (replaced by a link, or a directory on the way was).
                report.skipped += 1
                self.context.logger.warning("skipped %s: no longer a plain file", entry.relative)
                return
            age = self.now.timestamp() - info.st_mtime
            if age < self.settings.min_age.total_seconds():
                return
            report.orphaned += 1
            self._act(path, entry.relative)
        except FileNotFoundError:
            # Gone since it was listed: another replica, or the application, got there first.
            return
        except OSError as error:
            report.errors += 1
            self.context.logger.warning("could not clean up %s: %s", entry.relative, error)

    def _act(self, path: Path, relative: str) -> None:
        settings, report, logger = self.settings, self.report, self.context.logger
        if settings.dry_run:
            logger.info("would %s orphan %s", settings.mode.value, relative)
            return
        if settings.mode is CleanupMode.DELETE:
            os.unlink(path)
            report.deleted += 1
            logger.info("deleted orphan %s", relative)
            return
        target = quarantine_target(settings.root, self.now.date(), relative)
        make_dirs(settings.root, target.parent)
        if not is_inside(settings.root, target.parent):
            raise UnsafePath(target.parent)
        os.rename(path, target)
        report.moved += 1
        logger.info("quarantined orphan %s", relative)


def _root_problem(root: Path) -> str | None:
    if not root.is_dir():
        return "is not a directory (unmounted, or removed?)"
    quarantine = root / QUARANTINE_DIR
    if os.path.lexists(quarantine) and (
        os.path.islink(quarantine) or not os.path.isdir(quarantine)
    ):
        return f"has a {QUARANTINE_DIR} that is not a plain directory"
    return None
