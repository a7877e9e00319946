"""A JetStream stream, a RabbitMQ queue and exchange of each test's own, removed afterwards."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from publish_support import (
    Stream,
    create_stream,
    declare_queue,
    delete_stream,
    remove,
    unique,
)


@pytest.fixture
def stream() -> Iterator[Stream]:
    name = unique("jobhost-test").replace("-", "_").upper()
    created = Stream(name=name, subject=f"jobhost-test.{name.lower()}")
    create_stream(created)
    yield created
    delete_stream(created)


@pytest.fixture
def queue() -> Iterator[str]:
    """A durable queue on the default exchange: publish with routing_key = its name."""
    name = unique("jobhost-test")
    declare_queue(name)
    yield name
    remove([name], [])
