"""Creating, changing, removing, pausing, resuming and triggering jobs: one path for the API
and the CLI, each change validated as a declaration is and written with its change-log row in
one transaction; a refused change is a :class:`ChangeRefused` (HTTP status and exit code).
A runtime job's ``ETag`` is ``"<version>-<digest of the stored definition>"``.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from jobhost.catalog import Catalog, JobSpec
from jobhost.config import Settings
from jobhost.errors import JobhostError, shown_name
from jobhost.operations import jobs
from jobhost.records import RuntimeJobRow
from jobhost.rules import desired_schedules
from jobhost.runtime.definition import (
    FieldProblem,
    JobDefinition,
    SecretRule,
    build_spec,
    parse_definition,
)
from jobhost.runtime.reload import SpecCache, declared_jobs, with_runtime_jobs
from jobhost.store import Store

__all__ = ["ChangeRefused", "JobService", "PutResult", "etag_matches", "etag_of", "not_found"]

_TRIGGER_WAIT_SECONDS = 2.0
_UNCONDITIONAL_TRIES = 10  # of a write without If-Match that keeps losing races; then 409


def etag_of(row: RuntimeJobRow) -> str:
    text = json.dumps(row.definition, sort_keys=True, separators=(",", ":"))
    return f'"{row.version}-{hashlib.sha256(text.encode()).hexdigest()[:16]}"'


@dataclass(frozen=True)
class PutResult:
    created: bool
    changed: bool
    row: RuntimeJobRow
    etag: str


class JobService:
    def __init__(
        self,
        settings: Settings,
        catalog: Catalog,
        store: Store,
        *,
        trigger_wait: float = _TRIGGER_WAIT_SECONDS,
    ) -> None:
        self.trigger_wait = trigger_wait
        self.settings = settings
        self.catalog = catalog
        self.store = store
        self.clock = store.clock
        self._cache = SpecCache()
        self._secrets = SecretRule.of(settings)

    def current(self, only: str | None = None) -> Catalog:
        """Declared and runtime jobs as the store has them now (of runtime jobs, only ``only``
        when given)."""
        rows = self.store.list_runtime_jobs(None if only is None else [only]).rows
        return with_runtime_jobs(rows, self.catalog, self.settings, cache=self._cache)

    def runtime_row(self, name: str) -> RuntimeJobRow | None:
        return next(iter(self.store.list_runtime_jobs([name]).rows), None)

    def put(
        self,
        name: str,
        body: object,
        *,
        actor: str,
        if_match: str | None,
        if_none_match: str | None = None,
        reason: str | None = None,
    ) -> PutResult:
        """Create or replace runtime job ``name`` (``If-None-Match: *``: create only)."""
        definition = parse_definition(body)
        if not isinstance(definition, JobDefinition):
            raise invalid(name, definition)
        if name in declared_jobs(self.catalog):
            raise conflict(
                f"job {name} is declared by module {self.catalog.jobs[name].module}; a runtime "
                "job cannot take a declared job's name: choose another name"
            )
        spec = build_spec(
            name, definition, self.catalog.kinds, self.settings.modules, secrets=self._secrets
        )
        group, limits = definition.concurrency_group, self.settings.concurrency_limits
        if isinstance(spec, JobSpec) and group is not None and group not in limits:
            known = ", ".join(sorted(limits)) or "none (the host has no [concurrency_limits])"
            spec = [
                FieldProblem(
                    "concurrency_group",
                    f"names no group of the host's [concurrency_limits] (known: {known}); use "
                    "one of them, or ask the operator to add the group with its limit",
                )
            ]
        if not isinstance(spec, JobSpec):
            raise invalid(name, spec)
        stored = definition.model_dump(mode="json")
        # Without a condition the last writer wins: a write that lost a race is made again.
        unconditional = if_match is None and if_none_match is None
        tries = _UNCONDITIONAL_TRIES if unconditional else 1
        for _ in range(tries):
            put = self.store.write_runtime_job(
                name,
                stored,
                actor=actor,
                clock=self.clock,
                check=lambda row: _check_put(name, row, if_match, if_none_match),
                schedule=desired_schedules({name: spec}),
                group=spec.concurrency_group,
                # An unconditional write waits for a concurrent one rather than losing to it.
                wait_for_writers=unconditional,
                reason=reason,
            )
            if not put.lost:
                assert put.after is not None
                return PutResult(put.before is None, put.changed, put.after, etag_of(put.after))
            if if_match is not None:
                raise stale(name, if_match, None)
        raise conflict(
            f"job {name} was changed by someone else meanwhile; read it (its ETag) and "
            "repeat the change with If-Match"
        )

    def delete(
        self, name: str, *, actor: str, if_match: str | None, reason: str | None = None
    ) -> RuntimeJobRow:
        """Remove runtime job ``name``; its schedule row and history stay (orphaned)."""
        if name in declared_jobs(self.catalog):
            raise conflict(
                f"job {name} is declared by module {self.catalog.jobs[name].module}; only "
                "runtime jobs can be removed here (disable a declared job in its "
                f'[jobs."{name}"] section instead)'
            )
        removed = self.store.write_runtime_job(
            name,
            None,
            actor=actor,
            clock=self.clock,
            check=lambda row: _check_match(name, row, if_match, deleting=True),
            reason=reason,
        )
        assert removed.before is not None
        if removed.lost:
            raise stale(name, if_match or etag_of(removed.before), None)
        return removed.before

    def pause(self, name: str, *, actor: str, reason: str) -> bool:
        """False when it already was paused."""
        catalog = self._require(name)
        return jobs.pause_jobs(self.store, catalog, [name], actor=actor, reason=reason)[0].changed

    def resume(self, name: str, *, actor: str, reason: str) -> bool:
        self._require(name)
        done = jobs.resume_jobs(self.store, [name], actor=actor, reason=reason)[0]
        return done is not None and done.changed

    def trigger(self, name: str, *, actor: str, reason: str) -> dict[str, Any]:
        """Queue a manual run; wait briefly for a host to start it, to answer with its run id."""
        self._require(name)
        request_id = jobs.request_trigger(self.store, name, actor=actor, reason=reason)
        deadline = time.monotonic() + self.trigger_wait
        status, run_id, message = "pending", None, None
        # A host that starts, queues or refuses the run signals it: wait on that, not a timer.
        with self.store.change_signal() as signal:
            while True:
                page = self.store.run_pages([request_id]).get(request_id)
                run = page.run if page is not None else None
                status = run.request_status if run is not None else "pending"
                if run is not None and status != "pending":
                    run_id = None if status == "refused" else run.id
                    message = run.request_message
                    break
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                signal.wait(left)
        return dict(job=name, request_id=request_id, run_id=run_id, status=status, message=message)

    def _require(self, name: str) -> Catalog:
        catalog = self.current(name)
        if name not in catalog.jobs:
            raise not_found(name)
        return catalog


def etag_matches(etag: str, if_none_match: str) -> bool:
    """Whether an ``If-None-Match`` header names ``etag`` (weak comparison, RFC 9110:
    ``W/"x"`` names ``"x"`` too; ``*`` names any)."""
    tags = [tag.strip().removeprefix("W/") for tag in if_none_match.split(",")]
    return "*" in tags or etag in tags


def _check_match(
    name: str, row: RuntimeJobRow | None, if_match: str | None, *, deleting: bool = False
) -> None:
    if deleting and row is None:
        raise not_found(name, "runtime job")
    if if_match is None:
        return
    tags = [tag.strip() for tag in if_match.split(",")]
    weak = next((tag for tag in tags if tag.startswith("W/")), None)
    if weak is not None:
        # RFC 9110: If-Match compares strongly, and a weak tag never matches.
        raise precondition(
            f"If-Match {weak} is a weak ETag, which never matches: send the ETag as a GET or "
            "PUT gave it"
        )
    if row is None:
        raise stale(name, if_match, None)
    if "*" not in tags and etag_of(row) not in tags:
        raise stale(name, if_match, etag_of(row))


def _check_put(
    name: str, row: RuntimeJobRow | None, if_match: str | None, if_none_match: str | None
) -> None:
    if if_none_match is not None and row is not None and etag_matches(etag_of(row), if_none_match):
        raise precondition(
            f"job {name} already exists (If-None-Match {if_none_match}): nothing was "
            "changed; to replace it, send If-Match with its ETag instead"
        )
    _check_match(name, row, if_match)


class ChangeRefused(JobhostError):
    """``status`` is the API's answer (404, 409, 412, 422); ``problems`` name the fields."""

    def __init__(
        self,
        status: int,
        title: str,
        detail: str,
        *,
        problems: Sequence[FieldProblem] = (),
        exit_code: int = 1,
        headline: str | None = None,
    ) -> None:
        self.status = status
        self.title = title
        self.detail = detail
        self.problems = list(problems)
        self.exit_code = exit_code
        lines = "".join(f"\n  {p.line()}" for p in self.problems)
        super().__init__(f"{headline or detail}{lines}")


