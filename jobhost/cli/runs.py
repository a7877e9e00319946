"""``jobhost trigger``, ``retry`` and ``cancel``: an operator's action on a run; ``jobhost
failures``: the runs that failed. A bulk retry is queued for the hosts, never run here."""

from __future__ import annotations

import getpass
import json
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any, NoReturn

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
from jobhost.cli._context import (
    load_catalog,
    migrate_store,
    open_store,
    opened_store,
    require_job,
    settings_of,
)
from jobhost.cli._options import (
    change_reason,
    json_option,
    json_shown,
    limit_option,
    typed_run_id,
)
from jobhost.clock import SystemClock
from jobhost.errors import StoreUnavailableError, UnknownJobError
from jobhost.operations.jobs import ActionRefused, require_known_job, stored_catalog
from jobhost.operations.runs import OperatorRun, cancel_run, watch_run

if TYPE_CHECKING:
    from jobhost.config import Settings
    from jobhost.operations.runs import TriggerResult

__all__ = ["cancel", "failures", "retry", "trigger"]


def _waiting(until: str) -> Callable[[Any], Any]:
    """``--timeout`` (``until`` says what is waited for without it), then ``--json``."""
    timeout = click.option(
        "--timeout",
        type=click.FloatRange(min=0, min_open=True),
        # NaN passes every range check, and would mean waiting forever.
        callback=lambda c, p, v: p.type.fail("nan is not a number", p, c) if str(v) == "nan" else v,
        metavar="SECONDS",
        help=f"Stop waiting after this long (exit 4); default: {until}.",
    )
    return lambda command: timeout(json_option("Print the result as one JSON object.")(command))


def print_and_exit(result: TriggerResult, *, as_json: bool) -> NoReturn:
    """Print ``result`` as JSON, or as one line; exit 4 when ``--timeout`` ended the
    wait, 0 when the run succeeded (or was only queued), 1 otherwise."""
    from jobhost.operations.render import stdout_style, trigger_line

    if not json_shown(as_json, result.to_json()):
        click.echo(trigger_line(result, stdout_style()))
    if result.timed_out_waiting:
        raise SystemExit(EXIT_TIMEOUT)
    raise SystemExit(EXIT_OK if result.outcome in {"succeeded", "queued"} else EXIT_FAILED)


@cli.command()
@click.argument("name")
@change_reason(None, "Why; recorded with the run.", required=False)
@click.option("--no-wait", is_flag=True, help="Queue the run and exit at once.")
@click.option(
    "--now",
    "beside_limit",
    is_flag=True,
    help="Start even when the job's concurrency group is full: the run goes beside the "
    "limit, and its record says so.",
)
@_waiting("wait for the outcome")
def trigger(
    *,
    name: str,
    reason: str | None,
    no_wait: bool,
    beside_limit: bool,
    timeout: float | None,
    as_json: bool,
) -> None:
    """A live host picks the request up within a second; with none alive, the job runs in this
    process. A disabled job runs; a paused one too, with a warning. A run that would overlap
    a running one under overlap policy forbid is refused. A job whose concurrency group is
    full is queued until a slot frees (it says so), unless --now starts it beside the limit.
    Progress goes to stderr.

    JSON: {"request_id", "run_id", "job", "outcome", "host", "started_at", "finished_at",
    "duration_ms", "error"}; outcome is the run's, or refused, or queued/running when not
    waited for.

    Exit status: 0 succeeded (or queued with --no-wait); 1 failed or refused; 2 unknown job;
    3 the job's declaration is invalid; 4 --timeout passed first (a run here is cancelled, a
    host's goes on).
    """
    settings = settings_of()
    if no_wait:
        # Queued for a host: the job is read from the store, no module is loaded.
        _queue(settings, name, reason, beside_limit=beside_limit, as_json=as_json)
    catalog = load_catalog(settings)
    spec = require_job(catalog, name, "run")
    if settings.auto_migrate:
        # It may run the job itself, as `jobhost run` would, on a store not yet upgraded; a
        # store that does not exist at all is refused (see open_store).
        migrate_store(settings)
    with opened_store(settings, write=True) as store:
        here = None
        if not no_wait:
            from jobhost.cli._one_shot import runs_here

            here = runs_here(settings, catalog, store)
        manual = OperatorRun(
            settings, catalog, store, progress=to_stderr, actor=getpass.getuser(), run_here=here
        )
        result = manual.trigger(
            spec, reason, wait=not no_wait, timeout=timeout, beside_limit=beside_limit
        )
    print_and_exit(result, as_json=as_json)


