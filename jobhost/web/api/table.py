"""Every endpoint of ``/api/v1`` in one table: the routes are mounted from it and the OpenAPI
document is generated from it, so the two cannot drift apart. A new endpoint is one more
:class:`Endpoint` here, an ``async`` method of that ``operation`` name on the API's handler
class, and its models in :mod:`jobhost.web.api.models`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel

from jobhost.catalog import NAME_PATTERN
from jobhost.operations.jobs import KEY_LIMIT
from jobhost.operations.runs import RUN_ID_LIMIT
from jobhost.web.api import models

__all__ = ["ENDPOINTS", "PATH_PARAMETERS", "Answer", "Endpoint"]

Scope = Literal["read", "write", "trigger"]


@dataclass(frozen=True)
class Answer:
    """One status an endpoint answers with: what it means, its body's type (None: no body),
    and its headers."""

    description: str
    body: Any = None
    headers: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Endpoint:
    route: str
    """Its method and path: ``GET /jobs/{name}``."""
    operation: str
    """The handler's name on the API object (dotted for a group: ``backfills.start``), and the
    document's ``operationId``."""
    scope: Scope | None
    """The token's scope it needs; None: no token at all (the document itself)."""
    summary: str
    answers: Mapping[int, Answer]
    query: type[BaseModel] | None = None
    body: type[BaseModel] | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    """The request headers it reads."""

    @property
    def method(self) -> str:
        return self.route.split(" ")[0]

    @property
    def path(self) -> str:
        return self.route.split(" ")[1]


PATH_PARAMETERS: dict[str, tuple[str, dict[str, Any]]] = {
    "name": (
        "The job's name, module.job ('hooks.nightly-ping').",
        {"type": "string", "pattern": NAME_PATTERN.pattern, "maxLength": 200},
    ),
    "backfill_id": (
        "The backfill's id, as POST /jobs/{name}/backfills answers it.",
        {"type": "string", "maxLength": 64},
    ),
    "key": (
        "A key of the job's durable state, as GET /jobs/{name}/state lists it.",
        {"type": "string", "minLength": 1, "maxLength": KEY_LIMIT},
    ),
    "run_id": (
        "The run's id, as GET /jobs/{name}/runs lists it.",
        {"type": "string", "maxLength": RUN_ID_LIMIT},
    ),
}

_IF_NONE_MATCH = {
    "If-None-Match": "On GET, an ETag you hold: 304 while the job is still so. On PUT, *: create "
    "only (412 if the job exists)."
}
_IF_MATCH = {"If-Match": "An ETag from a GET or PUT (or *): change only if the job is still so."}
_ETAG = {"ETag": "The job's version, for If-Match."}

