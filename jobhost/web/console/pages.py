"""The dashboard: server-rendered pages over the store, and the actions people may take.

Pages that show data pass ``live`` (seconds) for the page script (static/console.js).

Every instant is a ``<time datetime="2026-05-04T10:00:00Z">`` whose text reads without script
(UTC, or the job's zone where the page says so); the script rewrites it in the zone the person
picked (a job's own from ``data-zone``), keeps a log line's (``class="ms"``) milliseconds, and
leaves ``class="fixed"`` (a text labelled with its zone) as it is.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any
from urllib.parse import quote

from jinja2 import Environment, PackageLoader, select_autoescape
from markupsafe import Markup, escape
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from jobhost.catalog import Catalog
from jobhost.config import Settings
from jobhost.operations.changes import change_origin
from jobhost.operations.report import (
    SORTS,
    STATUSES,
    JobFilter,
    Overview,
    Report,
    Sort,
    overview_page,
    read_summary,
)
from jobhost.operations.runs import RETRYABLE, dropped_text, line_time
from jobhost.operations.timefmt import duration_text, iso_utc, short_local, short_utc
from jobhost.store import Store
from jobhost.web.access import GuessBrake, api_secret, client_address, read_tokens
from jobhost.web.console.actions import (
    BULK_NOTICES,
    NOTICES,
    RUN_NOTICES,
    ConsoleActions,
    retry_notice,
)
from jobhost.web.console.auth import BadForm, Session, SessionKeeper, read_form, same_origin
from jobhost.web.console.views import (
    CHART_ORDER,
    CHART_SECONDS,
    OUTCOME_ORDER,
    RANGE_NAMES,
    RANGES,
    Chart,
    ShortCache,
    changes_view,
    failures_view,
    job_query,
    job_view,
    number,
    query_link,
    run_view,
)
from jobhost.web.middleware import blocking

__all__ = ["Console", "ago_tag", "fixed_tag", "local_tag", "stamp_tag", "utc_tag"]

_log = logging.getLogger("jobhost.console")
_PAGE_SIZE = 50
_LIVE_SECONDS = 5
"""How often an open page asks for its data again (slower when answers are slow)."""
_TAIL_SECONDS = 2
# The run log's line numbers are an INTEGER column: PostgreSQL refuses a larger bound.
_MAX_LINE = 2**31 - 1
_MAX_PAGE = 10**6
_BACKFILLS_SHOWN = 200
"""The newest backfills shown; older ones are a ``jobhost backfill`` or API read away."""
_COMPACT = 200
_Page = Callable[[Request], Awaitable[Response]]
_HEADERS = {
    # Inline style attributes place the timeline's axis labels; no inline script is allowed.
    "Content-Security-Policy": "default-src 'self'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; "
    "frame-ancestors 'none'; form-action 'self'; base-uri 'none'",
    "Referrer-Policy": "same-origin",
    "X-Frame-Options": "DENY",
}


class Console(ConsoleActions):
    def __init__(
        self,
        settings: Settings,
        catalog: Catalog,
        store: Store,
        *,
        allow_actions: bool,
        brake: GuessBrake | None = None,
        overview_seconds: float = 3.0,
    ) -> None:
        self.settings = settings
        self.catalog = catalog
        self.store = store
        self.read_needs_session = settings.web_read_access == "token"
        secret = settings.session_secret
        self.sessions = SessionKeeper(
            settings.operator_tokens,
            read_tokens(settings) if self.read_needs_session else None,
            secret.get_secret_value() if secret is not None else None,
        )
        self.actions_on = (
            allow_actions and settings.console_actions and bool(settings.operator_tokens)
        )
        self.signin_on = self.actions_on or self.read_needs_session
        self.brake = brake or GuessBrake(self.store)
        self._templates = Environment(
            loader=PackageLoader("jobhost.web", "templates"),
            autoescape=select_autoescape(default=True),
            trim_blocks=True,
            lstrip_blocks=True,
        )
        self._templates.filters.update(
            quote=lambda value: quote(str(value), safe=""),
            utc=utc_tag,
            utc_text=short_utc,
            local=local_tag,
            zoned=fixed_tag,
            stamp=stamp_tag,
            dropped=dropped_text,
            took=lambda ms: duration_text(ms / 1000) if ms is not None else "-",
            ago=ago_tag,
            compact=_compact,
            iso=iso_utc,
            change_origin=change_origin,
        )
        self._charts: ShortCache[Chart] = ShortCache(CHART_SECONDS, entries=len(RANGES))
        self._summaries: ShortCache[Report] = ShortCache(overview_seconds, entries=1)
        self._pages: ShortCache[Overview] = ShortCache(overview_seconds, entries=64)

    def routes(self) -> list[BaseRoute]:
        reading, acting = self._reading, self._acting
        return [
            Route("/", reading(self.overview), methods=["GET"]),
            Route("/jobs/{name}", reading(self.job), methods=["GET"]),
            Route("/jobs/{name}/{action}", acting(self.job_action), methods=["POST"]),
            Route("/runs/{run_id}", reading(self.run), methods=["GET"]),
            Route("/runs/{run_id}/cancel", reading(self.cancel_form), methods=["GET"]),
            Route("/runs/{run_id}/{action}", acting(self.run_action), methods=["POST"]),
            Route("/modules/{module}/{action}", acting(self.module_action), methods=["POST"]),
            Route("/requests/{request_id}", reading(self.request_page), methods=["GET"]),
            Route("/hosts", reading(self.hosts), methods=["GET"]),
            Route("/failures", reading(self.failures), methods=["GET"]),
            Route("/failures/retry", acting(self.retry_failures), methods=["POST"]),
            Route("/changes", reading(self.changes), methods=["GET"]),
            Route("/backfills", reading(self.backfills), methods=["GET"]),
            Route("/signin", acting(self.signin_form), methods=["GET"]),
            Route("/signin", acting(self.signin), methods=["POST"]),
            Route("/signout", acting(self.signout), methods=["POST"]),
            Mount("/static", StaticFiles(packages=[("jobhost.web", "static")]), name="static"),
        ]

    async def overview(self, request: Request) -> Response:
        params = request.query_params
        search = params.get("q", "")[:200]
        module = params.get("module", "")[:200]
        states = [s for s in params.getlist("state") if s in STATUSES]
        sort: Sort = next((known for known in SORTS if known == params.get("sort")), "name")
        which = JobFilter(
            search=search, modules=[module] if module else (), statuses=states, sort=sort
        )
        wanted = number(params.get("page"), 1, 1, _MAX_PAGE)
        summary, shown = await blocking(lambda: self._overview(which, wanted))
        kept = {"q": search, "module": module, "state": states, "sort": sort}
        return self.page(
            request,
            "overview.html",
            report=summary,
            jobs=shown.jobs,
            matched=shown.matched,
            page=shown.page,
            pages=shown.pages,
            link=lambda **change: query_link({**kept, **change}),
            search=search,
            module=module,
            states=states,
            sort=sort,
            sorts=SORTS,
            statuses=STATUSES,
            modules=sorted({job.module for job in summary.jobs}),
            live=_LIVE_SECONDS,
            bulk_done=BULK_NOTICES.get(params.get("done", "")),
        )

    def _overview(self, which: JobFilter, page: int) -> tuple[Report, Overview]:
        """Each kept a few seconds: viewers polling the overview share one read."""
        summary = self._summaries.get(
            "summary", lambda: read_summary(self.settings, self.catalog, self.store)
        )
        key = (which.search, tuple(which.modules), tuple(which.statuses), which.sort, page)
        shown = self._pages.get(
            (summary.generated_at, key),
            lambda: overview_page(self.store, summary, which, page, _PAGE_SIZE),
        )
        return summary, shown

    async def job(self, request: Request) -> Response:
        name = request.path_params["name"]
        query = job_query(request.query_params)
        view = await blocking(
            lambda: job_view(self.settings, self.catalog, self.store, name, query)
        )
        if view is None:
            return self.page(request, "missing.html", status=404, what=f"job {name}")
        return self.page(
            request,
            "job.html",
            view=view,
            job=view.job,
            outcomes=OUTCOME_ORDER,
            **query.template_values(),
            done=NOTICES.get(request.query_params.get("done", "")),
            page_zone=view.job.effective_trigger.timezone,
            live=_LIVE_SECONDS,
        )

    async def run(self, request: Request) -> Response:
        run_id = request.path_params["run_id"]
        after = number(request.query_params.get("after"), 0, 0, _MAX_LINE)
        view = await blocking(lambda: run_view(self.store, self.catalog, run_id, after=after))
        if view is None:
            return self.page(request, "missing.html", status=404, what=f"run {run_id}")
        return self.page(
            request,
            "run.html",
            view=view,
            run=view.run,
            page_zone=view.zone,
            live=_TAIL_SECONDS if view.running else 0,
            retryable=RETRYABLE,
            done=RUN_NOTICES.get(request.query_params.get("done", "")),
        )

    async def cancel_form(self, request: Request) -> Response:
        run_id = request.path_params["run_id"]
        view = await blocking(lambda: run_view(self.store, self.catalog, run_id))
        if view is None:
            return self.page(request, "missing.html", status=404, what=f"run {run_id}")
        return self.page(request, "run_cancel.html", run=view.run)

    async def failures(self, request: Request) -> Response:
        view = await blocking(lambda: failures_view(self.store, request.query_params, self._charts))
        return self.page(
            request,
            "failures.html",
            status=400 if view.problem else 200,
            view=view,
            ranges=list(RANGES),
            span_name=RANGE_NAMES[view.span],
            chart_outcomes=CHART_ORDER,
            done=retry_notice(request.query_params),
            # Only the newest page changes as runs fail; an older one stays as it is.
            live=_LIVE_SECONDS if not view.cursor else 0,
        )

    async def changes(self, request: Request) -> Response:
        view = await blocking(lambda: changes_view(self.store, request.query_params))
        return self.page(request, "changes.html", status=400 if view.problem else 200, view=view)

    async def backfills(self, request: Request) -> Response:
        job, store = request.query_params.get("job", "").strip()[:200], self.store
        now, found = await blocking(
            lambda: (store.now(), store.list_backfills(job=job or None, limit=_BACKFILLS_SHOWN))
        )
        full = len(found) >= _BACKFILLS_SHOWN
        values: dict[str, Any] = {"job": job, "now": now, "backfills": found, "full": full}
        return self.page(request, "backfills.html", **values, live=_LIVE_SECONDS)

    async def hosts(self, request: Request) -> Response:
        now, rows = await blocking(lambda: self.store.health_rows(hosts="all"))
        ordered = sorted(rows.hosts, key=lambda host: host.last_seen_at, reverse=True)
        return self.page(request, "hosts.html", now=now, hosts=ordered, live=_LIVE_SECONDS)

    async def signin_form(self, request: Request) -> Response:
        return self.page(request, "signin.html", error=None)

    async def signin(self, request: Request) -> Response:
        if not same_origin(request):
            return self.refuse(request, "a sign-in from another site is refused")
        if not self.signin_on:
            return self.refuse(request, self.actions_off_reason())
        client = client_address(request)
        try:
            form = await read_form(request)
        except BadForm as error:
            return self.refuse(request, str(error), error.status)
        found = self.sessions.identify(token := form.get("token", ""))
        if found is None and api_secret(token, self.settings):
            why = "that API token lacks the read scope, which signing in needs"
            return self.page(request, "signin.html", status=403, error=why)
        if found is None:
            if (wait := await self.brake.refused(client, "signin")) is not None:
                refused = self.refuse(request, f"too many wrong tokens; try again in {wait}s", 429)
                refused.headers["Retry-After"] = str(wait)
                return refused
            _log.warning("dashboard sign-in refused from %s: unknown token", client)
            return self.page(request, "signin.html", status=403, error="that token is not known")
        who, role = found
        version = await blocking(lambda: self.store.session_version(who))
        response = RedirectResponse("/", status_code=303)
        secure = request.url.scheme == "https"
        self.sessions.start(response, who, secure=secure, role=role, version=version)
        _log.info("dashboard sign-in: %s (%s) from %s", who, role, client)
        return _secured(response)

    async def signout(self, request: Request) -> Response:
        """Ends every session of the person signed in, on every replica."""
        if not same_origin(request):
            return self.refuse(request, "a sign-out from another site is refused")
        session: Session | None = request.state.session
        if session is not None:
            ended = datetime.now(UTC)
            await blocking(lambda: self.store.session_version(session.who, ended_at=ended))
            _log.info("dashboard sign-out: %s from %s", session.who, client_address(request))
        response = RedirectResponse("/", status_code=303)
        self.sessions.end(response)
        return _secured(response)

    def _reading(self, handler: _Page) -> _Page:
        async def endpoint(request: Request) -> Response:
            request.state.session = await self._session(request)
            if self.read_needs_session and request.state.session is None:
                return self.page(request, "signin.html", status=401, error=None)
            return await handler(request)

        return endpoint

    def _acting(self, handler: _Page) -> _Page:
        async def endpoint(request: Request) -> Response:
            request.state.session = await self._session(request)
            try:
                return await handler(request)
            finally:
                # What an action changed shows on the next overview, not a few seconds later.
                self._summaries.clear()
                self._pages.clear()

        return endpoint

    async def _session(self, request: Request) -> Session | None:
        session = self.sessions.read(request)
        if session is None:
            return None
        version = await blocking(lambda: self.store.session_version(session.who))
        return session if version == session.version else None

    def page(self, request: Request, template: str, status: int = 200, **values: Any) -> Response:
        session = getattr(request.state, "session", None)
        html = self._templates.get_template(template).render(
            session=session,
            actions_on=self.actions_on,
            signin_on=self.signin_on,
            read_needs_session=self.read_needs_session,
            **values,
        )
        return _secured(HTMLResponse(html, status_code=status))


def utc_tag(at: datetime | None) -> Markup:
    return _tag(at, short_utc)


def local_tag(at: datetime | None, zone: str, kind: str = "") -> Markup:
    """``kind="fixed"``: in ``zone`` whatever zone is picked (a column labelled with that zone)."""
    return _tag(at, lambda at: short_local(at, zone), zone=zone, kind=kind)


fixed_tag = partial(local_tag, kind="fixed")


def ago_tag(at: datetime | None, now: datetime) -> Markup:
    """How long ago, the time on hover; 0ms after ``now`` (a run started after the read)."""
    return _tag(at, lambda at: duration_text(max(now - at, timedelta(0))), kind="ago", title=True)


def stamp_tag(at: datetime) -> Markup:
    text = line_time(at)
    return Markup(f'<time datetime="{escape(text)}" class="ms">{escape(text)}</time>')


def _tag(
    at: datetime | None,
    text: Callable[[datetime], str],
    *,
    zone: str | None = None,
    kind: str = "",
    title: bool = False,
) -> Markup:
    if at is None:
        return Markup("-")
    attributes = f' datetime="{escape(iso_utc(at))}"'
    if kind:
        attributes += f' class="{kind}"'
    if zone is not None:
        attributes += f' data-zone="{escape(zone)}"'
    if title:
        attributes += f' title="{escape(short_utc(at))}"'
    return Markup(f"<time{attributes}>{escape(text(at))}</time>")


def _secured(response: Response) -> Response:
    response.headers.update(_HEADERS)
    return response


def _compact(value: Any) -> str:
    """A change's ``after`` on one line, cut short: the page escapes it like any text."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
    return text if len(text) <= _COMPACT else text[: _COMPACT - 1] + "…"
