"""A trigger through the API that the overlap policy refuses answers 409 naming the running run,
on both stores: the real claim path refuses the request, the API reports it."""

from __future__ import annotations

import hashlib
import threading
from datetime import UTC, datetime
from typing import Any

from jobhost.config import ApiToken
from jobhost.web import WebServer, create_app, store_endpoints
from jobhost.web.api.routes import api_routes
from tests.api.api_support import Answer, call
from tests.support import ManualClock
from tests.waiting import wait_for

SECRET = "overlap-secret-0123456789abcdef"
EVERY_MINUTE = {"name": "sample.minutely", "cron": "* * * * *"}


def test_a_trigger_refused_by_the_overlap_policy_answers_409(
    replicas: Any, clock: ManualClock, sample_settings: Any
) -> None:
    (host,) = replicas([EVERY_MINUTE], lease_duration="5m")
    clock.now = datetime(2026, 5, 4, 10, 0, 1, tzinfo=UTC)
    (running,) = host.tick()
    token = ApiToken(
        name="ops", sha256=hashlib.sha256(SECRET.encode()).hexdigest(), scopes=["trigger"]
    )
    settings = sample_settings([EVERY_MINUTE]).model_copy(update={"api_tokens": [token]})
    app = create_app(
        store_endpoints(settings, host.catalog, host.store),
        routes=api_routes(settings, host.catalog, host.store, trigger_wait=10),
    )
    server = WebServer(("127.0.0.1", 0), app)
    server.start()
    answers: list[Answer] = []
    try:
        base = f"http://127.0.0.1:{server.address[1]}"
        asking = threading.Thread(
            target=lambda: answers.append(
                call(
                    base,
                    "POST",
                    "/api/v1/jobs/sample.minutely/trigger",
                    token=SECRET,
                    body={"reason": "again"},
                )
            )
        )
        asking.start()

        def answered() -> bool:
            host.tick()  # the host's turn takes the request and refuses it
            return not asking.is_alive()

        wait_for(answered, 10, "the API's answer to the second trigger", every=0.05)
        asking.join(10)
    finally:
        server.stop()
    (answer,) = answers
    assert answer.status == 409, answer.body
    assert answer.content_type == "application/problem+json"
    assert "overlap policy forbid" in answer.body["detail"]
    assert running.run_id in answer.body["detail"]
    assert answer.body["request_id"]
