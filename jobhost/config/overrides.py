"""A deployment's changes to declared jobs, under ``[jobs."module.job-name"]``."""

from __future__ import annotations

from jobhost_contracts import DstGap, DstRepeat
from pydantic import BaseModel, ConfigDict

from jobhost.config.values import Duration

__all__ = ["JobOverride"]


class JobOverride(BaseModel):
    """A deployment's change to one job, under ``[jobs."module.job-name"]``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool | None = None
    cron: str | None = None
    interval: Duration | None = None
    timezone: str | None = None
    dst_gap: DstGap | None = None
    dst_repeat: DstRepeat | None = None
    concurrency_group: str | None = None
