"""The ``files`` plugin: declares ``files.orphan-cleanup`` through the ``jobhost_jobs`` hook."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from jobhost_contracts import (
    BackgroundJobDeclaration,
    JobRegistration,
    hookimpl,
    module_settings,
)

from jobhost_files.cleanup import OrphanCleanup
from jobhost_files.settings import SECTION, FilesSettings

__all__ = ["JOB_NAME", "jobhost_jobs"]

JOB_NAME = "files.orphan-cleanup"

_DESCRIPTION = (
    "Moves files under [modules.files] root that the application no longer references into a "
    "dated quarantine (or deletes them), and purges old quarantine."
)


@hookimpl
def jobhost_jobs(settings: Mapping[str, Mapping[str, Any]]) -> list[JobRegistration]:
    """``files.orphan-cleanup``, disabled on the default schedule while ``[modules.files]`` is
    absent; a bad section stops the host at start-up instead of failing at 3 a.m."""
    parsed = module_settings(FilesSettings, settings, SECTION)
    if parsed is None:
        schedule = {"cron": FilesSettings.model_fields["cron"].default, "enabled": False}
        description = _DESCRIPTION + " Disabled: [modules.files] is not configured."
    else:
        schedule = parsed.model_dump(include={"cron", "timezone", "enabled"})
        description = _DESCRIPTION
    declaration = BackgroundJobDeclaration(
        name=JOB_NAME,
        module=SECTION,
        configuration_source=SECTION,
        description=description,
        **schedule,
    )
    return [JobRegistration(declaration, OrphanCleanup(parsed))]
