"""jobhost module ``files``: removes files under a root directory that the application no longer
references.

Configured by ``[modules.files]`` in ``jobhost.toml``; registered through the ``jobhost``
entry point (:mod:`jobhost_files.plugin`). Its one job, ``files.orphan-cleanup``, walks root in
sorted, cursor-committed batches and quarantines (or deletes) every file older than ``min_age``
that the application's reference query does not return.
"""

from __future__ import annotations

from jobhost_files.cleanup import CURSOR_KEY, OrphanCleanup
from jobhost_files.outcome import (
    CleanupError,
    CleanupReport,
    LeaseLost,
    NoReferences,
    NotConfigured,
    ReferencesUnavailable,
    RootUnavailable,
)
from jobhost_files.plugin import JOB_NAME
from jobhost_files.settings import CleanupMode, FilesSettings, parse_settings
from jobhost_files.walk import QUARANTINE_DIR

__all__ = [
    "CURSOR_KEY",
    "JOB_NAME",
    "QUARANTINE_DIR",
    "CleanupError",
    "CleanupMode",
    "CleanupReport",
    "FilesSettings",
    "LeaseLost",
    "NoReferences",
    "NotConfigured",
    "OrphanCleanup",
    "ReferencesUnavailable",
    "RootUnavailable",
    "parse_settings",
]
