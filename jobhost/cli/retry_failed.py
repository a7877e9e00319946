"""``jobhost retry --failed``: one retry of every open failure a filter matches, queued for the
hosts (never run in this process: a bulk retry may be hundreds of runs)."""

from __future__ import annotations

import getpass
import json
from typing import Any

import click

from jobhost.cli._app import EXIT_INVALID, EXIT_USAGE
from jobhost.cli._context import open_store, settings_of

__all__ = ["retry_failed"]


def retry_failed(
    ctx: click.Context,
    run_id: str | None,
    reason: str,
    *,
    job: str | None,
    module: str | None,
    since: str | None,
    as_json: bool,
) -> None:
    """Queue the retries, print them, and exit 0 (every match queued) or 3 (some refused)."""
    from jobhost.clock import SystemClock
    from jobhost.errors import UnknownJobError
    from jobhost.operations.failures import (
        BadFailureQuery,
        FailureQuery,
        parse_since,
        retry_failures,
    )
    from jobhost.operations.jobs import require_known_job

    if run_id is not None:
        _usage("give RUN_ID or --failed, not both")
    store = open_store(settings_of(ctx), write=True)
    try:
        if job is not None:
            try:
                require_known_job(None, store, job)
            except UnknownJobError as error:
                _usage(f"--job: {error}")
        jobs = tuple(store.module_jobs(module)) if module is not None else None
        if module is not None and not jobs:
            _usage(f"--module: the store holds no job of module {module!r}")
        try:
            start = parse_since(since, SystemClock()()) if since is not None else None
        except BadFailureQuery as error:
            _usage(f"--{error.field}: {since!r} {error.detail}")
        query = FailureQuery(since=start, job=job, jobs=jobs)
        done = retry_failures(store, query, actor=getpass.getuser(), reason=reason)
    finally:
        store.dispose()
    shown: dict[str, Any] = {
        "queued": [
            {
                "run_id": q.run_id,
                "retry_of": q.retry_of.id,
                "job": q.retry_of.job_name,
                "attempt": q.attempt,
            }
            for q in done.queued
        ],
        "refused": [
            {"run_id": run.id, "job": run.job_name, "reason": why} for run, why in done.refused
        ],
        "more": done.more,
        "hosts_alive": done.hosts_alive,
    }
    if as_json:
        click.echo(json.dumps(shown, indent=2))
    else:
        _print(shown)
    if done.refused:
        raise SystemExit(EXIT_INVALID)


def _print(shown: dict[str, Any]) -> None:
    queued, refused = shown["queued"], shown["refused"]
    if not queued and not refused:
        click.echo("no open failure to retry")
    for item in queued:
        click.echo(
            f"queued retry {item['run_id']} of {item['job']} (attempt {item['attempt']}), "
            f"retrying failed run {item['retry_of']}"
        )
    for item in refused:
        click.echo(f"refused {item['run_id']} of {item['job']}: {item['reason']}")
    if queued:
        count = f"{len(queued)} retr{'y' if len(queued) == 1 else 'ies'} queued"
        click.echo(f"{count}, each in the change log (`jobhost changes`)")
        if shown["hosts_alive"]:
            click.echo("a live host runs them now; `jobhost failures` shows what stays open")
        else:
            click.echo(
                "no live host: they stay queued until a host runs (`jobhost run`); nothing "
                "ran them here"
            )
    if shown["more"]:
        click.echo("more open failures match: run it again, or narrow with --since or --job")


def _usage(message: str) -> None:
    click.echo(f"jobhost retry: {message}", err=True)
    raise SystemExit(EXIT_USAGE)
