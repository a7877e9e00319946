"""Kind ``publish``: a runtime job names a broker; the address stays in [modules.publish]."""

from __future__ import annotations

import pytest
from jobhost_contracts import KindSettingsError
from jobhost_publish.executor import Publisher
from jobhost_publish.plugin import jobhost_job_kinds


def test_a_message_is_checked_and_made_into_a_publisher() -> None:
    (kind,) = jobhost_job_kinds({"publish": {"nats_url": "nats://127.0.0.1:4222"}})
    assert (kind.name, kind.module) == ("publish", "publish")
    checked = kind.validate({"broker": "nats", "subject": "billing.close", "payload": {"a": 1}})
    assert isinstance(kind.factory("billing.close", checked), Publisher)
    assert "broker" in kind.settings_schema["required"]


@pytest.mark.parametrize(
    ("section", "settings", "field", "words"),
    [
        ({}, {"broker": "nats", "subject": "a.b"}, "broker", "nats_url"),
        ({"nats_url": "nats://h:4222"}, {"broker": "kafka"}, "broker", "Kafka"),
        (
            {"nats_url": "nats://h:4222"},
            {"broker": "nats", "subject": "a", "url": "x"},
            "url",
            "is not a known key",
        ),
    ],
)
def test_refusals_name_the_key(
    section: dict[str, str], settings: dict[str, object], field: str, words: str
) -> None:
    (kind,) = jobhost_job_kinds({"publish": section})
    with pytest.raises(KindSettingsError) as caught:
        kind.validate(settings)
    assert caught.value.field == field and words in caught.value.reason
