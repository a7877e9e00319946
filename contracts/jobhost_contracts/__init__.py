"""The contract between jobhost and the modules whose jobs it runs.

A module declares its jobs with :class:`BackgroundJobDeclaration`, runs them with an
:class:`IJobExecutor`, and registers both through the ``jobhost_jobs`` hook::

    from jobhost_contracts import BackgroundJobDeclaration, IJobExecutor, JobContext, hookimpl

A module reads its ``[modules.NAME]`` section with :func:`module_settings` and tests its
executors with :mod:`jobhost_contracts.testing`.

This package imports only the standard library, ``pluggy`` and ``returns``.
"""

from __future__ import annotations

from jobhost_contracts.cancellation import Cancellation, JobCancelled
from jobhost_contracts.context import JobContext, TriggerSource
from jobhost_contracts.declaration import (
    CALL_TIMEOUT_MARGIN,
    POLICY_KEYS,
    SCHEDULE_KEYS,
    BackgroundJobDeclaration,
    DstGap,
    DstRepeat,
    JobPolicies,
    MisfirePolicy,
    OverlapPolicy,
    RetryPolicy,
    check_trigger,
    configured_declaration,
    field_types,
    policies_from,
    policy_values,
)
from jobhost_contracts.durations import format_duration, parse_duration
from jobhost_contracts.executor import IJobExecutor, JobFunction, JobResult, as_executor
from jobhost_contracts.fields import (
    env_name,
    flag,
    http_url,
    non_empty_text,
    non_negative_duration,
    positive_duration,
    safe_url,
)
from jobhost_contracts.hooks import (
    PROJECT_NAME,
    AuditSink,
    JobKind,
    JobRegistration,
    KindSettingsError,
    RunAuditRecord,
    hookimpl,
    hookspec,
)
from jobhost_contracts.redaction import bound_text, hide_secrets, redact_text
from jobhost_contracts.settings import (
    ModuleSettingsError,
    SettingProblem,
    SettingsModel,
    module_settings,
    thawed,
)
from jobhost_contracts.state import JobState, StaleLeaseError
from jobhost_contracts.units import FanOutFailed, UnitCounts, UnitFailure

__all__ = [
    "CALL_TIMEOUT_MARGIN",
    "POLICY_KEYS",
    "PROJECT_NAME",
    "SCHEDULE_KEYS",
    "AuditSink",
    "BackgroundJobDeclaration",
    "Cancellation",
    "DstGap",
    "DstRepeat",
    "FanOutFailed",
    "IJobExecutor",
    "JobCancelled",
    "JobContext",
    "JobFunction",
    "JobKind",
    "JobPolicies",
    "JobRegistration",
    "JobResult",
    "JobState",
    "KindSettingsError",
    "MisfirePolicy",
    "ModuleSettingsError",
    "OverlapPolicy",
    "RetryPolicy",
    "RunAuditRecord",
    "SettingProblem",
    "SettingsModel",
    "StaleLeaseError",
    "TriggerSource",
    "UnitCounts",
    "UnitFailure",
    "as_executor",
    "bound_text",
    "check_trigger",
    "configured_declaration",
    "env_name",
    "field_types",
    "flag",
    "format_duration",
    "hide_secrets",
    "hookimpl",
    "hookspec",
    "http_url",
    "module_settings",
    "non_empty_text",
    "non_negative_duration",
    "parse_duration",
    "policies_from",
    "policy_values",
    "positive_duration",
    "redact_text",
    "safe_url",
    "thawed",
]
