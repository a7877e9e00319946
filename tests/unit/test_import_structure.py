"""Imports run one way: every package of the host sits on a layer and imports only layers below
it; the contracts import no project code; a module imports only the contracts; and no two files
import each other, function-level imports included."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HOST = ROOT / "jobhost"

# Bottom first. A package imports only packages on a lower layer: never one above, never a
# neighbour on its own layer.
LAYERS: list[set[str]] = [
    {"__init__", "clock", "errors"},
    {"config", "triggers"},
    {"records"},
    {"store", "plugins"},
    {"catalog", "builtin"},
    {"rules"},
    {"envelope"},
    {"operations"},
    {"runtime"},
    {"firing", "web"},
    {"cli"},
    {"__main__", "demo"},
]
_LAYER = {package: level for level, packages in enumerate(LAYERS) for package in packages}

# Where top-level names of each tree resolve: the distributions' import roots, and the
# benchmarks, which import their helpers by bare module name.
_SOURCE_ROOTS = [
    ROOT,
    ROOT / "contracts",
    ROOT / "modules" / "files",
    ROOT / "modules" / "http",
    ROOT / "modules" / "publish",
    ROOT / "benchmarks",
]
_TREES = [
    HOST,
    ROOT / "contracts" / "jobhost_contracts",
    ROOT / "modules",
    ROOT / "benchmarks",
]


def test_every_package_of_the_host_has_a_layer() -> None:
    packages = {_package(path) for path in HOST.rglob("*.py")}

    assert sorted(packages - set(_LAYER)) == []


def test_no_package_imports_one_above_it_or_beside_it() -> None:
    offenders = [
        f"{path.relative_to(ROOT)}: imports {module}"
        for path in sorted(HOST.rglob("*.py"))
        for module in _imported(path)
        if module.startswith("jobhost.")
        and (target := module.split(".")[1]) != _package(path)
        and target in _LAYER
        and _LAYER[target] >= _LAYER[_package(path)]
    ]

    assert offenders == []


@pytest.mark.parametrize(
    ("tree", "allowed"),
    [
        ("contracts/jobhost_contracts", {"jobhost_contracts"}),
        ("modules/files", {"jobhost_contracts", "jobhost_files"}),
        ("modules/http", {"jobhost_contracts", "jobhost_http"}),
        ("modules/publish", {"jobhost_contracts", "jobhost_publish"}),
    ],
)
def test_contracts_and_modules_import_no_other_project_code(tree: str, allowed: set[str]) -> None:
    project = {"jobhost", "jobhost_contracts", "jobhost_files", "jobhost_http", "jobhost_publish"}
    offenders = [
        f"{path.relative_to(ROOT)}: imports {module}"
        for path in sorted((ROOT / tree).rglob("*.py"))
        for module in _imported(path)
        if module.split(".")[0] in project - allowed
    ]

    assert offenders == []


def test_no_two_files_import_each_other() -> None:
    edges = {
        (path, target)
        for tree in _TREES
        for path in tree.rglob("*.py")
        for target in _imported_files(path)
        if target != path
    }
    pairs = sorted(
        f"{a.relative_to(ROOT)} <-> {b.relative_to(ROOT)}"
        for a, b in edges
        if (b, a) in edges and str(a) < str(b)
    )

    assert pairs == []


def _package(path: Path) -> str:
    parts = path.relative_to(HOST).parts
    return parts[0] if len(parts) > 1 else parts[0].removesuffix(".py")


def _imported(path: Path) -> Iterator[str]:
    """Every module ``path`` imports, at any depth (function-level and TYPE_CHECKING too);
    ``from package import name`` counts as the module ``package.name`` when that is one."""
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                submodule = f"{node.module}.{alias.name}"
                yield submodule if _file_of(submodule) is not None else node.module
        elif isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)


def _imported_files(path: Path) -> Iterator[Path]:
    for module in _imported(path):
        found = _file_of(module)
        if found is not None:
            yield found


def _file_of(module: str) -> Path | None:
    relative = Path(*module.split("."))
    for root in _SOURCE_ROOTS:
        for candidate in (root / relative.with_suffix(".py"), root / relative / "__init__.py"):
            if candidate.is_file():
                return candidate
    return None
