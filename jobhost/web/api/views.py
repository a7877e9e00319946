"""What the API answers about jobs: the report's view of each, with its source and, for a
runtime job, its kind, definition, ETag and who created and last changed it."""

from __future__ import annotations

from typing import Any

from jobhost.catalog import Catalog
from jobhost.operations.report import JobReport
from jobhost.operations.timefmt import iso_utc
from jobhost.records import RuntimeJobRow
from jobhost.runtime.service import etag_of

__all__ = ["job_json", "runtime_json", "source_of"]


def source_of(name: str, catalog: Catalog) -> str:
    """``api`` for a runtime job, ``declaration`` or ``override`` for a declared one, ``store``
    for a job only the store knows (no longer declared: orphaned)."""
    if name in catalog.runtime:
        return "api"
    spec = catalog.jobs.get(name)
    return spec.trigger.source if spec is not None else "store"


def runtime_json(row: RuntimeJobRow) -> dict[str, Any]:
    return {
        "name": row.name,
        "source": "api",
        "kind": row.kind,
        "definition": row.definition,
        "etag": etag_of(row),
        "version": row.version,
        "created_at": iso_utc(row.created_at),
        "created_by": row.created_by,
        "updated_at": iso_utc(row.updated_at),
        "updated_by": row.updated_by,
    }


def job_json(job: JobReport, catalog: Catalog, row: RuntimeJobRow | None) -> dict[str, Any]:
    if row is None:
        return {**job.to_json(), "source": source_of(job.name, catalog), "kind": None}
    return {**job.to_json(), "source": "api", "kind": row.kind, "runtime": runtime_json(row)}