def invalid(name: str, problems: Sequence[FieldProblem]) -> ChangeRefused:
    first = problems[0].line() if problems else "the definition is invalid"
    more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
    # A name too long to repeat (a caller's 60 KB path) is described: "job of 5006 characters".
    shown = shown_name(name)
    job = name if shown == repr(name) else shown
    return ChangeRefused(
        422,
        "Invalid job definition",
        f"job {job}: {first}{more}",
        problems=problems,
        exit_code=3,
        headline=f"job {job}: the definition is refused:",
    )


def not_found(name: str, what: str = "job") -> ChangeRefused:
    return ChangeRefused(
        404,
        "No such job",
        f"no {what} {shown_name(name)}; list them with GET /api/v1/jobs or `jobhost jobs list`",
        exit_code=2,
    )


def conflict(detail: str) -> ChangeRefused:
    return ChangeRefused(409, "Conflict", detail)


def precondition(detail: str) -> ChangeRefused:
    return ChangeRefused(412, "Precondition failed", detail)


def stale(name: str, given: str, current: str | None) -> ChangeRefused:
    now = f"it is now {current}" if current else "it no longer exists"
    return precondition(
        f"job {name} changed since you read it (If-Match {given}; {now}); read it again "
        "(GET its ETag) and repeat the change"
    )
