"""``jobhost retry RUN_ID`` and ``jobhost cancel RUN_ID``: an operator's action on one run;
``jobhost retry --failed``: one retry of every open failure a filter matches, queued for the
hosts (never run in this process: a bulk retry may be hundreds of runs)."""

from __future__ import annotations

import getpass
import json
from typing import Any, NoReturn

import click

from jobhost.cli._app import (
    EXIT_FAILED,
    EXIT_INVALID,
    EXIT_OK,
    EXIT_TIMEOUT,
    EXIT_USAGE,
    cli,
    fail,
    to_stderr,
)
from jobhost.cli._context import load_catalog, migrate_store, opened_store, settings_of
from jobhost.cli._options import (
    change_reason,
    print_and_exit,
    since_instant,
    typed_run_id,
    wait_options,
)
from jobhost.errors import UnknownJobError
from jobhost.operations.jobs import ActionRefused, require_known_job
from jobhost.operations.runs import OperatorRun, cancel_run, watch_run

__all__ = ["cancel", "retry"]


@cli.command()
@click.argument("run_id", required=False)
@change_reason("upstream fixed, rerun")
@click.option(
    "--failed", is_flag=True, help="Retry every open failure (of --job, --module, --since) once."
)
@click.option("--job", metavar="NAME", help="With --failed: only this job's failures.")
@click.option("--module", metavar="M", help="With --failed: only failures of module M's jobs.")
@click.option(
    "--since",
    metavar="DURATION_OR_TIME",
    help="With --failed: only failures since then: 2h, 7d, a date (UTC) or a time.",
)
@wait_options(no_wait="Queue the retry and exit at once.", until="wait for the outcome")
@click.pass_context
def retry(
    ctx: click.Context,
    *,
    run_id: str | None,
    reason: str,
    failed: bool,
    job: str | None,
    module: str | None,
    since: str | None,
    no_wait: bool,
    timeout: float | None,
    as_json: bool,
) -> None:
    """Run the work of failed run RUN_ID again: the same occurrence and idempotency key, the
    next attempt, through the claim every run goes through.

    For a run that ended failed, timed_out, abandoned or cancelled. A live host claims the
    retry within a second; with none alive it runs in this process. The operating-system user
    and the reason go in the change log (`jobhost changes`). Progress goes to stderr.

    JSON: {"retry_of", "attempt", "run_id", "job", "outcome", "host", "started_at",
    "finished_at", "duration_ms", "error"}; outcome is the new run's, or queued/running when
    not waited for.

    RUN_ID may be a unique start of a run id, 8 characters or more.

    With --failed instead of RUN_ID: queue one retry of every open failure (see `jobhost
    failures`) of --job NAME, of --module M's jobs, or since --since, for the hosts to run
    (each piece of work once, its newest failed attempt; at most 1000), one change-log entry
    per run; with no live host they stay queued until one runs. JSON: {"queued": [{"run_id",
    "retry_of", "job", "attempt"}], "refused": [{"run_id", "job", "reason"}], "more",
    "hosts_alive"}.

    Exit status: 0 succeeded (or queued with --no-wait; --failed: every match queued); 1
    failed; 2 a prefix that starts several run ids (they are listed); 3 refused (an unknown
    run, one still running or pending, one whose work succeeded or never ran; --failed: some
    matches refused); 4 --timeout passed first (a run here is cancelled, a host's goes on).
    """
    from jobhost.cli._one_shot import runs_here

    if failed:
        _retry_failed(ctx, run_id, reason, job=job, module=module, since=since, as_json=as_json)
        return
    if run_id is None:
        raise click.UsageError("give RUN_ID, or --failed to retry every open failure")
    if job or module or since:
        raise click.UsageError("--job, --module and --since go with --failed")

    settings = settings_of(ctx)
    catalog = load_catalog(settings)
    if settings.auto_migrate:
        migrate_store(settings)  # it may run the job itself, as `jobhost run` would
    with opened_store(settings, write=True) as store:
        run_id = typed_run_id(store, run_id)
        here = runs_here(settings, catalog, store)
        runner = OperatorRun(
            settings, catalog, store, progress=to_stderr, actor=getpass.getuser(), run_here=here
        )
        try:
            done = runner.retry(run_id, reason, wait=not no_wait, timeout=timeout)
        except ActionRefused as refused:
            fail(f"refused: {refused}", EXIT_INVALID)
    print_and_exit(done, done.to_json(), as_json=as_json)


