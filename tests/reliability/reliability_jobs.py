"""The reliability suite's plugin: jobs declared in ``[[modules.rel.jobs]]``, with side effects.

Every execution appends ``begin`` when the executor starts and ``end`` when it is about to
return, to the file ``[modules.rel] effects``, one line each::

    begin|end JOB OCCURRENCE RUN_ID ATTEMPT PID UNIX_TIME

That file is the outside world the jobs act on: the suite compares it with the ledger to count
duplicates (one occurrence executed twice) and lost outcomes (an executor that completed whose
outcome the ledger does not hold). Lines are short single ``write`` calls on an ``O_APPEND`` file,
so lines from several processes never interleave.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from jobhost_contracts import (
    BackgroundJobDeclaration,
    JobContext,
    JobRegistration,
    MisfirePolicy,
    OverlapPolicy,
    RetryPolicy,
    hookimpl,
    parse_duration,
)
from returns.result import Failure, Result, Success


@hookimpl
def jobhost_jobs(settings: Mapping[str, Mapping[str, Any]]) -> list[JobRegistration]:
    section = settings.get("rel", {})
    effects = str(section["effects"])
    return [_registration(entry, effects) for entry in section.get("jobs", [])]


class EffectExecutor:
    """Behaviours: ``succeed``; ``fail-big`` (a Failure of ``bytes`` characters); ``sleep``
    (honours cancellation); ``stuck`` (ignores cancellation and its timeout); ``sleep-first``
    (attempt 1 sleeps like ``sleep``, later attempts succeed at once)."""

    def __init__(self, behaviour: str, seconds: float, size: int, effects: str) -> None:
        self.behaviour = behaviour
        self.seconds = seconds
        self.size = size
        self.effects = effects

    def execute(self, context: JobContext) -> Result[str, str]:
        self._effect("begin", context)
        result = self._behave(context)
        self._effect("end", context)
        return result

    def _behave(self, context: JobContext) -> Result[str, str]:
        match self.behaviour:
            case "succeed":
                return Success("ok")
            case "fail-big":
                return Failure("x" * self.size)
            case "sleep":
                if context.cancellation.wait(self.seconds):
                    return Failure("stopped early")
                return Success("slept")
            case "sleep-first":
                if context.attempt > 1:
                    return Success("retried")
                if context.cancellation.wait(self.seconds):
                    return Failure("stopped early")
                return Success("slept")
            case "stuck":
                time.sleep(self.seconds)  # deaf to cancellation and to its timeout
                return Success("came back")
        raise ValueError(f"unknown behaviour {self.behaviour!r}")

    def _effect(self, event: str, context: JobContext) -> None:
        occurrence = context.occurrence.isoformat() if context.occurrence else "-"
        line = (
            f"{event} {context.job_name} {occurrence} {context.run_id} {context.attempt} "
            f"{os.getpid()} {time.time():.3f}\n"
        )
        descriptor = os.open(self.effects, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(descriptor, line.encode())
        finally:
            os.close(descriptor)


def _registration(entry: Mapping[str, Any], effects: str) -> JobRegistration:
    declaration = BackgroundJobDeclaration(
        name=entry["name"],
        module="rel",
        cron=entry.get("cron"),
        interval=_duration(entry.get("interval")),
        timezone="UTC",
        configuration_source="rel",
        misfire=MisfirePolicy(entry.get("misfire", "run_once")),
        overlap=OverlapPolicy(entry.get("overlap", "forbid")),
        retry=RetryPolicy(
            max_attempts=entry.get("max_attempts", 1),
            backoff=_duration(entry.get("backoff")) or timedelta(seconds=1),
        ),
        timeout=_duration(entry.get("timeout")),
        lease=_duration(entry.get("lease")),
    )
    executor = EffectExecutor(
        str(entry.get("behaviour", "succeed")),
        float(entry.get("seconds", 0)),
        int(entry.get("bytes", 0)),
        effects,
    )
    return JobRegistration(declaration, executor)


def _duration(value: object) -> timedelta | None:
    return None if value is None else parse_duration(value)
