"""``jobhost report``: what runs when, what ran, and what differs from what is declared;
``jobhost next``: when a cron expression, or a job's effective trigger, fires next.

``next`` shows every instant in UTC and in the trigger's zone, so an operator can check daylight
saving before a job misfires in production; ``--dst-gap`` / ``--dst-repeat`` preview a policy.
"""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime, timedelta, tzinfo
from typing import TYPE_CHECKING, cast

import click
from jobhost_contracts import DstGap, DstRepeat

from jobhost.catalog.model import Catalog
from jobhost.cli._app import EXIT_FAILED, cli, fail, to_stderr
from jobhost.cli._context import (
    catalog_for,
    load_catalog,
    opened_store,
    refuse_invalid,
    require_job,
    settings_of,
)
from jobhost.cli._options import json_option
from jobhost.errors import StoreMissingError, StoreUnavailableError
from jobhost.operations.jobs import require_known_job, stored_version
from jobhost.operations.report import SORTS, STATUSES, JobFilter, Sort, build_report, select_jobs
from jobhost.operations.timefmt import iso_utc
from jobhost.store import StoreError
from jobhost.triggers import (
    CronNeverFiresError,
    CronSchedule,
    CronSyntaxError,
    Schedule,
    UnknownTimezoneError,
    cron_schedule,
    load_zone,
)
from jobhost.triggers.instants import SAFE_RANGE_TEXT, safe_utc

if TYPE_CHECKING:
    from jobhost.store import Store

__all__ = ["next_occurrences", "report"]


@cli.command()
@json_option()
@click.option("--job", "job", metavar="NAME", help="Only this job, in detail (reads only it).")
@click.option(
    "--long", "long", is_flag=True, help="A detailed block per job, with its full name, not a line."
)
@click.option("--module", "modules", metavar="M", multiple=True, help="Only jobs of module M.")
@click.option(
    "--state",
    "states",
    type=click.Choice(STATUSES),
    multiple=True,
    help="Only jobs with this status (repeatable).",
)
@click.option("--failing", is_flag=True, help="Only jobs whose last run failed or timed out.")
@click.option(
    "--sort", type=click.Choice(SORTS), default="name", show_default=True, help="Order of jobs."
)
@click.option("--limit", type=click.IntRange(min=1), metavar="N", help="At most N jobs.")
@click.option(
    "--all", "show_all", is_flag=True, help="List every job, the ok ones too (text output)."
)
@click.option(
    "--check-catalog",
    is_flag=True,
    help="Also load the modules and compare their catalog with the store's, job by job.",
)
def report(
    *,
    as_json: bool,
    job: str | None,
    long: bool,
    modules: tuple[str, ...],
    states: tuple[str, ...],
    failing: bool,
    sort: str,
    limit: int | None,
    show_all: bool,
    check_catalog: bool,
) -> None:
    """Statuses: ok, failing, overdue, behind, stuck, running, paused, disabled, orphaned,
    invalid. The text lists the jobs that are not ok (--all, --state or --job lists them
    too); --json lists every job the filters keep. One line per job: a name longer than its
    column is cut in the middle with "..." (--long and --json give full names). Each line
    shows the job's status, next fire in its local time, last outcome and how long ago, and
    flags (critical, override, ...). --long (or --job) shows each job's declared and
    effective trigger, next fire in UTC and local time, last run, recent outcomes and every
    reason what runs differs from what is declared or expected. Filters combine.

    The report reads the store alone: each job as the last sync wrote it (its declaration,
    policies and trigger), loading no module. --check-catalog also loads this installation's
    modules and compares their catalog with the store, job by job (mismatch store-differs).

    Exit status: 0; 2 for an unknown --job; 3 with --check-catalog when the catalog is invalid
    (the report is still printed, from what could be loaded; see `jobhost validate`).
    """
    from jobhost.operations.render import indented, report_lines, stdout_style, terminal_width

    settings = settings_of()
    catalog = load_catalog(settings) if check_catalog else None
    with opened_store(settings) as store:
        if job is not None:
            # Without a catalog the job is known from the store alone (no plugin is loaded).
            require_known_job(catalog or Catalog(jobs={}, problems=[]), store, job)
        # The one-line-per-job text shows no job's recent outcomes: they are not read for it.
        shown = as_json or long or job is not None
        built = build_report(settings, catalog, store, job=job, recent=shown, apart=True)
        if catalog is not None:
            _note_versions(catalog, store)
    which = JobFilter(modules=modules, statuses=states, failing=failing, sort=cast("Sort", sort))
    jobs = select_jobs(built.jobs, which)
    # At 10,000 jobs the text would be 10,000 lines of "ok": by default it lists what needs
    # a look, and says how many ok jobs it left out. Naming a status or a job shows it whatever.
    hidden = 0
    if not (as_json or show_all or states or job is not None):
        kept = [entry for entry in jobs if entry.status != "ok"]
        hidden, jobs = len(jobs) - len(kept), kept
    jobs = jobs[:limit]
    if as_json:
        click.echo(indented(built.to_json(jobs)))
    else:
        lines = report_lines(
            built,
            stdout_style(),
            width=terminal_width(),
            long=long or job is not None,
            jobs=jobs,
            piped=not sys.stdout.isatty(),
            hidden_ok=hidden,
        )
        click.echo("\n".join(lines))
    if catalog is not None and not catalog.ok:
        refuse_invalid(
            catalog,
            f"jobhost: the catalog has {len(catalog.problems)} problem(s); see `jobhost validate`:",
        )


