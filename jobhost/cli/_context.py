"""What most commands need before they start: settings, the catalog, the store."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import NoReturn

import click

from jobhost.catalog.model import Catalog, JobSpec
from jobhost.cli._app import EXIT_INVALID, fail, to_stderr
from jobhost.clock import SystemClock
from jobhost.config import CONFIG_ENV, Settings, load_settings, redact_text, redact_url
from jobhost.errors import (
    JobhostError,
    StoreMissingError,
    StoreReadOnlyError,
    StoreUnavailableError,
)
from jobhost.store import Store, StoreError, check_not_newer, head_revision
from jobhost.store.engine import sqlite_path
from jobhost.store.postgres import startup_refused

__all__ = [
    "catalog_for",
    "check_current",
    "check_store",
    "current_revision",
    "load_catalog",
    "migrate_store",
    "open_store",
    "opened_store",
    "refuse_invalid",
    "require_job",
    "settings_of",
    "with_stored_jobs",
]


def settings_of() -> Settings:
    """The settings, from the ``--config`` given to the group (or its environment)."""
    config_path: str | None = click.get_current_context().find_root().obj["config_path"]
    return load_settings(config_path)


def load_catalog(settings: Settings, store: Store | None = None) -> Catalog:
    """The declared catalog joined with the store's runtime jobs (when the store has them);
    read through ``store`` when given, else through a store of its own."""
    from jobhost.catalog.build import build_catalog

    return with_stored_jobs(settings, build_catalog(settings), store)


def catalog_for(settings: Settings, store: Store, name: str) -> Catalog:
    """The store's catalog of job ``name`` when the store holds it: no plugin is loaded. A job
    no host has synced yet (or a name nobody knows) needs the built catalog, as before."""
    from jobhost.operations.jobs import stored_catalog

    stored = stored_catalog(settings, store, only=name)
    return stored if name in stored.jobs else load_catalog(settings)


def with_stored_jobs(settings: Settings, catalog: Catalog, store: Store | None = None) -> Catalog:
    """``catalog`` with the runtime jobs of the configured store; as it is when the store is
    unreachable or not yet at a schema with runtime jobs (the command says so itself)."""
    from jobhost.runtime.reload import with_runtime_jobs

    path = sqlite_path(settings.database_url)
    if path is not None and not path.exists():
        return catalog  # no store yet: nothing to join, and no file made by looking
    reader = store or Store.open(settings.database_url, **settings.store_options())
    try:
        rows = reader.list_runtime_jobs().rows
    except StoreError:  # a schema without runtime jobs too
        return catalog
    finally:
        if store is None:
            reader.dispose()
    return with_runtime_jobs(rows, catalog, settings)


def require_job(catalog: Catalog, name: str, purpose: str) -> JobSpec:
    """Job ``name`` from the catalog, or exit: 3 when its declaration has problems, 2 when
    nobody declares it (with the closest names), and a note when other jobs have problems."""
    if name not in catalog.jobs and (problems := catalog.problems_for(name)):
        lines = [p.line() for p in problems]
        fail(
            "\n".join([*lines, f"job {name} cannot {purpose} until these are fixed"]), EXIT_INVALID
        )
    spec = catalog.get(name)  # an unknown name raises UnknownJobError: exit 2, with suggestions
    if not catalog.ok:
        to_stderr(f"note: the catalog has {len(catalog.problems)} problem(s); see jobhost validate")
    return spec


def refuse_invalid(catalog: Catalog, headline: str) -> NoReturn:
    """Exit 3 with ``headline`` and each of the catalog's problems on stderr."""
    lines = [f"  {problem.line()}" for problem in catalog.problems]
    fail("\n".join([headline, *lines]), EXIT_INVALID)


def open_store(
    settings: Settings,
    *,
    require_current: bool = True,
    create: bool = False,
    write: bool = False,
    missing_ok: bool = False,
    pre_ping: bool = True,
    shortest_lease: timedelta | None = None,
) -> Store:
    """The configured store, at the current schema unless not ``require_current``.

    Without ``create`` (``run``, ``db upgrade``) a missing SQLite file is refused, not made: a
    command run in the wrong directory must not work on a new, empty store; with ``missing_ok``
    (``health`` reports it) only the default one is. ``write`` refuses a read-only store up
    front. Without ``pre_ping`` (the host, whose every turn would pay a round trip for it) a
    connection the server dropped fails its first statement, which the host retries.
    ``shortest_lease`` bounds how long the server lets a transaction sit idle.
    """
    if not create:
        _refuse_missing_file(settings, configured_ok=missing_ok)
    options = {} if pre_ping else {"pool_pre_ping": False}
    store = Store.open(
        settings.database_url,
        SystemClock(settings.clock_offset),
        create=create,
        **settings.store_options(shortest_lease),
        **options,
    )
    try:
        check_store(settings, store, write=write, check_pooler=False)
        if require_current:
            check_current(settings, store)
    except BaseException:
        store.dispose()
        raise
    return store


