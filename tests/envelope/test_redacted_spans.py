"""A job's error reaches the span as the ledger has it: redacted and bounded."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from opentelemetry.trace import StatusCode

from jobhost.catalog import build_catalog
from jobhost.config import Settings
from jobhost.store import create_store_engine, upgrade
from tests.badinput.unruly_jobs import HUGE
from tests.envelope.test_envelope import Harness

UNRULY = str(Path(__file__).parent.parent / "badinput" / "unruly_jobs.py")


@pytest.mark.parametrize("behaviour", ["raise-secret", "fail-secret", "huge-raise"])
def test_the_span_never_carries_a_password_or_a_megabyte(
    tmp_path: Path, telemetry: Any, behaviour: str
) -> None:
    traces, spans, _ = telemetry
    settings = Settings(
        database_url=f"sqlite:///{tmp_path}/store.db",
        plugins=[UNRULY],
        modules={"unruly": {"jobs": [{"name": "unruly.job", "behaviour": behaviour}]}},
    )
    engine = create_store_engine(settings.database_url)
    upgrade(engine)
    try:
        catalog = build_catalog(settings, environ={"JOBHOST_LOAD_PLUGINS": ""})
        outcome, row = Harness(settings, catalog, engine, traces).run("unruly.job")
    finally:
        engine.dispose()
    assert outcome.outcome == "failed"
    (span,) = spans.get_finished_spans()
    assert span.status.status_code is StatusCode.ERROR
    exported = [span.status.description or ""] + [
        str(value) for event in span.events for value in (event.attributes or {}).values()
    ]
    assert all("S3cretPW" not in text for text in exported)
    assert all(len(text) < 5000 for text in exported)
    assert span.status.description == row.error_message
    if behaviour != "fail-secret":
        (event,) = span.events
        assert event.attributes is not None
        message = str(event.attributes["exception.message"])
        assert "postgresql://app:***@db/app" in message or f"[cut: {HUGE}" in message
