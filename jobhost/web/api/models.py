"""The shapes of ``/api/v1``'s answers and query strings: the OpenAPI document's schemas are
generated from them, and the routes check each answer against its model before sending it.
A field without a default is one every answer carries; a field with one may be left out.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from jobhost.operations.failures import CURSOR_PATTERN, SEARCH_LIMIT
from jobhost.operations.jobs import VALUE_LIMIT
from jobhost.operations.report import SORTS, STATUSES
from jobhost.operations.runs import OUTCOMES, PAGE_LINES
from jobhost.records import MAX_CHANGE_ID
from jobhost.runtime.definition import JobDefinition
from jobhost.web.api.requests import ReasonText
from jobhost.web.middleware import NO_NUL_PATTERN

__all__ = [
    "SINCE_PATTERN",
    "Backfill",
    "BackfillRequest",
    "BackfillSelection",
    "CancelAsked",
    "ChangeList",
    "ChangesQuery",
    "FailureList",
    "FailureRetry",
    "FailuresQuery",
    "Job",
    "JobList",
    "JobState",
    "JobWrite",
    "JobsQuery",
    "KindList",
    "PauseResult",
    "PausedMany",
    "Problem",
    "Reason",
    "RetryQueued",
    "RunList",
    "RunLog",
    "RunLogQuery",
    "RunsQuery",
    "RuntimeJob",
    "Selection",
    "StateChanged",
    "StateEntry",
    "StateValue",
    "TriggerResult",
]

SOURCES = ("api", "declaration", "override", "store")
ACTIONS = (
    "create", "change", "delete", "pause", "resume", "trigger", "retry", "cancel", "backfill",
    "backfill-cancel", "state-set", "state-delete",
)  # fmt: skip
BackfillMode = Literal["missing", "failed", "all"]

NAME_LIMIT = 200
# Up to three parts, the first not zero: at most 29,997 weeks, which no clock reaches back past.
_DURATION = "[1-9][0-9]{0,3}(?:ms|s|m|h|d|w)(?:[0-9]{1,4}(?:ms|s|m|h|d|w)){0,2}"
_YEAR = "(?:1[0-9]{3}|[2-8][0-9]{3}|9[0-8][0-9]{2})"
_MONTH_DAY = (
    "(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])"
    "|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)"
    "|02-(?:0[1-9]|1[0-9]|2[0-8]))"
)
_LEAP_DAY = (
    "(?:(?:1[0-9]|[2-8][0-9]|9[0-8])(?:0[48]|[2468][048]|[13579][26])"
    "|(?:1[26]|[2468][048]|[3579][26])00)-02-29"
)
_TIME = r"T(?:[01][0-9]|2[0-3]):[0-5][0-9](?::[0-5][0-9](?:\.[0-9]{1,6})?)?"
_ZONE = "(?:Z|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])"
SINCE_PATTERN = f"{_DURATION}|(?:{_YEAR}-{_MONTH_DAY}|{_LEAP_DAY})(?:{_TIME}{_ZONE})?"
"""What the API takes as ``since`` (the document's pattern, checked by the server): a positive
duration of whole units (``2h``, ``4h30m``), a calendar date from year 1000 to 9899, or that
date with a time and a zone. Every text of this shape is a time the failures can be read from."""


# Strings that are one of the tuples the code checks against.
Status = Annotated[str, Field(json_schema_extra={"enum": list(STATUSES)})]
Outcome = Annotated[str, Field(json_schema_extra={"enum": list(OUTCOMES)})]
Source = Annotated[str, Field(json_schema_extra={"enum": list(SOURCES)})]
Sort = Annotated[str, Field(json_schema_extra={"enum": list(SORTS)})]
Action = Annotated[str, Field(json_schema_extra={"enum": list(ACTIONS)})]
Surface = Literal["cli", "api", "dashboard"]
FailureOutcome = Literal["failed", "timed_out", "abandoned", "stuck"]


class Closed(BaseModel):
    """A shape that refuses a key it does not list (``additionalProperties: false``)."""

    model_config = ConfigDict(extra="forbid")


class Trigger(Closed):
    kind: Literal["cron", "interval"] | None
    expression: str | None
    timezone: str
    source: str = ""
    dst_policy: str = ""


class RuntimeJob(Closed):
    name: str
    source: Literal["api"]
    kind: str
    definition: dict[str, Any]
    etag: str
    version: int = Field(ge=1)
    created_at: str
    created_by: str
    updated_at: str
    updated_by: str


class LastRun(Closed):
    """The job's last real attempt."""

    run_id: str
    outcome: Outcome
    started_at: str | None
    finished_at: str | None
    duration_ms: int | None
    error: str | None = Field(description="The error's message, else its type; null: none.")
    backfill_id: str | None = Field(description="The backfill it replayed an occurrence for.")


class Job(Closed):
    name: str
    module: str
    description: str = ""
    critical: bool = False
    enabled: bool
    paused: bool
    state: str = ""
    declared_trigger: Trigger | None = None
    effective_trigger: Trigger | None = None
    next_fire_utc: str | None = None
    next_fire_local: str | None = None
    last_run: LastRun | None = None
    recent_outcomes: list[str] = []
    mismatch: list[str] = []
    status: Status
    source: Source
    kind: str | None
    concurrency_group: str | None = Field(
        None, description="The concurrency group its work takes a slot of; null: none."
    )
    waiting_for: str | None = Field(
        None, description="While its work waits for a slot: the group and how busy it is."
    )
    runtime: RuntimeJob | None = None


class JobList(Closed):
    jobs: list[Job]


class Kind(Closed):
    name: str
    description: str
    module: str
    settings_schema: dict[str, Any]
    examples: list[dict[str, Any]]


class KindList(Closed):
    kinds: list[Kind]


class Units(Closed):
    total: int
    succeeded: int
    failed: int
    skipped_already_done: int


class CancelRequest(Closed):
    by: str
    at: str | None
    reason: str | None


class Run(Closed):
    run_id: str
    occurrence: str | None
    attempt: int
    source: str
    host: str | None = Field(description="The host that ran it; null: not claimed yet.")
    requested_by: str | None = Field(description="Who asked for a manual run.")
    queued_at: str
    started_at: str | None
    finished_at: str | None
    duration_ms: int | None
    outcome: Outcome
    reason: str | None = Field(description="Why it was asked for, or why it was skipped.")
    error_type: str | None
    error: str | None = Field(description="The error's message.")
    trace_id: str | None
    units: Units | None = Field(description="What its units of work came to; null: none.")
    backfill_id: str | None = Field(description="The backfill it replayed an occurrence for.")
    cancel: CancelRequest | None = Field(description="Who asked to cancel it; null: nobody.")
    result: Any = Field(
        default=None,
        description=(
            "The executor's Success value as JSON (at most 4 kB: a longer one is "
            '{"truncated": true, "length": N, "head": "..."}; a value with no JSON form is '
            "its repr, a string); null when it returned nothing or did not succeed."
        ),
    )


class RunList(Closed):
    job: str
    runs: list[Run]


class Change(Closed):
    id: int
    at: str
    actor: str
    action: Action
    job: str
    before: dict[str, Any] | None
    after: dict[str, Any] | None
    reason: str | None
    surface: Surface | None = Field(
        description="Where it was done: cli, api or dashboard; null for the host's own changes "
        "and those logged before jobhost recorded it."
    )
    address: str | None = Field(
        description="The HTTP client's address (as trusted_proxies decides); null from the CLI."
    )


class ChangeList(Closed):
    changes: list[Change]
    next_after: int


class LogLine(Closed):
    seq: int
    time: str
    level: str
    message: str


class Gap(Closed):
    lines: int
    bytes: int


class Dropped(Closed):
    dropped: Gap


class RunLog(Closed):
    run_id: str
    job: str
    outcome: Outcome
    running: bool
    lines: list[LogLine | Dropped]
    next_after: int


class TriggerResult(Closed):
    job: str
    request_id: str
    run_id: str | None
    status: str
    message: str | None


class PauseResult(Closed):
    job: str
    paused: bool
    changed: bool


class PausedMany(Closed):
    jobs: list[PauseResult]


class RetryQueued(Closed):
    run_id: str
    retry_of: str
    job: str
    attempt: int
    outcome: Literal["pending"]


class CancelAsked(Closed):
    run_id: str
    job: str
    host: str | None
    requested: Literal["requested", "already", "cancelled"]
    cancelled_by: str
    reason: str | None


class BackfillRequest(BaseModel):
    """The body of ``POST /api/v1/jobs/{name}/backfills``."""

    model_config = ConfigDict(extra="forbid", strict=True)

    from_: str = Field(
        alias="from",
        min_length=1,
        max_length=40,
        description="First instant (included): ISO 8601 with a zone, or a date (midnight in "
        "the job's zone).",
    )
    to: str = Field(min_length=1, max_length=40, description="Last instant (excluded).")
    mode: BackfillMode = "missing"
    reason: ReasonText = Field(description="Why; audited.")
    dry_run: bool = False
    concurrency: int = Field(default=1, ge=1, le=1000)


class BackfillSelection(Closed):
    """What a backfill takes: its id (None for a dry run or nothing to do) and occurrences."""

    id: str | None
    job: str
    mode: BackfillMode
    from_: str = Field(alias="from")
    to: str
    occurrences: list[str]


class Backfill(Closed):
    """A backfill's progress; ``done`` counts the settled occurrences."""

    id: str
    job: str
    from_: str = Field(alias="from")
    to: str
    mode: BackfillMode
    state: Literal["running", "cancelled", "done"]
    reason: str | None
    actor: str
    concurrency: int = Field(ge=1)
    created_at: str
    finished_at: str | None
    selected: int = Field(ge=0)
    done: int = Field(ge=0)
    succeeded: int = Field(ge=0)
    failed: int = Field(ge=0)
    running: int = Field(ge=0)
    pending: int = Field(ge=0)


class FailureResolution(Closed):
    """How a failure was resolved: its work succeeded later (``run_id``), or an operator
    acknowledged it (``reason``)."""

    how: Literal["succeeded", "acknowledged"]
    by: str | None
    at: str | None
    run_id: str | None
    reason: str | None


class FailureGroup(Closed):
    """The page's failures of one job, outcome, error and state."""

    job: str
    outcome: FailureOutcome
    error_type: str | None
    error: str | None
    count: int = Field(ge=1)
    run_ids: list[str]
    resolved: bool


class Failure(Closed):
    job: str
    run_id: str
    occurrence: str | None
    started_at: str | None
    finished_at: str | None
    outcome: FailureOutcome
    attempt: int
    source: str
    host: str | None
    error_type: str | None
    error: str | None
    streak: int = Field(ge=0)
    resolved: FailureResolution | None


class FailureList(Closed):
    failures: list[Failure]
    groups: list[FailureGroup]
    next_cursor: str | None
    searched_to: str | None
    streak_limit: int
    generated_at: str


class RetryRefused(Closed):
    run_id: str
    job: str
    reason: str


class FailuresRetried(Closed):
    queued: list[RetryQueued]
    refused: list[RetryRefused]
    more: bool
    hosts_alive: int = Field(ge=0)


class FieldError(Closed):
    field: str
    message: str


class Problem(Closed):
    """An error: what is wrong, the field, and the fix (``application/problem+json``)."""

    type: str
    title: str
    status: int
    detail: str
    id: str = ""
    errors: list[FieldError] = []
    request_id: str = Field(
        "", description="A refused trigger's request (409 of POST /jobs/{name}/trigger)."
    )


class StateEntry(Closed):
    key: str
    value: str
    updated_at: str
    fencing_token: int = Field(description="The token of the run or change that wrote it.")


class JobState(Closed):
    job: str
    state: list[StateEntry] = Field(description="The job's keys, by key (the first 1,000).")
    more: bool = Field(description="The job has keys past the first 1,000.")


class StateValue(Closed):
    """A key's new value (text, as a job's ``context.state.set`` writes it), and why."""

    value: str = Field(max_length=VALUE_LIMIT)
    reason: ReasonText


class StateChanged(Closed):
    job: str
    key: str
    before: str | None = Field(description="The value it had; null: not set.")
    after: str | None = Field(description="The value it has now; null: deleted.")
    changed: bool = Field(description="False when it already had that value.")


class Reason(Closed):
    """Why: recorded with the change."""

    reason: ReasonText


class JobWrite(JobDefinition):
    """A runtime job's definition, and why it is written: the reason goes in the change log,
    not in the stored definition."""

    model_config = ConfigDict(title="JobWrite")
    reason: ReasonText


_Names = list[Annotated[str, Field(min_length=1, max_length=NAME_LIMIT)]]


class Selection(Closed):
    """Many jobs, by module or by name pattern, and why (``POST /pause`` and ``/resume``)."""

    modules: _Names = Field([], max_length=100, description="Every job of these modules.")
    match: _Names = Field(
        [], max_length=100, description="Every job whose name matches, e.g. billing.*."
    )
    reason: ReasonText


def _name(description: str) -> Any:
    # The pattern is documented only: json_problem refuses NUL in any body.
    extra: dict[str, Any] = {"pattern": NO_NUL_PATTERN}
    return Field(
        None, min_length=1, max_length=NAME_LIMIT, description=description, json_schema_extra=extra
    )


class FailureRetry(BaseModel):
    """Which open failures to retry, once each, and why (``POST /failures``)."""

    model_config = ConfigDict(extra="forbid")
    job: str | None = _name("Only this job's.")
    module: str | None = _name("Only failures of this module's jobs.")
    since: str | None = Field(
        None,
        min_length=1,
        max_length=64,
        description="Only failures since then: 2h, 7d, a date (UTC) or an ISO 8601 time.",
        # Documented only: _since checks it, with a message that says what is wrong.
        json_schema_extra={"pattern": f"^(?:{SINCE_PATTERN})$"},
    )
    reason: ReasonText


class FailuresQuery(BaseModel):
    since: str = Field(
        "",
        max_length=64,
        description="Only runs that finished since then: a positive duration of whole units (2h, "
        "7d, 4h30m), a date (UTC, midnight) or a time with a zone (2026-11-28T06:00:00Z).",
        json_schema_extra={"pattern": f"^(?:{SINCE_PATTERN})?$"},
    )
    job: str = Field("", max_length=NAME_LIMIT, description="Only this job's runs.")
    q: str = Field(
        "",
        max_length=SEARCH_LIMIT,
        description="Only runs whose error type or message contains this text (any case).",
    )
    limit: int = Field(50, ge=1, le=500, description="At most N runs (default 50).")
    cursor: str = Field(
        "",
        max_length=200,
        description="next_cursor of the previous answer.",
        json_schema_extra={"pattern": f"^(?:{CURSOR_PATTERN})?$"},
    )
    all: bool = Field(
        False, description="Also failures resolved by a later success or an acknowledgement."
    )


# -- query strings -----------------------------------------------------------------------------


class JobsQuery(BaseModel):
    search: str = Field("", description="Only jobs whose name, module or description holds this.")
    module: list[str] = Field([], description="Only jobs of these modules.")
    state: list[Status] = Field([], description="Only jobs with these statuses.")
    failing: bool = Field(False, description="Only jobs whose last run failed or timed out.")
    sort: Sort = Field("name", description="Order of the jobs.")
    source: list[Source] = Field([], description="Only jobs from these sources.")
    limit: int = Field(1000, ge=1, le=10_000, description="At most N jobs.")


class RunsQuery(BaseModel):
    limit: int = Field(20, ge=1, le=1000, description="At most N runs (default 20).")
    outcome: Outcome = Field("", description="Only runs with this outcome.")


class RunLogQuery(BaseModel):
    after: int = Field(
        0,
        ge=0,
        le=2**31 - 1,
        description="Only lines numbered above this (next_after of the previous answer).",
    )
    limit: int = Field(
        PAGE_LINES, ge=1, le=PAGE_LINES, description=f"At most N lines (default {PAGE_LINES})."
    )


class ChangesQuery(BaseModel):
    job: str = Field("", max_length=NAME_LIMIT, description="Only this job's changes.")
    after: int = Field(0, ge=0, le=MAX_CHANGE_ID, description="Only changes with a larger id.")
    limit: int = Field(100, ge=1, le=1000, description="At most N changes (default 100).")