def _queue(
    settings: Settings, name: str, reason: str | None, *, beside_limit: bool, as_json: bool
) -> None:
    """Queue a run of ``name`` for a host when the store holds the job: no module is loaded.
    Returns (to the built catalog's path) when no host has synced it yet, or the store is not
    at this version's schema (that path migrates it)."""
    try:
        store = open_store(settings, write=True)
    except StoreUnavailableError:
        return
    try:
        catalog = stored_catalog(settings, store, only=name)
        if name not in catalog.jobs:
            return
        manual = OperatorRun(
            settings, catalog, store, progress=to_stderr, actor=getpass.getuser(), from_store=True
        )
        result = manual.trigger(
            catalog.jobs[name], reason, wait=False, timeout=None, beside_limit=beside_limit
        )
    finally:
        store.dispose()
    print_and_exit(result, as_json=as_json)


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
@click.option("--no-wait", is_flag=True, help="Queue the retry and exit at once.")
@_waiting("wait for the outcome")
def retry(
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
    """For a run that ended failed, timed_out, abandoned or cancelled. A live host claims the
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
        _retry_failed(run_id, reason, job=job, module=module, since=since, as_json=as_json)
        return
    if run_id is None:
        raise click.UsageError("give RUN_ID, or --failed to retry every open failure")
    if job or module or since:
        raise click.UsageError("--job, --module and --since go with --failed")

    settings = settings_of()
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
    print_and_exit(done, as_json=as_json)


@cli.command()
@click.argument("run_id")
@change_reason("upstream fixed, rerun")
@click.option("--no-wait", is_flag=True, help="Record the request and exit at once.")
@_waiting("wait until the run ends")
def cancel(
    *,
    run_id: str,
    reason: str,
    no_wait: bool,
    timeout: float | None,
    as_json: bool,
) -> None:
    """The request is recorded on the run; the host running it sees it at once (the hosts'
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
    with opened_store(settings_of(), write=True) as store:
        run_id = typed_run_id(store, run_id)
        try:
            asked = cancel_run(store, run_id, actor=actor, reason=reason)
            run = asked.run
            if asked.state == "already":
                to_stderr(
                    f"a cancel of run {run.id} was already asked for by "
                    f"{run.cancel_requested_by}: {run.cancel_reason}"
                )
            elif asked.state == "requested":
                to_stderr(f"asked host {run.host_id} to cancel run {run.id} of {run.job_name}")
            if asked.state == "cancelled":
                ended = watch_run(store, run_id, 0.0)  # recorded already: read it
            else:
                ended = None if no_wait else watch_run(store, run_id, timeout)
        except ActionRefused as refused:
            fail(f"refused: {refused}", EXIT_INVALID)
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
    with opened_store(settings_of(), write=True) as store:
        if job is not None:
            try:
                require_known_job(None, store, job)
            except UnknownJobError as error:
                _usage(f"--job: {error}")
        jobs = tuple(sorted(store.list_schedules(module=module))) if module is not None else None
        if module is not None and not jobs:
            _usage(f"--module: the store holds no job of module {module!r}")
        query = FailureQuery(since=_since(since), job=job, jobs=jobs)
        shown = retry_failures(store, query, actor=getpass.getuser(), reason=reason)
    if not json_shown(as_json, shown):
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


def _since(since: str | None) -> datetime | None:
    """``--since`` (a duration back from now, a date or a time) as an instant, or exit 2."""
    from jobhost.operations.failures import BadFailureQuery, parse_since

    try:
        return parse_since(since, SystemClock()()) if since is not None else None
    except BadFailureQuery as error:
        _usage(f"--{error.field}: {since!r} {error.detail}")


def _usage(message: str) -> NoReturn:
    fail(f"jobhost {click.get_current_context().info_name}: {message}", EXIT_USAGE)


@cli.command()
@click.option(
    "--since",
    metavar="DURATION_OR_TIME",
    help="Only runs that finished since then: 2h, 7d, a date (UTC) or 2026-11-28T06:00:00Z.",
)
@click.option("--job", metavar="NAME", help="Only this job's runs.")
@click.option(
    "--grep",
    "text",
    metavar="TEXT",
    help="Only runs whose error type or message contains TEXT (any case).",
)
@limit_option("How many rows to show.", default=50, most=1000)
@click.option(
    "--all",
    "include_resolved",
    is_flag=True,
    help="Also failures resolved by a later success or an acknowledgement.",
)
@click.option(
    "--ack",
    "ack_run",
    metavar="RUN_ID",
    help="Acknowledge this failed run (resolve it without a rerun); needs --reason.",
)
@change_reason(None, "Why, for --ack (in the change log).", required=False)
@click.option(
    "--wide", is_flag=True, help="Every field whole (run ids, names, errors), past 80 columns."
)
@json_option()
def failures(
    *,
    since: str | None,
    job: str | None,
    text: str | None,
    limit: int,
    include_resolved: bool,
    ack_run: str | None,
    reason: str | None,
    wide: bool,
    as_json: bool,
) -> None:
    """A failure is open until its work succeeds later (a retry, or a backfill of its occurrence:
    the same job and occurrence; for a manual run, a retry of it) or an operator acknowledges
    it (--ack RUN_ID --reason TEXT, logged in `jobhost changes`); --all shows the resolved ones
    too, with who resolved them. Repeats of one job and error are one line, with their count
    (x 30). Stuck runs (still running, with an expired lease or code that ignored its
    cancellation) come first. Each row, within 80 columns: finished time, the run id's first 8
    characters, outcome, job, attempt and the job's current failure streak (its failed
    attempts in a row, counted up to 100) when past 1, error type and the first line of the
    message, cut at the line's end; --wide: every field whole. Reads only the store (--ack
    writes the change log; it takes a run id's first 8 characters or more). JSON:
    {"failures": [{"job", "run_id", "occurrence", "started_at", "finished_at", "outcome",
    "attempt", "source", "host", "error_type", "error", "streak", "resolved"}], "groups":
    [{"job", "outcome", "error_type", "error", "count", "run_ids", "resolved"}],
    "next_cursor", "searched_to", "streak_limit", "generated_at"}, the shape of
    GET /api/v1/failures; with --ack: {"acknowledged", "job", "by", "reason", "at"}.

    Exit status: 0 (also when nothing failed; --ack: acknowledged); 2 for an unknown --job or
    a bad option; 3 --ack refused (an unknown run, one that did not fail, one resolved
    already).
    """
    if ack_run is not None:
        _acknowledge(ack_run, reason, as_json=as_json)
        return
    if reason is not None:
        _usage("--reason goes with --ack RUN_ID")
    from jobhost.operations.failures import (
        SEARCH_LIMIT,
        FailureQuery,
        failure_line,
        failures_json,
        group_failures,
        read_failures,
    )
    from jobhost.operations.render import WIDTH, wrap_words

    if text is not None and not 0 < len(text.strip()) <= SEARCH_LIMIT:
        _usage(f"--grep: give 1 to {SEARCH_LIMIT} characters to search for")
    with opened_store(settings_of()) as store:
        if job is not None:
            require_known_job(None, store, job)
        query = FailureQuery(
            since=_since(since),
            job=job,
            text=text.strip() if text else None,
            limit=limit,
            include_resolved=include_resolved,
        )
        found = read_failures(store, query)
    if json_shown(as_json, failures_json(found)):
        return
    notes = []
    if not found.failures:
        left = "" if include_resolved else " left open (--all shows resolved ones)"
        notes.append(
            "no failed, timed-out, abandoned or stuck run" + _scope(since, job, text) + left
        )
    for group in group_failures(found.failures):
        click.echo(failure_line(group.newest, len(group.rows), wide=wide))
    if found.searched_to is not None:
        notes.append(
            f"(searched runs that finished back to {found.searched_to:%Y-%m-%d %H:%M:%SZ}; "
            "narrow with --since or --job to search further back)"
        )
    elif found.next_cursor is not None:
        notes.append(f"(the newest {limit} shown; more with --limit or --since)")
    for note in notes:
        click.echo(note if wide else "\n".join(wrap_words(note, WIDTH)))


def _acknowledge(run_id: str, reason: str | None, *, as_json: bool) -> None:
    from jobhost.operations.failures import acknowledge_failure

    why = (reason or "").strip()  # change_reason folded it, and bounded it to 500 characters
    if not why:
        _usage("--ack needs --reason TEXT (1 to 500 characters): why it needs no rerun")
    with opened_store(settings_of(), write=True) as store:
        run_id = typed_run_id(store, run_id)
        try:
            done = acknowledge_failure(store, run_id, actor=getpass.getuser(), reason=why)
        except ActionRefused as refused:
            fail(f"refused: {refused}", EXIT_INVALID)
    shown = {
        "acknowledged": done.run.id,
        "job": done.run.job_name,
        "by": getpass.getuser(),
        "reason": why,
        "at": done.at.strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    if not json_shown(as_json, shown):
        click.echo(
            f"acknowledged failure {done.run.id} of {done.run.job_name} ({done.run.outcome}): {why}"
        )


def _scope(since: str | None, job: str | None, text: str | None) -> str:
    parts = [f"of job {job}" if job else "", f"since {since}" if since else ""]
    parts.append(f"with {text!r} in its error" if text else "")
    return "".join(f" {part}" for part in parts if part)
