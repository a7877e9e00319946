"""``jobhost jobs list|show|put|delete``: runtime jobs from the command line; ``jobhost kinds``:
the job kinds the installed modules offer, with their settings.

The same path as ``/api/v1``: the same validation, the same change log (the actor is the OS
user), written to the store directly; running hosts see each change within a second.
"""

from __future__ import annotations

import getpass
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from jobhost.cli._app import EXIT_INVALID, cli, fail, to_stderr
from jobhost.cli._context import load_catalog, opened_store, settings_of
from jobhost.cli._options import change_reason, json_option, json_shown
from jobhost.operations.changes import printable
from jobhost.operations.jobs import declaration_json, kinds_json, stored_catalog

if TYPE_CHECKING:
    from collections.abc import Mapping

    from jobhost_contracts import JobKind

    from jobhost.runtime.service import JobService

__all__ = ["jobs", "kinds"]


@cli.group()
def jobs() -> None:
    pass


@jobs.command("list")
@json_option()
@click.option(
    "--source",
    type=click.Choice(["api", "declaration", "override"]),
    multiple=True,
    help="Only jobs from this source (repeatable).",
)
@click.option(
    "--check-catalog",
    is_flag=True,
    help="List this installation's catalog (loading its modules) instead of the store's.",
)
def list_jobs(as_json: bool, source: tuple[str, ...], check_catalog: bool) -> None:
    """List declared and runtime jobs: name, source, kind and trigger.

    JSON: {"jobs": [{"name", "source", "kind", "trigger", "enabled", "etag"}]}, where kind and
    etag are null for a declared job. The jobs are the store's (as the last sync wrote them;
    no module is loaded) unless --check-catalog asks for this installation's catalog.

    Exit status: 0; 1 when the store is unreachable.
    """
    from jobhost.runtime.service import etag_of
    from jobhost.web.api.views import source_of

    settings = settings_of()
    catalog = load_catalog(settings) if check_catalog else None
    with opened_store(settings) as store:
        if catalog is None:
            catalog = stored_catalog(settings, store)
        rows = {row.name: row for row in store.list_runtime_jobs().rows}
    found = []
    for name in sorted({*catalog.jobs, *rows}):
        spec = catalog.jobs.get(name)
        row = rows.get(name)
        found.append(
            {
                "name": name,
                "source": "api" if row is not None else source_of(name, catalog),
                "kind": row.kind if row is not None else None,
                "trigger": spec.trigger.describe() if spec is not None else "invalid",
                "enabled": spec.enabled if spec is not None else False,
                "etag": etag_of(row) if row is not None else None,
            }
        )
    found = [job for job in found if not source or job["source"] in source]
    if json_shown(as_json, {"jobs": found}):
        return
    for job in found:
        kind = f" kind {job['kind']}" if job["kind"] else ""
        state = "" if job["enabled"] else " (disabled)"
        click.echo(f"{job['name']:<40} {job['source']:<11}{kind} {job['trigger']}{state}")


