"""A test plugin whose jobs are declared in configuration, loaded as a plain ``.py`` file.

``[[modules.sample.jobs]]`` entries name a job and a behaviour; every run appends one line to
the file ``[modules.sample] log`` (``job run_id occurrence attempt source pid``), so tests in
other processes can count exactly what ran.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from jobhost_contracts import (
    AuditSink,
    BackgroundJobDeclaration,
    DstGap,
    DstRepeat,
    JobContext,
    JobRegistration,
    MisfirePolicy,
    OverlapPolicy,
    RetryPolicy,
    RunAuditRecord,
    hookimpl,
    parse_duration,
)
from returns.result import Failure, Result, Success


@hookimpl
def jobhost_jobs(settings: Mapping[str, Mapping[str, Any]]) -> list[JobRegistration]:
    section = settings.get("sample", {})
    log = section.get("log")
    # A test-only knob: a settings error raised the way real modules refuse bad settings.
    if section.get("broken"):
        raise ValueError("[modules.sample] broken = true: this module refuses to load")
    return [_registration(entry, log) for entry in section.get("jobs", [])]


@hookimpl
def jobhost_audit_sinks(settings: Mapping[str, Mapping[str, Any]]) -> list[AuditSink]:
    """``[modules.sample] sinks = ["record", "raise", "hang"]``: sinks that behave so."""
    return [SampleSink(kind) for kind in settings.get("sample", {}).get("sinks", [])]


class SampleSink:
    def __init__(self, kind: str) -> None:
        self.name = f"sample-{kind}"
        self.kind = kind
        self.received: list[RunAuditRecord] = []

    def record(self, entry: RunAuditRecord) -> None:
        if self.kind == "raise":
            raise ConnectionError("audit backend refused the record")
        if self.kind == "hang":
            time.sleep(30)
        self.received.append(entry)


class SampleExecutor:
    def __init__(
        self,
        behaviour: str,
        seconds: float,
        log: str | None,
        entry: Mapping[str, Any] | None = None,
    ) -> None:
        self.behaviour = behaviour
        self.seconds = seconds
        self.log = log
        self.entry = entry or {}

    def execute(self, context: JobContext) -> Result[str, str]:
        """``span_log = true``: also append ``start|end TIME job run_id`` around the work to
        ``LOG.spans``, so tests in other processes can see which runs overlapped."""
        if not self.entry.get("span_log"):
            return self._execute(context)
        self._span("start", context)
        try:
            return self._execute(context)
        finally:
            self._span("end", context)

    def _span(self, event: str, context: JobContext) -> None:
        if self.log:
            with open(f"{self.log}.spans", "a", encoding="utf-8") as handle:
                handle.write(f"{event} {time.time():.6f} {context.job_name} {context.run_id}\n")

    def _execute(self, context: JobContext) -> Result[str, str]:
        self._write(context)
        match self.behaviour:
            case "succeed":
                return Success("ok")
            case "fail":
                return Failure(f"business failure on attempt {context.attempt}")
            case "raise":
                raise RuntimeError(f"bug on attempt {context.attempt}")
            case "fail-once":
                if context.attempt == 1:
                    return Failure("first attempt fails")
                return Success("second attempt worked")
            case "sleep":
                # Honours cancellation: returns as soon as the host asks it to stop.
                if context.cancellation.wait(self.seconds):
                    return Failure("stopped early")
                return Success("slept")
            case "ignore-cancel":
                time.sleep(self.seconds)
                return Success("ignored cancellation")
            case "span-context":
                # Which span is current inside the executor: the run's span, if nesting works.
                from opentelemetry import trace

                return Success(format(trace.get_current_span().get_span_context().span_id, "016x"))
            case "state":
                count = int(context.state.get("count") or 0) + 1
                context.state.set("count", str(count))
                return Success(str(count))
            case "fan-out":
                return self._fan_out(context)
            case "log":
                return self._log_lines(context)
        raise ValueError(f"unknown behaviour {self.behaviour!r}")

    def _fan_out(self, context: JobContext) -> Result[str, Any]:
        """``units`` tenants; each sleeps ``seconds``, then appends ``unit run_id attempt`` to
        ``LOG.units``; the units in ``fail_units`` fail while ``attempt <= fail_attempts``."""
        tenants = [f"tenant-{i:03d}" for i in range(int(self.entry.get("units", 10)))]
        failing = set(filter(None, str(self.entry.get("fail_units", "")).split(",")))
        fail_attempts = int(self.entry.get("fail_attempts", 1))

        def purge(tenant: str) -> Result[None, str]:
            if tenant in failing and context.attempt <= fail_attempts:
                return Failure(f"{tenant} refused")
            if context.cancellation.wait(self.seconds):
                return Failure("cancelled")
            if self.log:
                with open(f"{self.log}.units", "a", encoding="utf-8") as handle:
                    handle.write(f"{tenant} {context.run_id} {context.attempt}\n")
            return Success(None)

        result = context.fan_out(tenants, purge, concurrency=int(self.entry.get("concurrency", 1)))
        return result.map(lambda counts: counts.describe())

    def _log_lines(self, context: JobContext) -> Result[str, Any]:
        """``lines`` lines of ``text`` (``{i}``: the line's number) padded to ``width`` through
        the job's logger at ``level``, ``pause`` seconds apart; then raise ``raise`` if set."""
        text = str(self.entry.get("text", "line {i}"))
        width = int(self.entry.get("width", 0))
        level = getattr(logging, str(self.entry.get("level", "INFO")))
        pause = float(self.entry.get("pause", 0))
        for i in range(1, int(self.entry.get("lines", 10)) + 1):
            context.logger.log(level, "%s", text.format(i=i).ljust(width, "."))
            if pause and context.cancellation.wait(pause):
                return Failure("stopped early")
        if self.entry.get("raise"):
            raise RuntimeError(str(self.entry["raise"]))
        return Success("logged")

    def _write(self, context: JobContext) -> None:
        if not self.log:
            return
        occurrence = context.occurrence.isoformat() if context.occurrence else "-"
        line = (
            f"{context.job_name} {context.run_id} {occurrence} {context.attempt} "
            f"{context.source.value} {os.getpid()}\n"
        )
        with open(self.log, "a", encoding="utf-8") as handle:
            handle.write(line)


class AsyncSampleExecutor(SampleExecutor):
    async def execute(self, context: JobContext) -> Result[str, str]:  # type: ignore[override]
        self._write(context)
        if self.behaviour == "async-sleep":
            await asyncio.sleep(self.seconds)
            return Success("slept")
        return Success("async ok")


def _registration(entry: Mapping[str, Any], log: str | None) -> JobRegistration:
    behaviour = str(entry.get("behaviour", "succeed"))
    seconds = float(entry.get("seconds", 0))
    executor_type = AsyncSampleExecutor if behaviour.startswith("async") else SampleExecutor
    declaration = BackgroundJobDeclaration(
        name=entry["name"],
        module="sample",
        cron=entry.get("cron"),
        interval=_duration(entry.get("interval")),
        timezone=entry.get("timezone", "UTC"),
        enabled=entry.get("enabled", True),
        critical=entry.get("critical", False),
        configuration_source="sample",
        description=entry.get("description", ""),
        misfire=MisfirePolicy(entry.get("misfire", "run_once")),
        catch_up_limit=entry.get("catch_up_limit", 10),
        misfire_grace=_duration(entry.get("misfire_grace")),
        overlap=OverlapPolicy(entry.get("overlap", "forbid")),
        max_concurrent=entry.get("max_concurrent", 1),
        retry=RetryPolicy(
            max_attempts=entry.get("max_attempts", 1),
            backoff=_duration(entry.get("backoff")) or timedelta(seconds=30),
            jitter=float(entry.get("jitter", 0.0)),
            retry_on=frozenset(str(entry.get("retry_on", "failed,timed_out")).split(",")),
        ),
        timeout=_duration(entry.get("timeout")),
        lease=_duration(entry.get("lease")),
        dst_gap=DstGap(entry.get("dst_gap", "shift")),
        dst_repeat=DstRepeat(entry.get("dst_repeat", "once")),
        concurrency_group=entry.get("concurrency_group"),
    )
    return JobRegistration(declaration, executor_type(behaviour, seconds, log, entry))


def _duration(value: object) -> timedelta | None:
    return None if value is None else parse_duration(value)