def _note_versions(catalog: Catalog, store: Store) -> None:
    """Say on stderr when this installation's catalog version is not the one the store holds
    (one digest each: equal versions, equal declarations)."""
    from jobhost.operations.plan import this_catalog

    held = stored_version(store.health_rows(versions=True)[1].versions)
    mine = this_catalog(catalog)
    if held != mine:
        to_stderr(
            f"note: this installation's catalog is version {mine}, the store holds "
            f"{held or 'none'}; a host started with this catalog applies it (see `jobhost plan`)"
        )


class _Instant(click.ParamType[datetime]):
    """An ISO-8601 instant (``2026-03-29T00:00:00Z``, an offset, or naive meaning UTC), in UTC."""

    name = "ISO-8601"

    def convert(
        self, value: object, param: click.Parameter | None, ctx: click.Context | None
    ) -> datetime:
        if isinstance(value, datetime):
            return value
        try:
            instant = datetime.fromisoformat(str(value).strip())
        except ValueError:
            self.fail(
                f"{value!r} is not an ISO-8601 instant; write e.g. 2026-03-29T00:00:00Z, "
                "2026-03-29T02:00:00+02:00, or a time without offset meaning UTC",
                param,
                ctx,
            )
        utc = safe_utc(instant.replace(tzinfo=UTC) if instant.tzinfo is None else instant)
        if utc is None:
            self.fail(
                f"{value!r} is outside the instants jobhost computes ({SAFE_RANGE_TEXT})",
                param,
                ctx,
            )
        return utc


@cli.command("next")
@click.argument("name", required=False)
@click.option("--cron", "expression", metavar="EXPR", help="A cron expression to preview.")
@click.option("--tz", "timezone", metavar="ZONE", help="IANA zone of --cron (default UTC).")
@click.option(
    "--after", type=_Instant(), help="Show instants strictly after this one (default: now)."
)
@click.option(
    "-n",
    "count",
    type=click.IntRange(1, 1000),
    default=5,
    show_default=True,
    help="How many instants to show.",
)
@click.option(
    "--dst-gap",
    type=click.Choice([g.value for g in DstGap]),
    help="Preview this policy for a local time a spring-forward skips (default: the job's, "
    "or shift).",
)
@click.option(
    "--dst-repeat",
    type=click.Choice([r.value for r in DstRepeat]),
    help="Preview this policy for a local time a fall-back repeats (default: the job's, or once).",
)
@json_option("Print a JSON array of {utc, local}.")
def next_occurrences(
    *,
    name: str | None,
    expression: str | None,
    timezone: str | None,
    after: datetime | None,
    count: int,
    dst_gap: str | None,
    dst_repeat: str | None,
    as_json: bool,
) -> None:
    """For a job, its daylight-saving policy is shown; --dst-gap and --dst-repeat preview another
    one (they matter to fixed-time jobs only). Local times that do not exist under
    dst_gap=skip are listed after the instants.

    Exit status: 0 ok, 1 the job has no trigger, 2 an unknown job or an invalid expression or
    zone, 3 the job's declaration has problems (see `jobhost validate`).
    """
    if (name is None) == (expression is None):
        raise click.UsageError("give either a job NAME or --cron EXPR (exactly one)")
    if timezone is not None and expression is None:
        raise click.UsageError("--tz goes with --cron; a job's zone comes from its trigger")
    start = after if after is not None else datetime.now(UTC).replace(microsecond=0)
    gap = None if dst_gap is None else DstGap(dst_gap)
    repeat = None if dst_repeat is None else DstRepeat(dst_repeat)
    if expression is not None:
        schedule, zone = _from_expression(expression, timezone or "UTC", gap, repeat)
    else:
        assert name is not None
        schedule, zone = _from_job(name, start, gap, repeat)
    instants = schedule.iter_after(start, count)
    if as_json:
        shown = [{"utc": iso_utc(i), "local": i.astimezone(zone).isoformat()} for i in instants]
        click.echo(json.dumps(shown))
    else:
        _print_columns(instants, zone)
        if instants:
            for skipped in schedule.skipped_between(start, instants[-1]):
                click.echo(f"does not exist, recorded missed: {_skipped(skipped, zone)}")


