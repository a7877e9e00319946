"""What most commands need before they start: settings, the catalog, the store."""

from __future__ import annotations

from pathlib import Path

import click
from sqlalchemy import inspect, make_url
from sqlalchemy.engine import Engine
from sqlalchemy.exc import DBAPIError, OperationalError

from jobhost.catalog import Catalog, JobSpec, build_catalog
from jobhost.cli._app import EXIT_INVALID, config_path
from jobhost.config import Settings, load_settings, redact_text, redact_url
from jobhost.errors import StoreUnavailableError
from jobhost.store import create_store_engine, head_revision, is_current, upgrade

__all__ = [
    "load_catalog",
    "migrate_store",
    "open_store",
    "require_job",
    "settings_of",
    "with_stored_jobs",
]


def settings_of(ctx: click.Context) -> Settings:
    return load_settings(config_path(ctx))


def load_catalog(settings: Settings) -> Catalog:
    """The declared catalog joined with the store's runtime jobs (when the store has them)."""
    return with_stored_jobs(settings, build_catalog(settings))


def with_stored_jobs(settings: Settings, catalog: Catalog) -> Catalog:
    """``catalog`` with the runtime jobs of the configured store; as it is when the store is
    unreachable or not yet at a schema with runtime jobs (the command says so itself)."""
    from jobhost.runtime.loading import read_runtime_jobs, with_runtime_jobs
    from jobhost.store import reading

    url = make_url(settings.database_url)
    file = url.database if url.get_backend_name() == "sqlite" else None
    if file not in (None, "", ":memory:") and not Path(str(file)).exists():
        return catalog  # no store yet: nothing to join, and no file made by looking
    engine = create_store_engine(settings.database_url)
    try:
        with reading(engine) as connection:
            if not inspect(connection).has_table("runtime_jobs"):
                return catalog
            runtime = read_runtime_jobs(connection, catalog, settings.modules)
    except (OperationalError, DBAPIError):
        return catalog
    finally:
        engine.dispose()
    return with_runtime_jobs(catalog, runtime)


def require_job(catalog: Catalog, name: str, purpose: str) -> JobSpec:
    """Job ``name`` from the catalog, or exit: 3 when its declaration has problems, 2 when
    nobody declares it (with the closest names), and a note when other jobs have problems."""
    if name not in catalog.jobs and catalog.problems_for(name):
        for problem in catalog.problems_for(name):
            click.echo(problem.line(), err=True)
        click.echo(f"job {name} cannot {purpose} until these are fixed", err=True)
        raise SystemExit(EXIT_INVALID)
    spec = catalog.get(name)  # an unknown name raises UnknownJobError: exit 2, with suggestions
    if not catalog.ok:
        click.echo(
            f"note: the catalog has {len(catalog.problems)} problem(s); see jobhost validate",
            err=True,
        )
    return spec


def open_store(settings: Settings, *, require_current: bool = True) -> Engine:
    """An engine on the configured store; with ``require_current``, its schema must be current."""
    engine = create_store_engine(settings.database_url)
    if not require_current:
        return engine
    try:
        current = is_current(engine)
    except (OperationalError, DBAPIError) as error:
        engine.dispose()
        raise StoreUnavailableError(
            f"cannot reach the store at {redact_url(settings.database_url)}: "
            f"{redact_text(str(error.orig) if error.orig else str(error)).strip()}"
        ) from None
    if not current:
        engine.dispose()
        raise StoreUnavailableError(
            f"the store at {redact_url(settings.database_url)} is not at schema revision "
            f"{head_revision()}; run `jobhost db upgrade` (or start `jobhost run`, which applies "
            "migrations unless auto_migrate = false)"
        )
    return engine


def migrate_store(settings: Settings) -> tuple[str | None, str]:
    """Apply pending migrations; (revision before, revision after)."""
    engine = open_store(settings, require_current=False)
    try:
        return upgrade(engine)
    except (OperationalError, DBAPIError) as error:
        raise StoreUnavailableError(
            f"cannot migrate the store at {redact_url(settings.database_url)}: "
            f"{redact_text(str(error.orig or error)).strip()}"
        ) from None
    finally:
        engine.dispose()