@jobs.command("show")
@click.argument("name")
@json_option()
def show_job(name: str, as_json: bool) -> None:
    """Show job NAME's effective declaration as the store holds it; for a runtime job also its
    definition, ETag, and who created and last changed it.

    The declaration: module, source, description, critical, enabled, trigger (effective and
    declared), zone, daylight-saving policy, concurrency group and policies (misfire, overlap,
    timeout, lease, overdue grace, retries and backoff), read from the store: no module is
    loaded. JSON: {"name", "module", "source", "job_source", "description", "critical",
    "enabled", "trigger", "declared_trigger", "timezone", "dst_policy", "concurrency_group",
    "policies": {...}}; a runtime job's adds "kind", "definition", "etag", "version",
    "created_at", "created_by", "updated_at", "updated_by" (what GET /api/v1/jobs/NAME has
    under "runtime").

    Exit status: 0; 2 when the store holds no job NAME.
    """
    settings = settings_of()
    with opened_store(settings) as store:
        row = next(iter(store.list_runtime_jobs([name]).rows), None)
        spec = stored_catalog(settings, store, only=name).jobs.get(name)
    if row is None:
        if spec is None:
            # Only an unknown name imports the runtime job checks (and the plugin loader).
            from jobhost.runtime.service import not_found

            raise not_found(name)
        data = declaration_json(spec)
        if json_shown(as_json, data):
            return
        flags = " critical" if data["critical"] else ""
        state = "enabled" if data["enabled"] else "disabled"
        click.echo(f"{data['name']} (module {data['module']}, {data['source']}, {state}{flags})")
        if data["description"]:
            click.echo(f"  {printable(data['description'])}")
        click.echo(f"  trigger: {data['trigger']} (declared: {data['declared_trigger']})")
        click.echo(f"  daylight saving: {data['dst_policy']}")
        if data["concurrency_group"]:
            click.echo(f"  concurrency group: {data['concurrency_group']}")
        for key, value in data["policies"].items():
            shown = ", ".join(value) if isinstance(value, list) else value
            click.echo(f"  {key}: {'-' if shown is None else shown}")
        return
    # Only for a runtime job: the web package (Starlette and the API's routes) costs a declared
    # job's answer a third of its time.
    from jobhost.web.api.views import runtime_json

    data = runtime_json(row)
    if spec is not None:
        data = {**declaration_json(spec, runtime=True), **data}
    if json_shown(as_json, data):
        return
    click.echo(f"{name} (kind {row.kind}, ETag {data['etag']})")
    click.echo(f"  created {data['created_at']} by {row.created_by}")
    click.echo(f"  changed {data['updated_at']} by {row.updated_by}")
    click.echo("  " + json.dumps(row.definition, indent=2).replace("\n", "\n  "))


@jobs.command("put")
@click.argument("name")
@click.option(
    "--file", "file", type=click.Path(dir_okay=False), help="JSON definition; - is stdin."
)
@click.option("--kind", help="The job's kind (see jobhost kinds).")
@click.option("--cron", help="Cron expression, e.g. '*/5 * * * *'.")
@click.option("--interval", help="Interval, e.g. '90s', '6h'.")
@click.option("--timezone", help="IANA time zone of the cron expression.")
@click.option("--enabled/--disabled", "enabled", default=None, help="Enable or disable it.")
@click.option("--description", help="Shown by the report.")
@click.option(
    "--setting",
    "settings_",
    multiple=True,
    metavar="KEY=VALUE",
    help="One of the kind's settings; VALUE is JSON when it parses, text otherwise (repeatable).",
)
@click.option("--if-match", "if_match", metavar="ETAG", help="Change only if still at ETAG.")
@change_reason("new endpoint after the migration, INC-7")
@json_option("Print the stored job as JSON.")
def put_job(
    name: str,
    *,
    file: str | None,
    settings_: tuple[str, ...],
    if_match: str | None,
    reason: str,
    as_json: bool,
    **fields: Any,
) -> None:
    """Create or replace runtime job NAME, from --file and/or flags (flags win).

    Without --file the flags change the stored definition (or start an empty one): `jobhost
    jobs put hooks.ping --interval 5m` changes only the trigger. --cron or --interval replaces
    whichever trigger the job had.

    The definition is the body of PUT /api/v1/jobs/NAME: {"kind", "cron" | "interval",
    "timezone", "enabled", "description", "settings", and the policies}. Unknown fields are
    refused; every problem names its field. --reason goes in the change log (jobhost changes).

    Exit status: 0; 1 when NAME changed since --if-match or is a declared job; 2 without
    --reason; 3 when the definition is invalid.
    """
    from jobhost.runtime.service import JobService, invalid
    from jobhost.web.api.views import runtime_json
    from jobhost.web.middleware import json_problem

    settings = settings_of()
    with opened_store(settings) as store:
        service = JobService(settings, load_catalog(settings), store)
        body = _body(service, name, file, settings_, fields)
        if (problem := json_problem(body)) is not None:  # what the API refuses in its bodies
            raise invalid(name, [problem])
        done = service.put(name, body, actor=getpass.getuser(), if_match=if_match, reason=reason)
    if json_shown(as_json, runtime_json(done.row)):
        return
    what = "created" if done.created else "replaced" if done.changed else "unchanged"
    click.echo(f"{name}: {what} (ETag {done.etag})")


