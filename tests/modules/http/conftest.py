"""A real HTTP server for every test that asks for one."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from http_support import Server, serve


@pytest.fixture
def server() -> Iterator[Server]:
    with serve() as running:
        yield running
