"""A runtime job's definition: the body of ``PUT /api/v1/jobs/{name}`` and of ``jobs put``
(strict: unknown keys are refused, and ``"true"`` is not a flag), and the :class:`JobSpec` it
makes, checked by the catalog's own checks; the kind's ``validate`` checks its settings, and its
``factory`` makes the executor.

A runtime job may read only the environment variables the operator made available to runtime
jobs (``runtime_secret_env_prefix``, ``runtime_secrets_allowed``), so a token that may write jobs
cannot send the host's own secrets to a URL of its choosing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from jobhost_contracts import (
    POLICY_KEYS,
    BackgroundJobDeclaration,
    DstGap,
    DstRepeat,
    JobKind,
    KindSettingsError,
    MisfirePolicy,
    OverlapPolicy,
    format_duration,
    parse_duration,
    policies_from,
)
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    StrictStr,
    ValidationError,
    field_validator,
)
from returns.result import Failure, Result

from jobhost.catalog import NAME_PATTERN, NAME_RULE, JobSpec
from jobhost.catalog.model import EMPTY_CONFIG, POLICY_DEFAULTS
from jobhost.catalog.validation import (
    MAX_ATTEMPTS,
    MAX_CATCH_UP,
    MAX_CONCURRENT,
    check_critical,
    check_trigger,
    declared_parts,
    policy_problems,
    to_trigger,
)
from jobhost.config import Settings, refusal, short_repr

__all__ = [
    "FieldProblem",
    "JobDefinition",
    "RefusedSecrets",
    "SecretRule",
    "build_spec",
    "parse_definition",
]

_DESCRIPTION_LIMIT = 500


def _policy(key: str, description: str, *, ge: int | None = None, le: int | None = None) -> Any:
    """The field of policy ``key``, its default the declaration's (a duration as text)."""
    default = POLICY_DEFAULTS[key]
    shown = format_duration(default) if isinstance(default, timedelta) else default
    return Field(shown, description=description, ge=ge, le=le)


@dataclass(frozen=True)
class FieldProblem:
    """One refused field: ``field`` is its dotted path in the body (``settings.url``)."""

    field: str
    message: str

    def line(self) -> str:
        return f"{self.field}: {self.message}" if self.field else self.message


class JobDefinition(BaseModel):
    """What a runtime job is: its kind and settings, its trigger, and its policies."""

    # Types are not coerced (StrictStr...): "true" is not a flag. Enums take their text.
    model_config = ConfigDict(extra="forbid", frozen=True, title="JobDefinition")

    kind: StrictStr = Field(description="A kind from GET /api/v1/kinds, e.g. 'http'.", min_length=1)
    cron: StrictStr | None = _policy("cron", "Cron expression (5 or 6 fields); or interval.")
    interval: StrictStr | None = _policy("interval", "Interval such as '90s', '15m', '6h'.")
    timezone: StrictStr = _policy("timezone", "IANA time zone of the cron expression.")
    enabled: StrictBool = _policy("enabled", "A disabled job keeps its row and runs by hand only.")
    critical: StrictBool = _policy("critical", "A critical job must be enabled.")
    description: StrictStr = Field(
        "", description="Shown by the report.", max_length=_DESCRIPTION_LIMIT
    )
    settings: dict[StrictStr, Any] = Field(
        default_factory=dict, description="The kind's settings (see the kind's schema)."
    )
    misfire: MisfirePolicy = _policy("misfire", "run_once, catch_up, skip.")
    catch_up_limit: StrictInt = _policy(
        "catch_up_limit", "Most occurrences caught up.", ge=1, le=MAX_CATCH_UP
    )
    misfire_grace: StrictStr | None = _policy("misfire_grace", "Skip occurrences older than this.")
    overlap: OverlapPolicy = _policy("overlap", "forbid or allow.")
    max_concurrent: StrictInt = _policy(
        "max_concurrent", "Runs side by side with allow.", ge=1, le=MAX_CONCURRENT
    )
    max_attempts: StrictInt = _policy(
        "max_attempts", "Attempts per occurrence.", ge=1, le=MAX_ATTEMPTS
    )
    backoff: StrictStr = _policy("backoff", "First wait before a retry.")
    backoff_max: StrictStr = _policy("backoff_max", "Longest wait before a retry.")
    timeout: StrictStr | None = _policy("timeout", "Longest a run may take, e.g. '5m'.")
    dst_gap: DstGap = _policy("dst_gap", "shift or skip (fixed-time cron jobs).")
    dst_repeat: DstRepeat = _policy("dst_repeat", "once, first, second or both.")
    concurrency_group: StrictStr | None = _policy(
        "concurrency_group",
        "A group named in the host's [concurrency_limits]: at most that many runs of the group "
        "at once, across every replica.",
    )

    @field_validator("interval", "misfire_grace", "backoff", "backoff_max", "timeout")
    @classmethod
    def _durations(cls, value: str | None) -> str | None:
        if value is not None:
            parse_duration(value)  # ValueError with the accepted forms
        return value


