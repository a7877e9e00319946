"""A job's durable state as operators read and change it: ``jobhost state NAME``, ``GET`` and
``PUT``/``DELETE /api/v1/jobs/{name}/state/{key}`` and the job page all come here.

Reads come from the store alone (no module is loaded). A change is refused while a run of the
job is running, and is recorded in the change log (actions ``state-set`` and ``state-delete``,
``before`` and ``after`` holding the key and its value) in the transaction that makes it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from jobhost.clock import Clock, SystemClock
from jobhost.operations.run_actions import ActionRefused
from jobhost.operations.timefmt import iso_utc, short_utc
from jobhost.records import StateChange, StateEntry, StateHeld
from jobhost.store import Store

__all__ = [
    "KEY_LIMIT",
    "SHOWN_KEYS",
    "VALUE_LIMIT",
    "BadStateInput",
    "JobStateView",
    "StateChange",
    "change_state",
    "check_key",
    "read_state",
    "state_json",
]

KEY_LIMIT = 200
"""Characters of a key: what the ``job_state`` table holds."""
VALUE_LIMIT = 65_536
"""Characters of a value an operator may write."""
SHOWN_KEYS = 1000
"""Keys a read lists; it says when the job has more."""


class BadStateInput(ValueError):
    """A key or value an operator may not write; the message says why."""


@dataclass(frozen=True)
class JobStateView:
    job: str
    entries: list[StateEntry]
    more: bool
    """The job has more keys than :data:`SHOWN_KEYS`."""


def read_state(store: Store, job: str) -> JobStateView:
    """The job's keys and values, by key (at most :data:`SHOWN_KEYS`)."""
    entries = list(store.list_state(job, limit=SHOWN_KEYS + 1))
    return JobStateView(job, entries[:SHOWN_KEYS], len(entries) > SHOWN_KEYS)


def state_json(view: JobStateView) -> dict[str, Any]:
    """``{"job", "state": [{"key", "value", "updated_at", "fencing_token"}], "more"}``."""
    return {
        "job": view.job,
        "state": [
            {
                "key": e.key,
                "value": e.value,
                "updated_at": iso_utc(e.updated_at),
                "fencing_token": e.fencing_token,
            }
            for e in view.entries
        ],
        "more": view.more,
    }


def change_state(
    store: Store,
    job: str,
    key: str,
    value: str | None,
    *,
    actor: str,
    reason: str,
    clock: Clock | None = None,
) -> StateChange:
    """Set ``key`` of ``job``'s state to ``value`` (``None``: delete it), logged with
    ``reason``. Raises :class:`BadStateInput` for a key or value out of bounds and
    :class:`ActionRefused` while a run of the job is running (naming the run) or when the store
    holds no schedule of the job (``unknown``)."""
    check_key(key)
    if value is not None and len(value) > VALUE_LIMIT:
        raise BadStateInput(f"the value is {len(value)} characters; keep it to {VALUE_LIMIT}")
    try:
        done = store.change_state_logged(
            job, key, value, actor=actor, reason=reason, clock=clock or SystemClock()
        )
    except StateHeld as held:
        raise ActionRefused(_held_message(held)) from None
    if not done.known:
        raise ActionRefused(
            f"the store holds no schedule of job {job}: a host writes it when it starts, "
            "and only then can its state be changed",
            unknown=True,
        )
    return done


def check_key(key: str) -> None:
    """Refuse a key no job could have written: empty, or longer than the table holds."""
    if not key.strip():
        raise BadStateInput("the key is empty")
    if len(key) > KEY_LIMIT:
        raise BadStateInput(f"the key is {len(key)} characters; keys are at most {KEY_LIMIT}")


def _held_message(held: StateHeld) -> str:
    run = held.run
    since = f" since {short_utc(run.started_at)}" if run.started_at is not None else ""
    return (
        f"job {held.job_name} has a live run {run.id} (running on host {run.host_id}{since}): "
        "its state changes only between runs; wait for the run to end, or cancel it first "
        f"(jobhost cancel {run.id} --reason ...)"
    )
