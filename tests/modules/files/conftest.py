"""A real tree under tmp_path and a real SQLite references database."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from files_support import (
    OLD,
    ORPHANS,
    REFERENCED,
    YOUNG,
    YOUNG_ORPHAN,
    write_file,
    write_references,
)


@pytest.fixture
def tree(tmp_path: Path) -> dict[str, Any]:
    """root with referenced, orphaned and young files; app.db referencing the kept ones.

    Returns the ``[modules.files]`` section (a plain dict, as in jobhost.toml).
    """
    root = tmp_path / "root"
    for relative in (*REFERENCED, *ORPHANS):
        write_file(root / relative, OLD, f"content of {relative}\n")
    write_file(root / YOUNG_ORPHAN, YOUNG)
    database = tmp_path / "app.db"
    write_references(database, REFERENCED)
    return {
        "root": str(root),
        "references_url": f"sqlite:///{database}",
        "references_query": "SELECT path FROM refs",
        "min_age": "1h",
        "batch_size": 3,
    }