def _from_expression(
    expression: str, timezone: str, gap: DstGap | None, repeat: DstRepeat | None
) -> tuple[Schedule, tzinfo]:
    try:
        zone = load_zone(timezone)
    except UnknownTimezoneError as error:
        raise click.BadParameter(str(error), param_hint="'--tz'") from None
    try:
        schedule = cron_schedule(
            expression, timezone, dst_gap=gap or DstGap.SHIFT, dst_repeat=repeat or DstRepeat.ONCE
        )
    except (CronSyntaxError, CronNeverFiresError) as error:
        raise click.BadParameter(str(error), param_hint="'--cron'") from None
    if (gap is not None or repeat is not None) and not schedule.fixed_time:
        to_stderr(
            "note: the minute or hour field starts with '*': a wildcard job follows real time, "
            "so --dst-gap and --dst-repeat change nothing"
        )
    return schedule, zone


def _from_job(
    name: str, start: datetime, gap: DstGap | None, repeat: DstRepeat | None
) -> tuple[Schedule, tzinfo]:
    spec = require_job(_catalog_with(name), name, "be previewed")
    schedule = spec.schedule(start)
    if isinstance(schedule, CronSchedule):
        to_stderr(
            f"{name}: daylight saving: dst_gap={schedule.dst_gap.value}, "
            f"dst_repeat={schedule.dst_repeat.value}"
            + ("" if schedule.fixed_time else " (no effect: a wildcard job follows real time)")
        )
        if gap is not None or repeat is not None:
            gap, repeat = gap or schedule.dst_gap, repeat or schedule.dst_repeat
            schedule = cron_schedule(
                schedule.expression, schedule.timezone, dst_gap=gap, dst_repeat=repeat
            )
            to_stderr(f"note: previewing dst_gap={gap.value}, dst_repeat={repeat.value} instead")
    if schedule is None:
        state = "enabled" if spec.enabled else "disabled"
        fail(f"job {name} ({state}) has no trigger: it never fires on its own", EXIT_FAILED)
    trigger = spec.trigger
    origin = " (from its override)" if trigger.source == "override" else ""
    to_stderr(f"{name}: {schedule.describe()}{origin}")
    if trigger.kind == "interval":
        to_stderr(f"note: the interval is counted from {iso_utc(start)} for this preview")
    if not spec.enabled:
        to_stderr(f"note: job {name} is disabled; it fires only when run by hand")
    return schedule, load_zone(trigger.timezone)


def _catalog_with(name: str) -> Catalog:
    """:func:`catalog_for`, or the built catalog where there is no store (a laptop)."""
    settings = settings_of()
    try:
        with opened_store(settings) as store:
            return catalog_for(settings, store, name)
    except (StoreMissingError, StoreUnavailableError, StoreError):
        return load_catalog(settings)


def _print_columns(instants: list[datetime], zone: tzinfo) -> None:
    rows = [(iso_utc(instant), _local(instant.astimezone(zone))) for instant in instants]
    width = max([len("UTC"), *(len(utc) for utc, _ in rows)]) + 3
    click.echo(f"{'UTC':<{width}}local ({zone})")
    for utc, local in rows:
        click.echo(f"{utc:<{width}}{local}")


def _skipped(instant: datetime, zone: tzinfo) -> str:
    # The skipped local time is the instant read with the offset from before the gap.
    before = (instant - timedelta(hours=12)).astimezone(zone).utcoffset() or timedelta(0)
    wall = (instant + before).replace(tzinfo=None)
    return f"{wall.isoformat()} {zone} (counted at {iso_utc(instant)})"


def _local(value: datetime) -> str:
    return f"{value.isoformat()} {value.tzname() or ''}".rstrip()