# An endpoint per entry: route, operation, scope, summary, answers, then its options.
# fmt: off
ENDPOINTS: tuple[Endpoint, ...] = (
    Endpoint("GET /openapi.json", "openapi", None, "This document.",
             {200: Answer("The OpenAPI document.", dict[str, Any])}),
    Endpoint("GET /kinds", "kinds", "read",
             "The job kinds the modules offer, with their settings' JSON schema.",
             {200: Answer("The kinds.", models.KindList)}),
    Endpoint("GET /jobs", "jobs", "read",
             "Every job, declared and runtime, as the report shows it.",
             {200: Answer("The jobs.", models.JobList)}, query=models.JobsQuery),
    Endpoint("GET /jobs/{name}", "job", "read", "One job; a runtime job's answer carries its ETag.",
             {200: Answer("The job.", models.Job, _ETAG),
              304: Answer("Not modified: If-None-Match names its ETag.")},
             headers=_IF_NONE_MATCH),
    Endpoint("PUT /jobs/{name}", "put", "write", "Create (201) or replace (200) a runtime job.",
             {200: Answer("Replaced (or unchanged).", models.RuntimeJob, _ETAG),
              201: Answer("Created.", models.RuntimeJob, _ETAG)},
             headers={**_IF_MATCH, **_IF_NONE_MATCH}, body=models.JobWrite),
    Endpoint("DELETE /jobs/{name}", "delete", "write",
             "Remove a runtime job (409 for a declared one); its history stays.",
             {204: Answer("Removed.")}, headers=_IF_MATCH, body=models.Reason),
    Endpoint("POST /jobs/{name}/trigger", "trigger", "trigger",
             "Run the job now, once, audited with the reason.",
             {202: Answer("Queued (run_id once a host started it).", models.TriggerResult)},
             body=models.Reason),
    Endpoint("POST /jobs/{name}/pause", "pause", "write",
             "Pause the job on every replica; missed occurrences are recorded.",
             {200: Answer("Paused (changed: false if it was).", models.PauseResult)},
             body=models.Reason),
    Endpoint("POST /jobs/{name}/resume", "resume", "write",
             "Resume the job; its misfire policy decides what of the pause runs.",
             {200: Answer("Resumed (changed: false if it was not paused).", models.PauseResult)},
             body=models.Reason),
    Endpoint("GET /jobs/{name}/runs", "runs", "read", "The job's history, newest first.",
             {200: Answer("The runs.", models.RunList)}, query=models.RunsQuery),
    Endpoint("GET /jobs/{name}/state", "state.read", "read",
             "The job's durable state (what its runs keep through context.state), by key.",
             {200: Answer("The keys and values.", models.JobState)}),
    Endpoint("PUT /jobs/{name}/state/{key}", "state.put", "write",
             "Set one key of the job's state between runs (see jobhost state); 409 while a run of "
             "the job is running.",
             {200: Answer("Set (changed: false if it had that value).", models.StateChanged)},
             body=models.StateValue),
    Endpoint("DELETE /jobs/{name}/state/{key}", "state.delete", "write",
             "Remove one key of the job's state between runs; 404 for a key it does not have, 409 "
             "while a run of the job is running.",
             {200: Answer("Removed.", models.StateChanged)}, body=models.Reason),
    Endpoint("POST /jobs/{name}/backfills", "backfills.start", "trigger",
             "Replay the job's past occurrences from ≤ occurrence < to, each once (see jobhost "
             "backfill); dry_run only lists them.",
             {202: Answer("Recorded: its id and occurrences.", models.BackfillSelection),
              200: Answer("A dry run or nothing to do (id null).", models.BackfillSelection)},
             body=models.BackfillRequest),
    Endpoint("GET /backfills/{backfill_id}", "backfills.show", "read",
             "A backfill's progress: selected, done, succeeded, failed, running.",
             {200: Answer("The backfill.", models.Backfill)}),
    Endpoint("DELETE /backfills/{backfill_id}", "backfills.cancel", "trigger",
             "Cancel a backfill: no new occurrence starts; runs in flight finish.",
             {200: Answer("The backfill, cancelled (or already ended).", models.Backfill)},
             body=models.Reason),
    Endpoint("GET /failures", "failures", "read",
             "Open failures (failed, timed-out, abandoned and stuck runs not resolved by a later "
             "success or an acknowledgement) of every job, newest first; all=true for every one.",
             {200: Answer("Failures; pass next_cursor as cursor for the next page.",
                          models.FailureList)},
             query=models.FailuresQuery),
    Endpoint("POST /failures", "retry_failures", "trigger",
             "Retry every open failure of a job, a module or since a time, once each (one "
             "change-log entry per run), queued for the hosts.",
             {202: Answer("Queued (refused: those whose work has a retry under way).",
                          models.FailuresRetried)},
             body=models.FailureRetry),
    Endpoint("POST /pause", "actions.pause_many", "write",
             "Pause every job of the modules, or whose name matches a pattern, with one reason "
             "(one change-log entry per job paused).",
             {200: Answer("The jobs selected (changed: false if it was).", models.PausedMany)},
             body=models.Selection),
    Endpoint("POST /resume", "actions.resume_many", "write",
             "Resume every job of the modules, or whose name matches a pattern.",
             {200: Answer("The jobs selected (changed: false if it was not).", models.PausedMany)},
             body=models.Selection),
    Endpoint("POST /runs/{run_id}/retry", "actions.retry_run", "trigger",
             "Queue the next attempt at a failed, timed-out, abandoned or cancelled run's "
             "occurrence (same idempotency key); 409 for a run still running or whose work "
             "succeeded.",
             {202: Answer("Queued: a host claims it as every retry.", models.RetryQueued)},
             body=models.Reason),
    Endpoint("POST /runs/{run_id}/cancel", "actions.cancel_run", "trigger",
             "Ask the running run's host to cancel it (recorded cancelled with the token's name); "
             "a run not yet started is cancelled at once; 409 for a finished run or one whose "
             "host is gone.",
             {202: Answer("Asked (requested), already asked, or cancelled.", models.CancelAsked)},
             body=models.Reason),
    Endpoint("GET /runs/{run_id}/logs", "run_logs", "read",
             "What the run wrote through its job's logger, in order; tail it with after.",
             {200: Answer("Lines; pass next_after as after for the next ones.", models.RunLog)},
             query=models.RunLogQuery),
    Endpoint("GET /changes", "changes", "read",
             "The change log, oldest first: who changed what, when, before and after.",
             {200: Answer("Changes; pass next_after as after for the next page.",
                          models.ChangeList)},
             query=models.ChangesQuery),
)
# fmt: on
