"""SQL lives in the store: the loop and the operator commands call store functions, not tables.

``jobhost/builtin/``, ``jobhost/firing/`` and ``jobhost/operations/`` never import the schema or
SQLAlchemy's query builders, and ``jobhost/operations/`` never imports the firing loop: a report
or a pause must not drag the loop in, and a change to a table touches only ``jobhost/store/``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "jobhost"
_QUERY_BUILDERS = {"select", "update", "insert", "delete", "text", "func", "and_", "or_"}


def _imports(path: Path) -> list[tuple[str, set[str]]]:
    found: list[tuple[str, set[str]]] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.append((node.module, {alias.name for alias in node.names}))
        elif isinstance(node, ast.Import):
            found.extend((alias.name, set()) for alias in node.names)
    return found


def _files(package: str) -> list[Path]:
    return sorted((PACKAGE / package).rglob("*.py"))


@pytest.mark.parametrize("package", ["builtin", "firing", "operations"])
def test_no_tables_and_no_query_building_outside_the_store(package: str) -> None:
    offenders = []
    for path in _files(package):
        for module, names in _imports(path):
            if module == "jobhost.store.schema" or module.startswith("jobhost.store.schema."):
                offenders.append(f"{path.name}: imports {module}")
            if module == "sqlalchemy" and names & _QUERY_BUILDERS:
                offenders.append(f"{path.name}: builds queries with {sorted(names)}")
    assert offenders == []


def test_operations_do_not_import_the_firing_loop() -> None:
    offenders = [
        f"{path.name}: imports {module}"
        for path in _files("operations")
        for module, _ in _imports(path)
        if module == "jobhost.firing" or module.startswith("jobhost.firing.")
    ]
    assert offenders == []