@contextmanager
def opened_store(
    settings: Settings,
    *,
    require_current: bool = True,
    write: bool = False,
    missing_ok: bool = False,
) -> Iterator[Store]:
    """The configured store (see :func:`open_store`), disposed of when the block ends."""
    store = open_store(
        settings, require_current=require_current, write=write, missing_ok=missing_ok
    )
    try:
        yield store
    finally:
        store.dispose()


def migrate_store(
    settings: Settings, *, create: bool = False, store: Store | None = None
) -> tuple[str | None, str]:
    """Apply pending migrations, through ``store`` when given; (revision before, revision
    after). Behind a transaction pooler the settings do not name, the store's options (its
    schema among them) would be lost: nothing is migrated."""
    target = store or open_store(settings, require_current=False, create=create)
    try:
        check_store(settings, target, write=True, check_pooler=True)
        return target.upgrade()
    except StoreError as error:
        raise _unreachable(settings, "cannot migrate", error) from None
    finally:
        if store is None:
            target.dispose()


def check_store(settings: Settings, store: Store, *, write: bool, check_pooler: bool) -> None:
    """With ``write``, refuse a store this process may only read; with ``check_pooler`` (the
    host, the migration), a transaction pooler the settings do not name."""
    if write and store.is_read_only:
        raise StoreReadOnlyError(
            f"the store file {sqlite_path(settings.database_url)} (or its directory, where SQLite "
            "keeps its write-ahead log) is read-only for this user; this command writes to the "
            "store: run it as the store's owner or make the file and its directory writable "
            "(report and history work on a read-only store)"
        )
    if check_pooler:
        try:
            store.check_pooling()
        except StoreError as error:
            raise _unreachable(settings, "cannot reach", error) from None


def check_current(settings: Settings, store: Store) -> None:
    """Refuse a store that is unreachable or not at the current schema."""
    if current_revision(settings, store) != head_revision():
        raise StoreUnavailableError(
            f"the store at {redact_url(settings.database_url)} is not at schema revision "
            f"{head_revision()}; run `jobhost db upgrade` (or start `jobhost run`, which applies "
            "migrations unless auto_migrate = false)"
        )


def current_revision(settings: Settings, store: Store) -> str | None:
    """The store's schema revision; :class:`StoreUnavailableError` when it cannot be read, and
    exit 3 (upgrade jobhost) when it is newer than this version's."""
    try:
        current = store.current_revision()
    except StoreError as error:
        raise _unreachable(settings, "cannot reach", error) from None
    check_not_newer(current)
    return current


def _unreachable(settings: Settings, what: str, error: StoreError) -> JobhostError:
    """What to say when the store refused or failed a command's first statement: a pooler
    that refuses the store's startup options is named as such, in one line."""
    path = sqlite_path(settings.database_url)
    if path is not None and not path.parent.is_dir():  # SQLite says only "unable to open"
        missing = f"its directory {path.parent} does not exist; create it, or fix database_url"
        return StoreUnavailableError(f"{what} the store at {path}: {missing}")
    return startup_refused(error) or StoreUnavailableError(
        f"{what} the store at {redact_url(settings.database_url)}: "
        f"{redact_text(str(error.orig) if error.orig else str(error)).strip()}"
    )


def _refuse_missing_file(settings: Settings, *, configured_ok: bool) -> None:
    path = sqlite_path(settings.database_url)
    if path is None or path.exists():
        return
    chosen = "database_url" in settings.model_fields_set
    if chosen and configured_ok:
        return
    if chosen:
        why = "database_url names a file that does not exist; fix database_url"
    else:
        because = f"no configuration was given (no --config, {CONFIG_ENV} or JOBHOST_DATABASE_URL)"
        if settings.file_read is not None:
            because = f"{settings.file_read} sets no database_url (nor JOBHOST_DATABASE_URL)"
        why = (
            f"that is the default store, used because {because}; point this command at your store "
            f"with --config PATH or {CONFIG_ENV}=PATH (a jobhost.toml with database_url), or "
            "JOBHOST_DATABASE_URL=URL"
        )
    raise StoreMissingError(
        f"no store at {path}: {why}. Only `jobhost run` and `jobhost db upgrade` create a new store"
    )
