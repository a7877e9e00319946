"""After "Trigger now": the page of the request, which leads to the run once a host starts it.

A trigger from the dashboard queues a manual run (as ``jobhost trigger --no-wait`` does) and
answers with ``/requests/ID``, ID being the run's. While no host has looked at it, that page
says so and looks again (the page script, or a reload without script); once started, or queued
for its concurrency group, it answers 303 to the run's page; refused, it says why.
"""

from __future__ import annotations

from typing import Any, Protocol

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from jobhost.records import RunRecord
from jobhost.store import Store
from jobhost.web.app import blocking

__all__ = ["REQUEST_ID_CHARS", "request_page"]

REQUEST_ID_CHARS = frozenset("0123456789abcdef")
_WAIT_SECONDS = 2


class _Site(Protocol):
    store: Store

    def page(
        self, request: Request, template: str, status: int = 200, **values: Any
    ) -> Response: ...


async def request_page(site: _Site, request: Request) -> Response:
    request_id = request.path_params["request_id"]
    if not 0 < len(request_id) <= 64 or not set(request_id) <= REQUEST_ID_CHARS:
        return site.page(request, "missing.html", status=404, what="such trigger request")
    found = await blocking(lambda: _read(site.store, request_id))
    if found is None:
        return site.page(request, "missing.html", status=404, what="such trigger request")
    status = found.request_status
    if status in {"started", "queued"}:
        return RedirectResponse(f"/runs/{found.id}", status_code=303)
    waiting = status != "refused"
    return site.page(
        request,
        "request.html",
        asked=found,
        waiting=waiting,
        live=_WAIT_SECONDS if waiting else 0,
    )


def _read(store: Store, request_id: str) -> RunRecord | None:
    return store.get_run(request_id)
