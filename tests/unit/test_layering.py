"""SQL lives in the store: the loop and the operator commands call store functions, not tables.

``jobhost/builtin/``, ``jobhost/firing/`` and ``jobhost/operations/`` never import the schema or
SQLAlchemy's query builders, and ``jobhost/operations/`` never imports the firing loop: a report
or a pause must not drag the loop in, and a change to a table touches only ``jobhost/store/``.
Within ``jobhost/firing/``, imports point one way: only the host imports ``host.py``.

The store is a closed interface: no package outside it holds a connection or opens a
transaction. They hold the one ``Store`` object, whose methods open their own.
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
    path = PACKAGE / package
    return [path] if path.is_file() else sorted(path.rglob("*.py"))


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


# Packages and top-level modules alike (records.py, rules.py); demo.py writes the demo
# application's own SQLite file, not the store.
_OUTSIDE_THE_STORE = sorted(
    path.name
    for path in PACKAGE.iterdir()
    if (path.is_dir() or path.suffix == ".py")
    and path.name not in {"store", "__pycache__", "demo.py"}
)
_CONNECTION_NAMES = {"Connection", "Engine", "create_engine"}
_STORE_INTERNALS = {"reading", "database_now"}


@pytest.mark.parametrize("package", _OUTSIDE_THE_STORE)
def test_no_connection_and_no_transaction_outside_the_store(package: str) -> None:
    offenders = []
    for path in _files(package):
        tree = ast.parse(path.read_text(), str(path))
        for module, names in _imports(path):
            if module.startswith("sqlalchemy") and (
                names & (_CONNECTION_NAMES | _QUERY_BUILDERS) or module == "sqlalchemy.orm"
            ):
                offenders.append(f"{path.name}: imports {sorted(names)} from {module}")
            if module.startswith("jobhost.store") and names & _STORE_INTERNALS:
                offenders.append(f"{path.name}: imports {sorted(names & _STORE_INTERNALS)}")
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in {"begin", "connect", "exec_driver_sql"}
            ):
                offenders.append(f"{path.name}:{node.lineno}: calls .{node.func.attr}()")
    assert offenders == []


def test_the_closed_store_check_sees_every_package() -> None:
    assert {"builtin", "cli", "envelope", "firing", "operations", "runtime", "web"} <= set(
        _OUTSIDE_THE_STORE
    )


def test_operations_do_not_import_the_firing_loop() -> None:
    offenders = [
        f"{path.name}: imports {module}"
        for path in _files("operations")
        for module, _ in _imports(path)
        if module == "jobhost.firing" or module.startswith("jobhost.firing.")
    ]
    assert offenders == []


def test_the_host_is_the_top_of_the_firing_package() -> None:
    # Its parts (worker slots, ticker, recorder, heartbeat) are handed what they need; none
    # reaches back into the loop that holds them.
    offenders = [
        f"{path.name}: imports {module}"
        for path in _files("firing")
        if path.name != "host.py"
        for module, names in _imports(path)
        if module == "jobhost.firing.host" or (module == "jobhost.firing" and "host" in names)
    ]
    assert offenders == []
