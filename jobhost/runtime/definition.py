"""A runtime job's definition: the body of ``PUT /api/v1/jobs/{name}`` and of ``jobs put``.
Strict: unknown keys are refused, and ``"true"`` is not a flag."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from jobhost_contracts import (
    DstGap,
    DstRepeat,
    MisfirePolicy,
    OverlapPolicy,
    format_duration,
    parse_duration,
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

from jobhost.catalog.model import POLICY_DEFAULTS
from jobhost.catalog.policies import MAX_ATTEMPTS, MAX_CATCH_UP, MAX_CONCURRENT
from jobhost.config import refusal, short_repr

__all__ = ["FieldProblem", "JobDefinition", "parse_definition"]

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

    def stored(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


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
