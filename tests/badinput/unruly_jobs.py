"""A test plugin whose executors misbehave in every way an executor can, loaded as a ``.py`` file.

``[[modules.unruly.jobs]]`` entries name a job and a behaviour (see :data:`BEHAVIOURS`); each job
runs every hour, so a test triggers it by hand. ``SECRET_URL`` is the password the host must never
print.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from jobhost_contracts import BackgroundJobDeclaration, JobCancelled, JobContext, hookimpl
from returns.result import Failure, Success

SECRET_URL = "postgresql://app:S3cretPW@db/app"
HUGE = 5_000_000
# Credentials of the shapes the host redacts, and where a job may write them.
STRIPE_KEY = "sk_live_4eC39HqLyjWDarjtT1zdp7dc"
DB_PASSWORD = "Hunter2-Hunter2"
AWS_KEY = "AKIAIOSFODNN7EXAMPLE"
CREDENTIAL_LINES = (
    "before the call",
    f"calling the API with Authorization: Bearer {STRIPE_KEY}",
    f"connecting to host=db user=app password={DB_PASSWORD} dbname=app",
    f"uploading with {AWS_KEY} to the bucket",
    "after the call",
)


class _Custom(BaseException):
    pass


def _raise_secret(_context: JobContext) -> object:
    raise RuntimeError(f"cannot connect to {SECRET_URL}")


def _log_secret(context: JobContext) -> object:
    context.logger.error("connecting to %s failed", SECRET_URL)
    return Success("logged")


def _interrupt(_context: JobContext) -> object:
    raise KeyboardInterrupt


def _base_exception(_context: JobContext) -> object:
    raise _Custom("odd")


def _huge_raise(_context: JobContext) -> object:
    raise ValueError("y" * HUGE)


def _cancelled(_context: JobContext) -> object:
    raise JobCancelled("nobody cancelled me")


def _log_credentials(context: JobContext) -> object:
    for line in CREDENTIAL_LINES:
        context.logger.warning("%s", line)
    return Failure(f"refused: Authorization: Bearer {STRIPE_KEY} password={DB_PASSWORD} {AWS_KEY}")


async def _async_raise(_context: JobContext) -> object:
    await asyncio.sleep(0)
    raise RuntimeError(f"async failure via {SECRET_URL}")


BEHAVIOURS: dict[str, Any] = {
    "succeed": lambda _c: Success("ok"),
    "raise-secret": _raise_secret,
    "fail-secret": lambda _c: Failure(f"refused by {SECRET_URL}"),
    "log-secret": _log_secret,
    "log-credentials": _log_credentials,
    "exit-3": lambda _c: sys.exit(3),
    "exit-none": lambda _c: sys.exit(),
    "exit-text": lambda _c: sys.exit("giving up"),
    "interrupt": _interrupt,
    "base-exception": _base_exception,
    "huge-failure": lambda _c: Failure("x" * HUGE),
    "huge-raise": _huge_raise,
    "nul-failure": lambda _c: Failure("before\x00after"),
    "surrogate-failure": lambda _c: Failure("bad \udcff byte"),
    "not-a-result": lambda _c: 42,
    "none": lambda _c: None,
    "failure-of-exception": lambda _c: Failure(OSError(28, "No space left on device")),
    "job-cancelled": _cancelled,
    "async-raise": _async_raise,
}


class UnrulyExecutor:
    def __init__(self, behaviour: str) -> None:
        self.behaviour = BEHAVIOURS[behaviour]

    def execute(self, context: JobContext) -> Any:
        return self.behaviour(context)


@hookimpl
def jobhost_jobs(settings: Mapping[str, Mapping[str, Any]]) -> list[Any]:
    entries = settings.get("unruly", {}).get("jobs", [])
    return [
        (
            BackgroundJobDeclaration(
                name=entry["name"],
                module="unruly",
                interval=timedelta(hours=1),
                description=f"misbehaves: {entry['behaviour']}",
            ),
            UnrulyExecutor(entry["behaviour"]),
        )
        for entry in entries
    ]
