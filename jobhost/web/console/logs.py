"""The dashboard's two logs across every job: ``/changes`` (the whole change log, newest first,
searched by who, what, job or module and since when, a page at a time) and ``/backfills``
(the newest backfills of every job, or of one, with their progress).

The query string is each page's whole state, so a link to a search is the search."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from urllib.parse import urlencode

from jobhost.clock import Clock
from jobhost.operations.failures import BadFailureQuery, parse_since
from jobhost.records import BackfillRecord, ChangeSearch, JobChange
from jobhost.store import Store

__all__ = [
    "BACKFILLS_SHOWN",
    "CHANGES_PAGE",
    "BackfillsView",
    "ChangesView",
    "backfills_view",
    "changes_view",
]

CHANGES_PAGE = 50
"""Changes on one page."""
BACKFILLS_SHOWN = 200
"""The newest backfills shown; older ones are a ``jobhost backfill`` or API read away."""
_FIELD = 200


@dataclass(frozen=True)
class ChangesView:
    actor: str
    action: str
    job: str
    module: str
    since: str
    now: datetime
    changes: list[JobChange] = field(default_factory=list)
    older: str | None = None
    """The link to the next page, older changes, when there are any."""
    problem: str | None = None
    """Why the filters could not be read (the list is then empty and the answer 400)."""
    paged: bool = False
    """Whether this is an older page than the newest."""

    @property
    def filtered(self) -> bool:
        return bool(self.actor or self.action or self.job or self.module or self.since)

    @property
    def newest(self) -> str:
        """The link to the newest page of the same search."""
        kept = {
            "actor": self.actor,
            "action": self.action,
            "job": self.job,
            "module": self.module,
            "since": self.since,
        }
        return "/changes?" + urlencode({k: v for k, v in kept.items() if v})


@dataclass(frozen=True)
class BackfillsView:
    job: str
    now: datetime
    backfills: list[BackfillRecord] = field(default_factory=list)

    @property
    def full(self) -> bool:
        return len(self.backfills) >= BACKFILLS_SHOWN


def changes_view(store: Store, params: Mapping[str, str], clock: Clock | None) -> ChangesView:
    values = {
        name: params.get(name, "").strip()[:_FIELD]
        for name in ("actor", "action", "job", "module", "since")
    }
    before = _positive(params.get("before"))
    now = store.now()
    found = _search(store, now, values, before)
    if isinstance(found, str):
        return _changes(values, now, [], None, found, paged=before is not None)
    shown = found[:CHANGES_PAGE]
    older = None
    if len(found) > CHANGES_PAGE:
        kept = {k: v for k, v in values.items() if v}
        older = "/changes?" + urlencode({**kept, "before": shown[-1].id})
    return _changes(values, now, shown, older, None, paged=before is not None)


def _changes(
    values: dict[str, str],
    now: datetime,
    shown: list[JobChange],
    older: str | None,
    problem: str | None,
    *,
    paged: bool,
) -> ChangesView:
    return ChangesView(
        actor=values["actor"],
        action=values["action"],
        job=values["job"],
        module=values["module"],
        since=values["since"],
        now=now,
        changes=shown,
        older=older,
        problem=problem,
        paged=paged,
    )


def _search(
    store: Store, now: datetime, values: dict[str, str], before: int | None
) -> list[JobChange] | str:
    """The changes that match, or why the filters cannot be read."""
    since = None
    if values["since"]:
        try:
            since = parse_since(values["since"], now)
        except BadFailureQuery as problem:
            return str(problem)
    search = ChangeSearch(
        actor=values["actor"],
        action=values["action"],
        job=values["job"],
        module=values["module"],
        since=since,
        before_id=before,
    )
    # One more than a page: whether an older page exists, without counting the log.
    return store.search_changes(search, CHANGES_PAGE + 1)


def backfills_view(store: Store, params: Mapping[str, str], clock: Clock | None) -> BackfillsView:
    job = params.get("job", "").strip()[:_FIELD]
    now = store.now()
    found = store.list_backfills(job=job or None, limit=BACKFILLS_SHOWN)
    return BackfillsView(job=job, now=now, backfills=found)


def _positive(value: str | None) -> int | None:
    try:
        number = int(value) if value else None
    except ValueError:
        return None
    return number if number is not None and 0 < number < 2**62 else None
