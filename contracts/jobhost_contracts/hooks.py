"""The ``jobhost`` plugin hooks: how a module hands its jobs to the host."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

import pluggy

from jobhost_contracts.audit import AuditSink
from jobhost_contracts.declaration import BackgroundJobDeclaration
from jobhost_contracts.executor import IJobExecutor, JobFunction
from jobhost_contracts.kinds import JobKind

__all__ = ["PROJECT_NAME", "JobRegistration", "hookimpl", "hookspec"]

PROJECT_NAME = "jobhost"
"""The pluggy project name, the entry-point group and the hook prefix."""

hookspec = pluggy.HookspecMarker(PROJECT_NAME)
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)


class JobRegistration(NamedTuple):
    """A declaration and the executor that runs it: an object with ``execute(context)`` or a
    function taking the context. A plain 2-tuple is accepted too."""

    declaration: BackgroundJobDeclaration
    executor: IJobExecutor | JobFunction


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
