"""The bad-input corpus: every case run as a real ``jobhost`` process, asserting what it says.

Every case gets a directory, a configuration and a copy of one prepared store of its own, so the
cases run side by side (a few processes at once: the subprocess start dominates) and each can be
checked for "nothing lost" exactly. The cases themselves are in the ``cases_*`` modules.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

import pytest

from tests.badinput.cases_cli import CLI_CASES
from tests.badinput.cases_plugins import EXECUTOR_CASES, PLUGIN_CASES
from tests.badinput.cases_rows import ROW_CASES
from tests.badinput.cases_settings import ENV_CASES, FILE_CASES
from tests.badinput.corpus_support import (
    Case,
    Launcher,
    Result,
    job_tracebacks_only,
    lost_rows,
    new_run_outcomes,
    prepare_template,
    run_case,
)

# These run as `python -m jobhost` from scratch, the others forked from a warm server: together
# they prove the entry point itself, at a fraction of the cost of starting every case cold.
_FRESH = {
    "file-bad-setting-stops-run",
    "env-jobs-malformed-stops-run",
    "plugin-exit-9-stops-run",
    "plugin-exit-9-at-import",
    "executor-exit-3",
    "executor-raise-secret",
    "cli-unknown-command",
    "no-store-trigger",
    "row-schema-unknown-revision",
    "row-host-last-seen-report",
}
CASES: list[Case] = [
    replace(case, fresh=case.id in _FRESH)
    for case in (
        *FILE_CASES,
        *ENV_CASES,
        *PLUGIN_CASES,
        *EXECUTOR_CASES,
        *CLI_CASES,
        *ROW_CASES,
    )
]
_BY_ID = {case.id: case for case in CASES}
_PARALLEL = max(2, min(4, os.cpu_count() or 2))


def test_the_corpus_is_large_and_every_case_has_its_own_name() -> None:
    assert len(_BY_ID) == len(CASES), "case ids must be unique"
    assert len(CASES) >= 120
    assert _BY_ID.keys() >= _FRESH


@pytest.fixture(scope="module")
def results(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Result]]:
    """Run the selected cases at once, a few processes at a time."""
    wanted = [
        _BY_ID[item.callspec.params["case_id"]]
        for item in request.session.items
        if hasattr(item, "callspec") and "case_id" in item.callspec.params
    ]
    root = tmp_path_factory.mktemp("corpus")
    template = prepare_template(root)
    launcher = Launcher(_PARALLEL)
    try:
        with ThreadPoolExecutor(_PARALLEL) as pool:
            futures = {
                c.id: pool.submit(run_case, c, root / c.id, template, launcher) for c in wanted
            }
            done = {case_id: future.result() for case_id, future in futures.items()}
    finally:
        launcher.close()
    yield done


# The first case waits for the whole corpus to run (the fixture), on a loaded machine too.
@pytest.mark.timeout(1800)
@pytest.mark.parametrize("case_id", list(_BY_ID))
def test_bad_input(case_id: str, results: dict[str, Result]) -> None:
    case = _BY_ID[case_id]
    result = results[case_id]
    shown = (
        f"exit {result.code}\n--- stdout\n{result.stdout[-3000:]}\n"
        f"--- stderr\n{result.stderr[-3000:]}"
    )
    if case.job_traceback:
        assert job_tracebacks_only(result.output), shown
    else:
        assert "Traceback" not in result.output, shown
    assert result.code == case.code, shown
    for words in case.says:
        assert words in result.output, f"{words!r} not said\n{shown}"
    for words in case.never:
        assert words not in result.output, f"{words!r} printed\n{shown}"
    if case.writes:
        assert lost_rows(result) == [], "rows were lost"
        assert new_run_outcomes(result) == sorted(case.new_runs), shown
    else:
        assert result.after == result.before, f"the store changed\n{shown}"
