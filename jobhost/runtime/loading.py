"""Runtime jobs from the store, joined to the declared catalog: a declared job that took a
runtime job's name wins it (``runtime-name-taken``), and a stored runtime job that no longer
validates is a problem (``runtime-job-invalid``)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import partial

from jobhost.catalog import Catalog, JobSpec, Problem
from jobhost.config import Settings
from jobhost.records import RuntimeJobRow
from jobhost.runtime.definition import FieldProblem, parse_definition
from jobhost.runtime.specs import SecretRule, build_spec

__all__ = ["RuntimeJobs", "SpecCache", "check_runtime_jobs", "declared_jobs", "with_runtime_jobs"]

_CACHE_LIMIT = 10_000


# Checked runtime jobs by (name, version): a job is validated again only when it changed.
SpecCache = dict[tuple[str, int], JobSpec | list[FieldProblem]]


@dataclass
class RuntimeJobs:
    specs: dict[str, JobSpec] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)


def declared_jobs(catalog: Catalog) -> dict[str, JobSpec]:
    return {name: spec for name, spec in catalog.jobs.items() if name not in catalog.runtime}


def check_runtime_jobs(
    rows: Sequence[RuntimeJobRow],
    catalog: Catalog,
    settings: Settings,
    *,
    cache: SpecCache | None = None,
) -> RuntimeJobs:
    """Stored runtime jobs (``rows``) checked against ``catalog``'s kinds and declared names;
    ``cache`` keeps the checked ones of each version."""
    rule = SecretRule.of(settings)
    build = partial(build_spec, kinds=catalog.kinds, modules=settings.modules, secrets=rule)
    found = RuntimeJobs()
    cache = {} if cache is None else cache
    declared = declared_jobs(catalog)
    for row in rows:
        if row.name in declared:
            module = declared[row.name].module
            found.problems.append(
                Problem(
                    row.name,
                    module,
                    "runtime-name-taken",
                    f"module {module} declares job {row.name!r}, which is already a runtime job "
                    f"(created by {row.created_by}); rename the declaration, or remove the "
                    f"runtime job with `jobhost jobs delete {row.name} --reason TEXT`",
                )
            )
            continue
        key = (row.name, row.version)
        spec = cache.get(key)
        if spec is None:
            definition = parse_definition(row.definition)
            spec = (
                definition
                if isinstance(definition, list)
                else build(row.name, definition, stored=True)
            )
            if len(cache) >= _CACHE_LIMIT:
                cache.clear()  # bounded: past the limit it starts afresh
            cache[key] = spec
        if isinstance(spec, JobSpec):
            found.specs[row.name] = spec
        else:
            lines = "; ".join(problem.line() for problem in spec)
            found.problems.append(
                Problem(
                    row.name,
                    None,
                    "runtime-job-invalid",
                    f"runtime job of kind {row.kind!r} cannot run: {lines}; change it with "
                    f"`jobhost jobs put {row.name} --reason TEXT` or remove it with "
                    "`jobhost jobs delete --reason TEXT`",
                )
            )
    return found


def with_runtime_jobs(catalog: Catalog, runtime: RuntimeJobs) -> Catalog:
    jobs = {**declared_jobs(catalog), **runtime.specs}
    problems = [p for p in catalog.problems if p.code not in _RUNTIME_CODES]
    return Catalog(
        jobs={name: jobs[name] for name in sorted(jobs)},
        problems=[*problems, *runtime.problems],
        plugins=catalog.plugins,
        audit_sinks=catalog.audit_sinks,
        kinds=catalog.kinds,
        runtime=frozenset(runtime.specs),
        warnings=[w for w in catalog.warnings if not _joined(w, runtime.specs.values())],
    )


def _joined(warning: Problem, specs: Iterable[JobSpec]) -> bool:
    """An unused-limit warning about a group that a runtime job joins after all."""
    return warning.code == "unused-concurrency-limit" and any(
        s.concurrency_group is not None
        and warning.message.startswith(f"[concurrency_limits] {s.concurrency_group} = ")
        for s in specs
    )


_RUNTIME_CODES = frozenset({"runtime-name-taken", "runtime-job-invalid"})