def parse_definition(body: object) -> JobDefinition | list[FieldProblem]:
    """The checked definition, or every field problem found."""
    if not isinstance(body, dict):
        return [FieldProblem("", 'the body must be a JSON object such as {"kind": "http"}')]
    try:
        return JobDefinition.model_validate(body)
    except ValidationError as error:
        return [_problem(item) for item in error.errors()]


def _problem(item: Any) -> FieldProblem:
    field = ".".join(str(part) for part in item["loc"])
    kind = item["type"]
    if kind == "extra_forbidden":
        allowed = ", ".join(JobDefinition.model_fields)
        return FieldProblem(field, f"is not a known field; remove it (allowed: {allowed})")
    if kind == "missing":
        return FieldProblem(field, 'is required, e.g. "kind": "http"')
    return FieldProblem(field, f"{refusal(item)} (got {short_repr(item.get('input'))})")


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
    policies = definition.model_dump(include=set(POLICY_KEYS))
    try:
        for key, value in policies.items():
            if isinstance(value, str) and timedelta in POLICY_KEYS[key]:
                policies[key] = parse_duration(value)
        declaration = BackgroundJobDeclaration(
            name=name,
            module=module,
            configuration_source=module,
            description=definition.description or kind.description,
            **policies_from(policies),
        )
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
        config=modules.get(module, EMPTY_CONFIG),
        concurrency_group=definition.concurrency_group,
    )


@dataclass(frozen=True)
class SecretRule:
    """The variables runtime jobs may read: by ``prefix``, or named in ``allowed``."""

    prefix: str
    allowed: frozenset[str] = frozenset()

    @classmethod
    def of(cls, settings: Settings) -> SecretRule:
        return cls(settings.runtime_secret_env_prefix, frozenset(settings.runtime_secrets_allowed))

    def check(self, kind: JobKind, validated: object) -> list[FieldProblem]:
        if kind.secret_variables is None:
            return []
        named: Mapping[str, str] = kind.secret_variables(validated)
        allowed = f" or one of runtime_secrets_allowed ({', '.join(sorted(self.allowed))})"
        return [
            FieldProblem(
                f"settings.{field}",
                f"environment variable {variable} is not available to runtime jobs: they may "
                f"read only variables named {self.prefix}* (runtime_secret_env_prefix)"
                f"{allowed if self.allowed else ''}; ask the operator to provide the secret as "
                f"{self.prefix}{variable.removeprefix('JOBHOST_') or 'NAME'}",
            )
            for field, variable in named.items()
            if not (variable.startswith(self.prefix) and variable != self.prefix)
            and variable not in self.allowed
        ]


class RefusedSecrets(Exception):
    """A stored runtime job names a variable it may not read; the run fails without reading."""


class _Refused:
    """An executor whose every run fails with ``problems``, reading nothing."""

    def __init__(self, problems: list[FieldProblem]) -> None:
        self._message = "; ".join(problem.line() for problem in problems)

    def execute(self, context: object) -> Result[None, RefusedSecrets]:
        return Failure(RefusedSecrets(self._message))
