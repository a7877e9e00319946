"""The ``operator`` fixtures: the jobhost command and a store to build state in, per backend."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli.operator_support import Operator


@pytest.fixture
def operator(store_url: str, tmp_path: Path) -> Iterator[Operator]:
    """A configuration on this test's store (SQLite or PostgreSQL); see :class:`Operator`."""
    made = Operator(store_url, tmp_path)
    yield made
    made.close()


@pytest.fixture
def sqlite_operator(tmp_path: Path) -> Iterator[Operator]:
    """An SQLite-only :class:`Operator`, for behaviour that does not depend on the backend."""
    made = Operator(f"sqlite:///{tmp_path}/store.db", tmp_path)
    yield made
    made.close()
