"""``jobhost kinds``: the job kinds the installed modules offer, with their settings."""

from __future__ import annotations

import json
from typing import Any

import click
from jobhost_contracts import JobKind

from jobhost.catalog import build_catalog
from jobhost.cli._app import EXIT_INVALID, cli
from jobhost.cli._context import settings_of

__all__ = ["kinds"]


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object with the schemas.")
@click.pass_context
def kinds(ctx: click.Context, as_json: bool) -> None:
    """List the job kinds runtime jobs can have, with each kind's settings.

    Text: each kind's name, module and description, then its settings (name, type, required,
    description). JSON: {"kinds": [{"name", "description", "module", "settings_schema",
    "examples"}]}, where settings_schema is the JSON schema GET /api/v1/kinds publishes.

    Exit status: 0; 3 when the configuration is invalid, or a plugin does not load or answers
    a hook wrongly (each problem is printed; the kinds that did load are listed still).
    """
    catalog = build_catalog(settings_of(ctx))
    found = [catalog.kinds[name] for name in sorted(catalog.kinds)]
    broken = [p for p in catalog.problems if p.code.startswith("plugin-")]
    try:
        _show(found, as_json)
    finally:
        for problem in broken:
            click.echo(f"jobhost: {problem.line()}", err=True)
    if broken:
        click.echo(
            f"jobhost: {len(broken)} plugin problem(s); the kinds of a broken plugin are "
            "missing above. Fix them (jobhost validate lists every problem)",
            err=True,
        )
        raise SystemExit(EXIT_INVALID)


def _show(found: list[JobKind], as_json: bool) -> None:
    if as_json:
        data = {
            "kinds": [
                {
                    "name": kind.name,
                    "description": kind.description,
                    "module": kind.module,
                    "settings_schema": dict(kind.settings_schema),
                    "examples": [dict(e) for e in kind.examples],
                }
                for kind in found
            ]
        }
        click.echo(json.dumps(data, indent=2))
        return
    if not found:
        click.echo("no job kinds: no installed module offers one")
    for kind in found:
        click.echo(f"{kind.name} (module {kind.module}): {kind.description}")
        schema = kind.settings_schema
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