@jobs.command("delete")
@click.argument("name")
@click.option("--if-match", "if_match", metavar="ETAG", help="Remove only if still at ETAG.")
@change_reason("the endpoint is retired")
def delete_job(name: str, if_match: str | None, reason: str) -> None:
    """Remove runtime job NAME; its history stays, its schedule is kept as orphaned. --reason
    goes in the change log (jobhost changes).

    Exit status: 0; 1 when NAME is a declared job or changed since --if-match; 2 when there
    is no runtime job NAME, or without --reason.
    """
    from jobhost.runtime.service import JobService

    settings = settings_of()
    with opened_store(settings) as store:
        JobService(settings, load_catalog(settings), store).delete(
            name, actor=getpass.getuser(), if_match=if_match, reason=reason
        )
    click.echo(f"{name}: removed")


def _body(
    service: JobService, name: str, file: str | None, items: tuple[str, ...], flags: dict[str, Any]
) -> dict[str, Any]:
    """--file, or else the stored definition (to change a field or two); then the flags."""
    if file is not None:
        body = _read_file(file)
    else:
        row = service.runtime_row(name)
        body = dict(row.definition) if row is not None else {}
    given = {key: value for key, value in flags.items() if value is not None}
    if "cron" in given or "interval" in given:
        # A new trigger replaces the old one, whichever kind it was.
        body.pop("cron", None)
        body.pop("interval", None)
    body.update(given)
    if items:
        settings = dict(body.get("settings") or {})
        settings.update(_setting(item) for item in items)
        body["settings"] = settings
    return body


def _read_file(file: str) -> dict[str, Any]:
    try:
        text = sys.stdin.read() if file == "-" else Path(file).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise click.BadParameter(f"{file} cannot be read: {error}", param_hint="--file") from None
    try:
        value = json.loads(text, parse_constant=_not_json)
    except ValueError as error:
        raise click.BadParameter(f"{file} is not JSON: {error}", param_hint="--file") from None
    if not isinstance(value, dict):
        raise click.BadParameter(f"{file} must hold one JSON object", param_hint="--file")
    return value


def _setting(item: str) -> tuple[str, Any]:
    key, sep, raw = item.partition("=")
    if not sep or not key:
        raise click.BadParameter(f"{item!r}: write KEY=VALUE", param_hint="--setting")
    try:
        return key, json.loads(raw, parse_constant=_not_json)
    except ValueError:
        return key, raw


def _not_json(name: str) -> None:
    # Python's json reads NaN and Infinity, which JSON has not; the API refuses them too.
    raise ValueError(f"{name} is not a JSON value; write a number or null")


@cli.command()
@json_option("Print one JSON object with the schemas.")
def kinds(as_json: bool) -> None:
    """Text: each kind's name, module and description, then its settings (name, type, required,
    description). JSON: {"kinds": [{"name", "description", "module", "settings_schema",
    "examples"}]}, where settings_schema is the JSON schema GET /api/v1/kinds publishes.

    Exit status: 0; 3 when the configuration is invalid, or a plugin does not load or answers
    a hook wrongly (each problem is printed; the kinds that did load are listed still).
    """
    from jobhost.catalog import build_catalog

    catalog = build_catalog(settings_of())
    broken = [p for p in catalog.problems if p.code.startswith("plugin-")]
    try:
        _show_kinds(catalog.kinds, as_json)
    finally:
        for problem in broken:
            to_stderr(f"jobhost: {problem.line()}")
    if broken:
        fail(
            f"jobhost: {len(broken)} plugin problem(s); the kinds of a broken plugin are "
            "missing above. Fix them (jobhost validate lists every problem)",
            EXIT_INVALID,
        )


def _show_kinds(kinds: Mapping[str, JobKind], as_json: bool) -> None:
    data = kinds_json(kinds)
    if json_shown(as_json, data):
        return
    if not kinds:
        click.echo("no job kinds: no installed module offers one")
    for kind in data["kinds"]:
        click.echo(f"{kind['name']} (module {kind['module']}): {kind['description']}")
        schema = kind["settings_schema"]
        required = set(schema.get("required", ()))
        for key, field in dict(schema.get("properties", {})).items():
            mark = "required" if key in required else "optional"
            text = field.get("description", "") if isinstance(field, dict) else ""
            click.echo(f"  {key:<16} {_type(field):<16} {mark:<9} {text}")


def _type(field: Any) -> str:
    if not isinstance(field, dict):
        return "any"
    if "type" in field:
        return str(field["type"])
    options = [str(o.get("type", "?")) for o in field.get("anyOf", []) if isinstance(o, dict)]
    return " | ".join(options) or "any"
