"""Runtime jobs through the one change path, on both stores: validation as a declaration,
the schedule row written with the change, ETags, 409 for declared names, the change log, and a
declared job that takes a runtime job's name reported by validation."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from sqlalchemy.engine import Engine

from jobhost.catalog import build_catalog
from jobhost.config import Settings
from jobhost.records import ChangeSearch
from jobhost.rules import desired_schedules
from jobhost.runtime.reload import RuntimeReloader, with_runtime_jobs
from jobhost.runtime.service import ChangeRefused, JobService
from jobhost.store import Store, create_store_engine, reading, upgrade
from jobhost.store.registry import sync_schedules
from jobhost.store.reports import get_schedule
from jobhost.store.runtime import insert_runtime_job, list_runtime_jobs, search_changes
from tests.support import ManualClock

PING = {"kind": "http", "interval": "10m", "settings": {"url": "http://127.0.0.1:9/ping"}}
NOW = datetime(2026, 5, 4, 10, 0, tzinfo=UTC)


@pytest.fixture
def service(
    sample_settings: Callable[..., Settings], monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[JobService, Engine, ManualClock]]:
    settings = sample_settings([{"name": "sample.declared", "cron": "0 3 * * *"}])
    monkeypatch.setenv("JOBHOST_LOAD_PLUGINS", "http")
    engine = create_store_engine(settings.database_url)
    upgrade(engine)
    clock = ManualClock(NOW)
    yield (
        JobService(settings, build_catalog(settings), Store(engine, clock), trigger_wait=0),
        engine,
        clock,
    )
    engine.dispose()


def refused(call: Callable[[], Any]) -> ChangeRefused:
    with pytest.raises(ChangeRefused) as caught:
        call()
    return caught.value


def test_a_put_writes_the_job_its_schedule_and_the_change_in_one_go(
    service: tuple[JobService, Engine, ManualClock],
) -> None:
    jobs, engine, clock = service
    made = jobs.put("hooks.ping", PING, actor="deployer", if_match=None)
    assert made.created and made.row.version == 1 and made.etag.startswith('"1-')
    with reading(engine) as connection:
        row = get_schedule(connection, "hooks.ping")
    assert row is not None and row.trigger_source == "api" and row.module == "http"
    assert row.next_occurrence is not None and row.next_occurrence > NOW

    # The same body again changes nothing, not even the change log.
    again = jobs.put("hooks.ping", PING, actor="deployer", if_match=made.etag)
    assert (again.created, again.changed, again.etag) == (False, False, made.etag)

    # A new trigger moves the next occurrence at once.
    clock.advance(minutes=1)
    changed = jobs.put(
        "hooks.ping", {**PING, "interval": None, "cron": "0 0 1 1 *"}, actor="x", if_match="*"
    )
    assert changed.changed and changed.etag != made.etag
    with reading(engine) as connection:
        moved = get_schedule(connection, "hooks.ping")
        log = search_changes(connection, ChangeSearch(job="hooks.ping"), 100, oldest_first=True)
    assert moved is not None and moved.next_occurrence == datetime(2027, 1, 1, tzinfo=UTC)
    assert [(c.action, c.actor) for c in log] == [("create", "deployer"), ("change", "x")]
    assert log[1].before is not None and log[1].before["interval"] == "10m"
    assert log[1].after is not None and log[1].after["cron"] == "0 0 1 1 *"

    # A stale tag is refused with the current one named; a tag on a missing job too.
    stale = refused(lambda: jobs.put("hooks.ping", PING, actor="x", if_match=made.etag))
    assert stale.status == 412 and changed.etag in stale.detail
    assert refused(lambda: jobs.put("hooks.new", PING, actor="x", if_match='"1-x"')).status == 412


def test_every_field_problem_is_named_and_nothing_is_written(
    service: tuple[JobService, Engine, ManualClock],
) -> None:
    jobs, engine, _ = service
    body = {
        "kind": "http",
        "cron": "0 0 30 2 *",
        "timezone": "Mars/Olympus",
        "settings": {"url": "ftp://x"},
    }
    error = refused(lambda: jobs.put("hooks.bad", body, actor="x", if_match=None))
    fields = [problem.field for problem in error.problems]
    assert error.status == 422 and error.exit_code == 3
    assert fields == ["settings.url", "timezone", "cron"]
    assert "ftp://x" in error.problems[0].message
    secret = refused(
        lambda: jobs.put(
            "hooks.bad",
            {**PING, "settings": {"url": "http://x", "secret_headers": {"X-Key": "not a name"}}},
            actor="x",
            if_match=None,
        )
    )
    assert secret.problems[0].field == "settings.secret_headers"
    assert "environment variable" in secret.problems[0].message
    wrong_types = refused(
        lambda: jobs.put(
            "hooks.bad", {**PING, "enabled": "yes", "spare": 1}, actor="x", if_match=None
        )
    )
    assert sorted(p.field for p in wrong_types.problems) == ["enabled", "spare"]
    unknown = refused(
        lambda: jobs.put("hooks.bad", {**PING, "kind": "sms"}, actor="x", if_match=None)
    )
    assert "use one of: http" in unknown.problems[0].message
    named = refused(lambda: jobs.put("Hooks Bad", PING, actor="x", if_match=None))
    assert named.problems[0].field == "name"
    with reading(engine) as connection:
        assert get_schedule(connection, "hooks.bad") is None
        assert search_changes(connection, ChangeSearch(), 100, oldest_first=True) == []


def test_declared_names_are_refused_and_only_runtime_jobs_are_removed(
    service: tuple[JobService, Engine, ManualClock],
) -> None:
    jobs, engine, _ = service
    assert (
        refused(lambda: jobs.put("sample.declared", PING, actor="x", if_match=None)).status == 409
    )
    assert refused(lambda: jobs.delete("sample.declared", actor="x", if_match=None)).status == 409
    assert refused(lambda: jobs.delete("hooks.none", actor="x", if_match=None)).status == 404
    made = jobs.put("hooks.ping", PING, actor="x", if_match=None)
    assert refused(lambda: jobs.delete("hooks.ping", actor="x", if_match='"9-z"')).status == 412
    jobs.delete("hooks.ping", actor="remover", if_match=made.etag)
    with reading(engine) as connection:
        row = get_schedule(connection, "hooks.ping")
        log = search_changes(connection, ChangeSearch(), 100, oldest_first=True)
    assert row is not None and row.orphaned and row.next_occurrence is None
    assert [(c.action, c.actor, c.after) for c in log][-1] == ("delete", "remover", None)
    assert "hooks.ping" not in jobs.current().jobs
    # The declared job is untouched by all of it.
    with reading(engine) as connection:
        assert get_schedule(connection, "sample.declared") is None  # no host synced yet


def test_pause_resume_and_trigger_are_logged_with_the_reason(
    service: tuple[JobService, Engine, ManualClock],
) -> None:
    jobs, engine, _ = service
    jobs.put("hooks.ping", PING, actor="x", if_match=None)
    assert jobs.pause("hooks.ping", actor="ops", reason="maintenance") is True
    assert jobs.pause("hooks.ping", actor="ops", reason="again") is False
    assert jobs.resume("hooks.ping", actor="ops", reason="done") is True
    queued = jobs.trigger("sample.declared", actor="ops", reason="rerun")
    assert queued["status"] == "pending" and queued["run_id"] is None
    assert refused(lambda: jobs.trigger("hooks.none", actor="x", reason="r")).status == 404
    with reading(engine) as connection:
        log = [
            (c.action, c.job_name, c.reason)
            for c in search_changes(connection, ChangeSearch(), 100, oldest_first=True)
        ]
    assert log[1:] == [
        ("pause", "hooks.ping", "maintenance"),
        ("resume", "hooks.ping", "done"),
        ("trigger", "sample.declared", "rerun"),
    ]


def test_a_declaration_that_takes_a_runtime_jobs_name_is_a_catalog_problem(
    service: tuple[JobService, Engine, ManualClock],
) -> None:
    jobs, engine, _ = service
    # Written before the module declared the name (the service would refuse it now).
    with engine.begin() as connection:
        insert_runtime_job(
            connection,
            "sample.declared",
            PING,
            actor="early",
            now=NOW,
        )
    with reading(engine) as connection:
        merged = with_runtime_jobs(list_runtime_jobs(connection).rows, jobs.catalog, jobs.settings)
    (problem,) = merged.problems
    assert problem.code == "runtime-name-taken" and problem.job == "sample.declared"
    assert "jobhost jobs delete sample.declared" in problem.message
    assert merged.jobs["sample.declared"].trigger.source == "declaration"
    assert not merged.ok


def test_a_catalogs_sync_leaves_runtime_rows_to_their_change_path(
    service: tuple[JobService, Engine, ManualClock],
) -> None:
    jobs, engine, _ = service
    jobs.put("hooks.ping", PING, actor="x", if_match=None)
    declared = {"sample.declared": jobs.catalog.jobs["sample.declared"]}
    with engine.begin() as connection:
        plan = sync_schedules(connection, desired_schedules(declared), NOW)
        row = get_schedule(connection, "hooks.ping")
    assert plan.orphaned == [] and [a.job_name for a in plan.added] == ["sample.declared"]
    assert row is not None and not row.orphaned and row.next_occurrence is not None


@pytest.mark.parametrize(
    ("change", "field", "says"),
    [
        ({"timeout": "-5s"}, "timeout", "must be positive"),
        ({"timeout": "0s"}, "timeout", "must be positive"),
        ({"timeout": "400d"}, "timeout", "at most 365d"),
        ({"backoff": "-1s"}, "backoff", "must be 0s to 365d"),
        ({"backoff_max": "-1s"}, "backoff_max", "must be 0s to 365d"),
        ({"backoff": "10m", "backoff_max": "1m"}, "backoff_max", "not be shorter than backoff"),
        ({"misfire_grace": "-1m"}, "misfire_grace", "must be positive"),
        ({"misfire_grace": "0s"}, "misfire_grace", "must be positive"),
    ],
)
def test_a_policy_the_catalog_refuses_is_refused_naming_its_field(
    service: tuple[JobService, Engine, ManualClock],
    change: dict[str, str],
    field: str,
    says: str,
) -> None:
    jobs, engine, _ = service
    error = refused(lambda: jobs.put("hooks.bad", {**PING, **change}, actor="x", if_match=None))
    assert error.status == 422 and error.exit_code == 3
    assert [problem.field for problem in error.problems] == [field]
    assert says in error.problems[0].message
    assert "the job's definition" in error.problems[0].message
    with reading(engine) as connection:
        assert get_schedule(connection, "hooks.bad") is None


def test_a_runtime_job_joins_a_concurrency_group_the_host_limits(
    sample_settings: Callable[..., Settings], monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = sample_settings([], concurrency_limits={"warehouse": 2})
    monkeypatch.setenv("JOBHOST_LOAD_PLUGINS", "http")
    engine = create_store_engine(settings.database_url)
    upgrade(engine)
    try:
        jobs = JobService(settings, build_catalog(settings), Store(engine, ManualClock(NOW)))
        unknown = refused(
            lambda: jobs.put(
                "hooks.ping", {**PING, "concurrency_group": "warehose"}, actor="x", if_match=None
            )
        )
        assert unknown.status == 422
        assert "concurrency_group" in unknown.detail and "known: warehouse" in unknown.detail
        jobs.put("hooks.ping", {**PING, "concurrency_group": "warehouse"}, actor="x", if_match=None)
        with reading(engine) as connection:
            row = get_schedule(connection, "hooks.ping")
        assert row is not None and row.concurrency_group == "warehouse"
        # The limit is used after all: the declared catalog's warning goes once it is joined.
        catalog = build_catalog(settings)
        assert [w.code for w in catalog.warnings] == ["unused-concurrency-limit"]
        with reading(engine) as connection:
            merged = with_runtime_jobs(list_runtime_jobs(connection).rows, catalog, settings)
        assert merged.warnings == []
    finally:
        engine.dispose()


def test_a_host_says_it_reloaded_only_when_a_runtime_job_came_went_or_changed(
    service: tuple[JobService, Engine, ManualClock], caplog: pytest.LogCaptureFixture
) -> None:
    jobs, engine, clock = service
    reloader = RuntimeReloader(
        jobs.settings, build_catalog(jobs.settings), Store(engine, clock), lambda _jobs: None
    )
    reloader.start()

    def reloaded() -> list[str]:
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="jobhost.host"):
            reloader.signalled()
            reloader.reload_if_changed(signalled_only=True)
        return [r.getMessage() for r in caplog.records if "runtime jobs reloaded" in r.message]

    jobs.put("hooks.ping", PING, actor="x", if_match=None)
    assert reloaded() == ["runtime jobs reloaded: 1 (added hooks.ping, removed none)"]
    # Operator actions move the change log too; the runtime jobs are as they were.
    jobs.pause("hooks.ping", actor="ops", reason="maintenance")
    jobs.trigger("sample.declared", actor="ops", reason="rerun")
    assert reloaded() == []
    jobs.put("hooks.ping", {**PING, "interval": "20m"}, actor="x", if_match=None)
    assert reloaded() == ["runtime jobs reloaded: 1 (added none, removed none)"]
    jobs.delete("hooks.ping", actor="x", reason="gone", if_match=None)
    assert reloaded() == ["runtime jobs reloaded: 0 (added none, removed hooks.ping)"]