@cli.command()
@click.argument("run_id")
@change_reason("upstream fixed, rerun")
@wait_options(no_wait="Record the request and exit at once.", until="wait until the run ends")
@click.pass_context
def cancel(
    ctx: click.Context,
    *,
    run_id: str,
    reason: str,
    no_wait: bool,
    timeout: float | None,
    as_json: bool,
) -> None:
    """Cancel running run RUN_ID through its host, and wait until it ends.

    The request is recorded on the run; the host running it sees it at once (the hosts'
    change signal) and sets the run's cancellation, so the executor stops at its next check
    and the run is recorded cancelled, with the operating-system user and the reason (also in
    `jobhost changes`). A run not yet started (a queued retry) is recorded cancelled at once.
    An executor that ignores cancellation runs on (stuck) until it ends.

    JSON: {"run_id", "job", "host", "requested", "outcome", "cancelled_by", "reason"};
    requested is requested, already (someone asked first) or cancelled (it had not started).

    RUN_ID may be a unique start of a run id, 8 characters or more.

    Exit status: 0 the run ended cancelled (or the request is recorded, with --no-wait);
    1 it ended otherwise (it finished first); 2 a prefix that starts several run ids (they are
    listed); 3 refused (an unknown run, one already ended,
    one whose host is gone); 4 --timeout passed first.
    """
    actor = getpass.getuser()
    with opened_store(settings_of(ctx), write=True) as store:
        run_id = typed_run_id(store, run_id)
        try:
            asked = cancel_run(store, run_id, actor=actor, reason=reason)
        except ActionRefused as refused:
            fail(f"refused: {refused}", EXIT_INVALID)
        run = asked.run
        if asked.state == "already":
            to_stderr(
                f"a cancel of run {run.id} was already asked for by {run.cancel_requested_by}: "
                f"{run.cancel_reason}"
            )
        elif asked.state == "requested":
            to_stderr(f"asked host {run.host_id} to cancel run {run.id} of {run.job_name}")
        if asked.state == "cancelled":
            ended = watch_run(store, run_id, 0.0)  # recorded already: read it
        else:
            ended = None if no_wait else watch_run(store, run_id, timeout)
    shown = {
        "run_id": run.id,
        "job": run.job_name,
        "host": run.host_id,
        "requested": asked.state,
        "outcome": ended.outcome if ended is not None else "running",
        "cancelled_by": (ended.cancel_requested_by if ended else None) or actor,
        "reason": (ended.cancel_reason if ended else None) or reason,
    }
    if as_json:
        click.echo(json.dumps(shown, indent=2))
    elif ended is not None:
        error = f": {ended.error_message}" if ended.error_message else ""
        click.echo(f"{ended.outcome}: {run.job_name} run {run.id} on host {run.host_id}{error}")
    elif no_wait:
        click.echo(f"cancel requested: {run.job_name} run {run.id} on host {run.host_id}")
    else:
        click.echo(f"still running: {run.job_name} run {run.id}; the request stands")
    if ended is None:
        raise SystemExit(EXIT_OK if no_wait else EXIT_TIMEOUT)
    raise SystemExit(EXIT_OK if ended.outcome == "cancelled" else EXIT_FAILED)


def _retry_failed(
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
    from jobhost.operations.failures import FailureQuery, retry_failures

    if run_id is not None:
        _usage("give RUN_ID or --failed, not both")
    with opened_store(settings_of(ctx), write=True) as store:
        if job is not None:
            try:
                require_known_job(None, store, job)
            except UnknownJobError as error:
                _usage(f"--job: {error}")
        jobs = tuple(sorted(store.list_schedules(module=module))) if module is not None else None
        if module is not None and not jobs:
            _usage(f"--module: the store holds no job of module {module!r}")
        query = FailureQuery(since=since_instant(since, _usage), job=job, jobs=jobs)
        shown = retry_failures(store, query, actor=getpass.getuser(), reason=reason)
    if as_json:
        click.echo(json.dumps(shown, indent=2))
    else:
        _print_retries(shown)
    if shown["refused"]:
        raise SystemExit(EXIT_INVALID)


def _print_retries(shown: dict[str, Any]) -> None:
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


def _usage(message: str) -> NoReturn:
    fail(f"jobhost retry: {message}", EXIT_USAGE)
