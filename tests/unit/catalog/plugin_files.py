"""Plugin files written into a test's folder, each returning the job pairs it is given, and the
catalog built from them alone (the installed entry points left out)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from jobhost.catalog import Catalog, build_catalog
from jobhost.config import Settings

__all__ = ["Plugins"]


_HEADER = """\
from datetime import timedelta

from returns.result import Success

from jobhost_contracts import BackgroundJobDeclaration, JobRegistration, hookimpl


class Executor:
    def execute(self, context):
        return Success(None)


def decl(name, module="files", **fields):
    return BackgroundJobDeclaration(name=name, module=module, **fields)


def job(name, module="files", **fields):
    return JobRegistration(decl(name, module, **fields), Executor())

"""


class Plugins:
    """Writes plugin files, each returning the given pairs (Python expressions)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.files: list[Path] = []

    def add(self, *pairs: str, name: str | None = None) -> Path:
        path = self.root / f"{name or f'plugin{len(self.files)}'}.py"
        items = "".join(f"        {pair},\n" for pair in pairs)
        body = f"@hookimpl\ndef jobhost_jobs(settings):\n    return [\n{items}    ]\n"
        path.write_text(_HEADER + body)
        self.files.append(path)
        return path

    def catalog(
        self,
        jobs: dict[str, dict[str, Any]] | None = None,
        modules: dict[str, dict[str, Any]] | None = None,
    ) -> Catalog:
        settings = Settings(
            plugins=[str(path) for path in self.files],
            jobs=jobs or {},
            modules=modules or {},
        )
        return build_catalog(settings, environ={"JOBHOST_LOAD_PLUGINS": ""})
