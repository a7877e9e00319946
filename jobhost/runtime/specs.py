"""From a runtime job's definition to a :class:`JobSpec`, checked by the catalog's own checks;
the kind's ``validate`` checks its settings, and its ``factory`` makes the executor.

A runtime job may read only the environment variables the operator made available to runtime
jobs (``runtime_secret_env_prefix``, ``runtime_secrets_allowed``), so a token that may write jobs
cannot send the host's own secrets to a URL of its choosing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from types import MappingProxyType
from typing import Any

from jobhost_contracts import (
    POLICY_KEYS,
    BackgroundJobDeclaration,
    JobKind,
    KindSettingsError,
    parse_duration,
    policies_from,
)
from returns.result import Failure, Result

from jobhost.catalog import NAME_PATTERN, NAME_RULE, JobSpec
from jobhost.catalog.overrides import declared_parts, to_trigger
from jobhost.catalog.policies import policy_problems
from jobhost.catalog.validation import check_critical, check_trigger
from jobhost.config import Settings
from jobhost.runtime.definition import FieldProblem, JobDefinition

__all__ = ["RefusedSecrets", "SecretRule", "build_spec", "group_problems"]

MAX_NAME_LENGTH = 200  # the longest job name the store holds
RUNTIME_MODULE = "api"  # of a runtime job whose kind names none

# Which body field a catalog problem is about.
_FIELDS = {
    "both-triggers": "cron",
    "no-trigger": "cron",
    "cron-syntax": "cron",
    "cron-never-fires": "cron",
    "unknown-timezone": "timezone",
    "non-positive-interval": "interval",
    "interval-too-long": "interval",
    "dst-policy-unused": "dst_gap",
    "critical-disabled": "enabled",
}
_EMPTY: Mapping[str, Any] = MappingProxyType({})


def build_spec(
    name: str,
    definition: JobDefinition,
    kinds: Mapping[str, JobKind],
    modules: Mapping[str, Mapping[str, Any]],
    *,
    secrets: SecretRule,
    stored: bool = False,
) -> JobSpec | list[FieldProblem]:
    """The runnable job, or every problem found. A variable ``secrets`` refuses is a problem,
    but a ``stored`` job (written before the rule) loads, with runs that fail saying why."""
    problems: list[FieldProblem] = []
    if len(name) > MAX_NAME_LENGTH:
        problems.append(
            FieldProblem("name", f"job name is {len(name)} characters; at most {MAX_NAME_LENGTH}")
        )
    elif not NAME_PATTERN.fullmatch(name):
        problems.append(
            FieldProblem("name", f"job name {name!r} does not follow the rule: {NAME_RULE}")
        )
    kind = kinds.get(definition.kind)
    if kind is None:
        known = ", ".join(sorted(kinds)) or "none (no module offers a kind)"
        problems.append(FieldProblem("kind", f"no kind {definition.kind!r}; use one of: {known}"))
        return problems
    validated: Any = None
    refused: list[FieldProblem] = []
    try:
        validated = kind.validate(definition.settings)
        refused = secrets.check(kind, validated)
    except KindSettingsError as error:
        where = f"settings.{error.field}" if error.field else "settings"
        problems.append(FieldProblem(where, error.reason))
    except ValueError as error:
        problems.append(FieldProblem("settings", str(error)))
    if not stored:
        problems += refused
    module = kind.module or RUNTIME_MODULE
    try:
        declaration = _declaration(name, module, definition, kind)
    except (TypeError, ValueError) as error:
        return [*problems, FieldProblem("", str(error))]
    for policy in policy_problems(declaration):
        # The body writes the retry policy's fields flat.
        field = policy.field.removeprefix("retry.")
        problems.append(FieldProblem(field, f"{policy.text()}; fix it in the job's definition"))
    parts = declared_parts(declaration, "api")
    for problem in [*check_trigger(parts), *check_critical(declaration, parts)]:
        problems.append(FieldProblem(_FIELDS.get(problem.code, ""), problem.message))
    trigger = to_trigger(parts)
    if problems or trigger is None:
        return problems
    try:
        executor = _Refused(refused) if refused else kind.factory(name, validated)
    except ValueError as error:
        return [FieldProblem("settings", str(error))]
    return JobSpec(
        declaration=declaration,
        executor=executor,
        plugin=f"kind {kind.name}",
        trigger=trigger,
        declared=trigger,
        enabled=definition.enabled,
        override=None,
        config=modules.get(module, _EMPTY),
        concurrency_group=definition.concurrency_group,
    )


def _declaration(
    name: str, module: str, definition: JobDefinition, kind: JobKind
) -> BackgroundJobDeclaration:
    policies = definition.model_dump(include=set(POLICY_KEYS))
    for key, value in policies.items():
        if isinstance(value, str) and timedelta in POLICY_KEYS[key]:
            policies[key] = parse_duration(value)
    return BackgroundJobDeclaration(
        name=name,
        module=module,
        configuration_source=module,
        description=definition.description or kind.description,
        **policies_from(policies),
    )


def group_problems(definition: JobDefinition, limits: Mapping[str, int]) -> list[FieldProblem]:
    group = definition.concurrency_group
    if group is None or group in limits:
        return []
    known = ", ".join(sorted(limits)) or "none (the host has no [concurrency_limits])"
    return [
        FieldProblem(
            "concurrency_group",
            f"names no group of the host's [concurrency_limits] (known: {known}); use one of "
            "them, or ask the operator to add the group with its limit",
        )
    ]


@dataclass(frozen=True)
class SecretRule:
    """The variables runtime jobs may read: by ``prefix``, or named in ``allowed``."""

    prefix: str
    allowed: frozenset[str] = frozenset()

    @classmethod
    def of(cls, settings: Settings) -> SecretRule:
        return cls(settings.runtime_secret_env_prefix, frozenset(settings.runtime_secrets_allowed))

    def permits(self, variable: str) -> bool:
        return (variable.startswith(self.prefix) and variable != self.prefix) or (
            variable in self.allowed
        )

    def check(self, kind: JobKind, validated: object) -> list[FieldProblem]:
        if kind.secret_variables is None:
            return []
        named: Mapping[str, str] = kind.secret_variables(validated)
        return [
            FieldProblem(f"settings.{field}", self.refusal(variable))
            for field, variable in named.items()
            if not self.permits(variable)
        ]

    def refusal(self, variable: str) -> str:
        allowed = f" or one of runtime_secrets_allowed ({', '.join(sorted(self.allowed))})"
        return (
            f"environment variable {variable} is not available to runtime jobs: they may read "
            f"only variables named {self.prefix}* (runtime_secret_env_prefix)"
            f"{allowed if self.allowed else ''}; ask the operator to provide the secret as "
            f"{self.prefix}{variable.removeprefix('JOBHOST_') or 'NAME'}"
        )


class RefusedSecrets(Exception):
    """A stored runtime job names a variable it may not read; the run fails without reading."""


class _Refused:
    """An executor whose every run fails with ``problems``, reading nothing."""

    def __init__(self, problems: list[FieldProblem]) -> None:
        self._message = "; ".join(problem.line() for problem in problems)

    def execute(self, context: object) -> Result[None, RefusedSecrets]:
        return Failure(RefusedSecrets(self._message))
