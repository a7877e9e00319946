"""The ``jobhost`` plugin hooks: how a module hands the host its jobs, its audit sinks (where the
record of every finished run goes) and its job kinds (parameterised executors for jobs created at
run time)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NamedTuple, Protocol, runtime_checkable

import pluggy

from jobhost_contracts.declaration import BackgroundJobDeclaration
from jobhost_contracts.executor import IJobExecutor, JobFunction
from jobhost_contracts.units import UnitCounts

__all__ = [
    "PROJECT_NAME",
    "AuditSink",
    "JobKind",
    "JobRegistration",
    "KindSettingsError",
    "RunAuditRecord",
    "hookimpl",
    "hookspec",
]

PROJECT_NAME = "jobhost"
"""The pluggy project name, the entry-point group and the hook prefix."""

hookspec = pluggy.HookspecMarker(PROJECT_NAME)
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)


class JobRegistration(NamedTuple):
    """A declaration and the executor that runs it: an object with ``execute(context)`` or a
    function taking the context. A plain 2-tuple is accepted too."""

    declaration: BackgroundJobDeclaration
    executor: IJobExecutor | JobFunction


@dataclass(frozen=True, kw_only=True)
class RunAuditRecord:
    """One finished run, as the ledger, the span and the metrics saw it.

    ``units`` holds the counts of the run's fan-outs (``context.fan_out``), None without one;
    ``backfill_id`` names the backfill a run replays an occurrence for, None for any other run;
    ``result`` is the executor's ``Success`` value as the ledger keeps it: JSON text of at most
    4 kB (a value with no JSON form as its ``repr``; a longer one as ``{"truncated": true,
    "length": N, "head": "..."}``), None when it returned nothing or did not succeed.
    """

    job_name: str
    module: str
    run_id: str
    occurrence: datetime | None
    attempt: int
    source: str
    host_id: str
    outcome: str
    started_at: datetime
    finished_at: datetime
    duration_ms: int
    error_type: str | None = None
    error_message: str | None = None
    trace_id: str | None = None
    units: UnitCounts | None = None
    backfill_id: str | None = None
    result: str | None = None


@runtime_checkable
class AuditSink(Protocol):
    """Receives every finished run. ``name`` appears in warnings and the failure metric.

    A sink that raises or takes longer than the host's ``audit_sink_timeout`` produces a warning
    and a metric; it never changes the run's outcome and never stops the host.
    """

    name: str

    def record(self, entry: RunAuditRecord) -> None: ...


class KindSettingsError(ValueError):
    """A kind's settings are refused; ``field`` is the dotted key at fault (``url``,
    ``headers.Accept``), and the message says what is allowed."""

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        self.reason = message
        super().__init__(f"settings.{field}: {message}" if field else f"settings: {message}")

    @classmethod
    def first_of(cls, error: ValueError, allowed: Iterable[str]) -> KindSettingsError:
        """The first refusal of a pydantic ``ValidationError`` (read through its ``errors()``,
        so the contracts need no pydantic); an unknown key is answered with the ``allowed``
        ones. Any other ``ValueError`` is the whole settings' problem."""
        errors = getattr(error, "errors", None)
        details = errors() if callable(errors) else []
        if not details:
            return cls("", str(error))
        first = details[0]
        key = ".".join(str(part) for part in first.get("loc", ()))
        if first.get("type") == "extra_forbidden":
            return cls(key, f"is not a known key; allowed: {', '.join(allowed)}")
        return cls(key, str(first.get("msg", "is not valid")).removeprefix("Value error, "))


@dataclass(frozen=True)
class JobKind:
    """One kind of runtime job: a parameterised executor a module offers for jobs created at run
    time.

    ``validate(settings)`` turns a settings object (parsed JSON) into the module's own checked
    settings, or raises :class:`KindSettingsError` (or ``ValueError``) naming the field and the
    fix; it reads no secret value (secrets are environment variable names) and connects to
    nothing. The contracts stay free of any validation library: a module may use pydantic (or
    anything) behind ``validate`` and publish the model's schema as ``settings_schema``.
    ``factory(job_name, validated)`` makes the executor for one job. ``module`` is the module
    runtime jobs of this kind belong to; its ``[modules.NAME]`` section is their configuration,
    as for declared jobs.
    """

    name: str
    description: str
    settings_schema: Mapping[str, Any]
    validate: Callable[[Mapping[str, Any]], Any]
    factory: Callable[[str, Any], IJobExecutor]
    module: str = ""
    examples: tuple[Mapping[str, Any], ...] = field(default=())
    """Example settings objects, shown by ``jobhost kinds`` and the API."""
    secret_variables: Callable[[Any], Mapping[str, str]] | None = None
    """The environment variables a job of this kind reads at run time, from its validated
    settings, by the settings key that names each (``secret_headers.Authorization`` ->
    ``HOOK_AUTH``). The host lets a runtime job name only the variables the operator made
    available to runtime jobs; a kind that reads none leaves this None."""


@hookspec
def jobhost_jobs(
    settings: Mapping[str, Mapping[str, Any]],
) -> Iterable[JobRegistration | tuple[BackgroundJobDeclaration, IJobExecutor | JobFunction]]:
    """Return the jobs this module declares, as (declaration, executor) pairs; an executor
    is an object with ``execute(context)`` or a function taking the context (plain or async).

    :param settings: every module's configuration section, keyed by module name (the
        ``[modules.NAME]`` tables of ``jobhost.toml``), read-only. A module reads only its own
        section, with :func:`~jobhost_contracts.module_settings`; a module whose section is
        absent should declare its jobs disabled rather than fail, so installing it never breaks
        a host that has not configured it. A ``ModuleSettingsError`` raised here is reported as
        a problem of the operator's configuration; any other exception as the plugin's bug.
    :return: an iterable of pairs; an empty one when the module has nothing to run.

    Called once at every start of ``jobhost run`` and by every command that reads the catalog
    (``validate``, ``next``, ``report``...). It must be cheap and free of side effects: connect
    to nothing, start nothing. Declarations are validated by the host after every plugin has
    answered, and every problem is listed together.
    """
    raise NotImplementedError


@hookspec
def jobhost_audit_sinks(
    settings: Mapping[str, Mapping[str, Any]],
) -> Iterable[AuditSink]:
    """Return audit sinks that receive a :class:`RunAuditRecord` for every finished run.

    :param settings: every module's configuration section, as for :func:`jobhost_jobs`.
    :return: an iterable of objects with a ``name`` and a ``record(entry)`` method.

    Called once when a host starts. The run ledger and a structured JSON log line are built in;
    sinks added here come after them. A sink that raises or hangs is reported and skipped for
    that run; the run's outcome is never changed by it.
    """
    raise NotImplementedError


@hookspec
def jobhost_job_kinds(
    settings: Mapping[str, Mapping[str, Any]],
) -> Iterable[JobKind]:
    """Return the kinds of job this module can run for jobs created at run time.

    :param settings: every module's configuration section, as for :func:`jobhost_jobs`.
    :return: an iterable of :class:`JobKind`; kind names are unique across modules.

    Called when a host starts and by every command that validates or reads runtime jobs
    (``jobhost kinds``, ``jobhost jobs put``, the ``/api/v1`` endpoints). Like
    :func:`jobhost_jobs` it must be cheap and connect to nothing.
    """
    raise NotImplementedError
