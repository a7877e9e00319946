"""The run id a command was given, as a whole id or a unique prefix (commands.md, "Run ids")."""

from __future__ import annotations

import click

from jobhost.cli._app import EXIT_USAGE
from jobhost.operations.runs import AmbiguousRunId, resolve_run_id
from jobhost.operations.timefmt import short_utc
from jobhost.store import Store

__all__ = ["typed_run_id"]


def typed_run_id(store: Store, typed: str) -> str:
    """The run ``typed`` names; an ambiguous prefix lists its runs and exits 2."""
    try:
        return resolve_run_id(store, typed)
    except AmbiguousRunId as ambiguous:
        lines = [f"jobhost: {ambiguous}; type more of it:"]
        lines += [
            f"  {c.id}  {c.job_name}  {c.outcome}  queued {short_utc(c.queued_at)}"
            for c in ambiguous.candidates
        ]
        if ambiguous.more:
            lines.append("  ... and more")
        click.echo("\n".join(lines), err=True)
        raise SystemExit(EXIT_USAGE) from None
