"""``jobhost next``: when a cron expression, or a job's effective trigger, fires next.

Every instant is shown in UTC and in the trigger's zone, so an operator can check daylight
saving before a job misfires in production.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, tzinfo

import click

from jobhost.catalog import build_catalog
from jobhost.cli._app import EXIT_FAILED, cli, config_path
from jobhost.cli._context import require_job
from jobhost.config import load_settings
from jobhost.triggers import (
    CronNeverFiresError,
    CronSyntaxError,
    Schedule,
    UnknownTimezoneError,
    cron_schedule,
    load_zone,
)

__all__ = ["next_occurrences", "parse_instant"]


def parse_instant(text: str) -> datetime:
    """An ISO-8601 instant (``2026-03-29T00:00:00Z``, an offset, or naive meaning UTC), in UTC."""
    value = datetime.fromisoformat(text.strip())
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.astimezone(UTC)


class _Instant(click.ParamType[datetime]):
    name = "ISO-8601"

    def convert(
        self, value: object, param: click.Parameter | None, ctx: click.Context | None
    ) -> datetime:
        if isinstance(value, datetime):
            return value
        try:
            return parse_instant(str(value))
        except ValueError:
            self.fail(
                f"{value!r} is not an ISO-8601 instant; write e.g. 2026-03-29T00:00:00Z, "
                "2026-03-29T02:00:00+02:00, or a time without offset meaning UTC",
                param,
                ctx,
            )


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
@click.option("--json", "as_json", is_flag=True, help="Print a JSON array of {utc, local}.")
@click.pass_context
def next_occurrences(
    ctx: click.Context,
    *,
    name: str | None,
    expression: str | None,
    timezone: str | None,
    after: datetime | None,
    count: int,
    as_json: bool,
) -> None:
    """Show when job NAME (its trigger after overrides) or --cron EXPR fires next.

    Exit status: 0 ok, 1 the job has no trigger, 2 an unknown job or an invalid expression or
    zone, 3 the job's declaration has problems (see `jobhost validate`).
    """
    if (name is None) == (expression is None):
        raise click.UsageError("give either a job NAME or --cron EXPR (exactly one)", ctx)
    if timezone is not None and expression is None:
        raise click.UsageError("--tz goes with --cron; a job's zone comes from its trigger", ctx)
    start = after if after is not None else datetime.now(UTC).replace(microsecond=0)
    if expression is not None:
        schedule, zone = _from_expression(ctx, expression, timezone or "UTC")
    else:
        assert name is not None
        schedule, zone = _from_job(ctx, name, start)
    instants = schedule.iter_after(start, count)
    if as_json:
        click.echo(json.dumps([_as_json(instant, zone) for instant in instants]))
    else:
        _print_columns(instants, zone)


def _from_expression(ctx: click.Context, expression: str, timezone: str) -> tuple[Schedule, tzinfo]:
    try:
        zone = load_zone(timezone)
    except UnknownTimezoneError as error:
        raise click.BadParameter(str(error), ctx, param_hint="'--tz'") from None
    try:
        schedule = cron_schedule(expression, timezone)
    except (CronSyntaxError, CronNeverFiresError) as error:
        raise click.BadParameter(str(error), ctx, param_hint="'--cron'") from None
    return schedule, zone


def _from_job(ctx: click.Context, name: str, start: datetime) -> tuple[Schedule, tzinfo]:
    catalog = build_catalog(load_settings(config_path(ctx)))
    spec = require_job(catalog, name, "be previewed")
    schedule = spec.schedule(start)
    if schedule is None:
        state = "enabled" if spec.enabled else "disabled"
        click.echo(f"job {name} ({state}) has no trigger: it never fires on its own", err=True)
        raise SystemExit(EXIT_FAILED)
    trigger = spec.trigger
    origin = " (from its override)" if trigger.source == "override" else ""
    click.echo(f"{name}: {schedule.describe()}{origin}", err=True)
    if trigger.kind == "interval":
        click.echo(f"note: the interval is counted from {_utc(start)} for this preview", err=True)
    if not spec.enabled:
        click.echo(f"note: job {name} is disabled; it fires only when run by hand", err=True)
    return schedule, load_zone(trigger.timezone)


def _as_json(instant: datetime, zone: tzinfo) -> dict[str, str]:
    return {"utc": _utc(instant), "local": instant.astimezone(zone).isoformat()}


def _utc(instant: datetime) -> str:
    return instant.astimezone(UTC).isoformat().replace("+00:00", "Z")


def _print_columns(instants: list[datetime], zone: tzinfo) -> None:
    rows = [(_utc(instant), _local(instant.astimezone(zone))) for instant in instants]
    width = max([len("UTC"), *(len(utc) for utc, _ in rows)]) + 3
    click.echo(f"{'UTC':<{width}}local ({zone})")
    for utc, local in rows:
        click.echo(f"{utc:<{width}}{local}")


def _local(value: datetime) -> str:
    return f"{value.isoformat()} {value.tzname() or ''}".rstrip()
