"""files.orphan-cleanup on a real tree and a real SQLite references database."""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from files_support import (
    NOW,
    OLD,
    ORPHANS,
    REFERENCED,
    YOUNG_ORPHAN,
    DictState,
    files_settings,
    files_under,
    make_context,
    write_file,
    write_references,
)
from jobhost_contracts import Cancellation
from jobhost_files.cleanup import OrphanCleanup
from jobhost_files.outcome import CleanupReport, NoReferences, ReferencesUnavailable
from jobhost_files.walk import QUARANTINE_DIR
from returns.result import Failure, Success

DAY = NOW.date().isoformat()


def run(section: dict[str, Any], state: DictState | None = None, **kwargs: Any) -> Any:
    clock = kwargs.pop("clock", lambda: NOW)
    executor = OrphanCleanup(files_settings(section), clock=clock)
    return executor.execute(make_context(state or DictState(), config=section, **kwargs))


def quarantined(root: Path, day: str = DAY) -> set[str]:
    return (
        files_under(root / QUARANTINE_DIR / day)
        if (root / QUARANTINE_DIR / day).exists()
        else set()
    )


def test_orphans_are_quarantined_referenced_and_young_are_kept(tree: dict[str, Any]) -> None:
    root = Path(tree["root"])

    result = run(tree)

    report = result.unwrap()
    assert isinstance(report, CleanupReport)
    assert (report.orphaned, report.moved, report.deleted, report.errors) == (4, 4, 0, 0)
    assert report.scanned == len(REFERENCED) + len(ORPHANS) + 1
    assert report.complete
    assert quarantined(root) == set(ORPHANS)
    assert files_under(root) - {f"{QUARANTINE_DIR}/{DAY}/{o}" for o in ORPHANS} == {
        *REFERENCED,
        YOUNG_ORPHAN,
    }
    # Moving keeps the content: a quarantined file can be put back as it was.
    assert (root / QUARANTINE_DIR / DAY / ORPHANS[0]).read_text() == f"content of {ORPHANS[0]}\n"


def test_symlinks_and_escaping_references_are_skipped_and_counted(
    tree: dict[str, Any], tmp_path: Path
) -> None:
    root = Path(tree["root"])
    outside = tmp_path / "outside"
    secret = write_file(outside / "secret.txt", OLD)
    write_file(outside / "dir" / "inner.txt", OLD)
    (root / "link-to-file").symlink_to(secret)
    (root / "a" / "link-to-dir").symlink_to(outside / "dir", target_is_directory=True)
    (root / "dangling").symlink_to(tmp_path / "nowhere")
    write_references(
        Path(tree["references_url"].removeprefix("sqlite:///")),
        [*REFERENCED, "../outside/secret.txt", "a/../b/orphan-3.txt", None],
    )

    report = run(tree).unwrap()

    # 3 links + 3 refused references; "a/../b/orphan-3.txt" is refused yet still protects.
    assert report.skipped == 6
    assert report.moved == 3
    assert (root / "b" / "orphan-3.txt").exists()
    assert secret.exists() and (outside / "dir" / "inner.txt").exists()
    assert files_under(outside) == {"secret.txt", "dir/inner.txt"}
    assert all((root / name).is_symlink() for name in ("link-to-file", "a/link-to-dir", "dangling"))


def test_the_quarantine_folder_is_not_walked_again(tree: dict[str, Any]) -> None:
    root = Path(tree["root"])
    run(tree).unwrap()

    second = run(tree).unwrap()

    assert (second.orphaned, second.moved) == (0, 0)
    assert second.skipped == 1  # the quarantine folder itself
    assert quarantined(root) == set(ORPHANS)


def test_quarantine_is_purged_after_quarantine_days(tree: dict[str, Any]) -> None:
    root = Path(tree["root"])
    tree["quarantine_days"] = 7
    run(tree).unwrap()

    three_days = run(tree, clock=lambda: NOW + timedelta(days=3)).unwrap()
    assert three_days.purged == 0
    assert quarantined(root) == set(ORPHANS)
    # The upload was young on day 0; by day 3 it is an orphan too, quarantined that day.
    later = (NOW + timedelta(days=3)).date().isoformat()
    assert quarantined(root, later) == {YOUNG_ORPHAN}

    eight_days = run(tree, clock=lambda: NOW + timedelta(days=8)).unwrap()
    assert eight_days.purged == len(ORPHANS)
    assert not (root / QUARANTINE_DIR / DAY).exists()
    # Five days in quarantine is not yet seven: the day-3 folder stays.
    assert files_under(root) == {*REFERENCED, f"{QUARANTINE_DIR}/{later}/{YOUNG_ORPHAN}"}


def test_a_folder_in_quarantine_that_is_not_a_day_is_left_alone(tree: dict[str, Any]) -> None:
    root = Path(tree["root"])
    write_file(root / QUARANTINE_DIR / "keep" / "note.txt", OLD)

    report = run(tree, clock=lambda: NOW + timedelta(days=30)).unwrap()

    assert report.purged == 0
    assert (root / QUARANTINE_DIR / "keep" / "note.txt").exists()


def test_delete_mode_removes_orphans(tree: dict[str, Any]) -> None:
    root = Path(tree["root"])
    tree["mode"] = "delete"

    report = run(tree).unwrap()

    assert (report.deleted, report.moved) == (4, 0)
    assert files_under(root) == {*REFERENCED, YOUNG_ORPHAN}
    assert not (root / QUARANTINE_DIR).exists()


def test_dry_run_touches_nothing_and_leaves_the_cursor(tree: dict[str, Any]) -> None:
    root = Path(tree["root"])
    tree["dry_run"] = True
    before = {name: os.lstat(root / name).st_mtime for name in files_under(root)}
    state = DictState()
    state.values["cursor"] = "b/orphan-3.txt"

    report = run(tree, state).unwrap()

    assert report.dry_run and report.orphaned == 4
    assert (report.moved, report.deleted, report.purged) == (0, 0, 0)
    assert {name: os.lstat(root / name).st_mtime for name in files_under(root)} == before
    assert state.writes == []


def test_batches_commit_the_cursor_and_a_finished_walk_clears_it(tree: dict[str, Any]) -> None:
    state = DictState()

    run(tree, state).unwrap()

    cursors = [value for key, value in state.writes if key == "cursor"]
    # "" proves the lease before anything is touched; then one commit per full batch of 3 (the
    # walk compares components, so b/c/... comes before b/orphan-3.txt); the short last batch
    # ends the walk, which clears the cursor.
    assert cursors == ["", "a/orphan-1.txt", "b/orphan-3.txt", ""]


def test_a_run_killed_before_its_cursor_commit_is_replayed_without_duplicates(
    tree: dict[str, Any],
) -> None:
    root = Path(tree["root"])
    # Write 1 proves the lease, write 2 commits batch 1: the process dies after moving
    # a/orphan-1.txt but before that commit.
    state = DictState(fail_on_set=2)
    with pytest.raises(RuntimeError, match="killed"):
        run(tree, state)
    assert quarantined(root) == {"a/orphan-1.txt"}
    assert state.values["cursor"] == ""

    second = run(tree, state).unwrap()

    assert second.moved == 3 and second.errors == 0
    assert quarantined(root) == set(ORPHANS)  # no "a/orphan-1.txt.1": nothing moved twice
    assert files_under(root) - {f"{QUARANTINE_DIR}/{DAY}/{o}" for o in ORPHANS} == {
        *REFERENCED,
        YOUNG_ORPHAN,
    }
    assert state.values["cursor"] == ""


def test_cancellation_stops_after_the_current_batch_and_the_next_run_resumes(
    tree: dict[str, Any],
) -> None:
    root = Path(tree["root"])
    cancellation = Cancellation()
    state = DictState()

    def shut_down_after_a_commit(key: str, value: str) -> None:
        if value:  # not the lease proof ("") but a batch commit
            cancellation.cancel("shutdown")

    state.after_set = shut_down_after_a_commit

    first = run(tree, state, cancellation=cancellation).unwrap()

    assert not first.complete
    assert state.values["cursor"] == "a/orphan-1.txt"
    assert first.scanned == 3 and quarantined(root) == {"a/orphan-1.txt"}

    state.after_set = None
    second = run(tree, state).unwrap()

    assert second.complete and second.scanned == 5
    assert second.moved == 3 and quarantined(root) == set(ORPHANS)
    assert state.values["cursor"] == ""


@pytest.mark.parametrize(
    ("url", "query", "reason"),
    [
        (None, "SELECT path FROM no_such_table", "no such table"),
        (None, "SELECT rowid, path FROM refs", "exactly one"),
        ("sqlite:////nonexistent-dir/x/app.db", "SELECT path FROM refs", "unable to open"),
        ("postgresql+psycopg://u:hunter2@127.0.0.1:1/app", "SELECT 1", "OperationalError"),
    ],
    ids=["bad-table", "two-columns", "no-database", "connection-refused"],
)
def test_a_failing_reference_query_touches_nothing(
    tree: dict[str, Any], url: str | None, query: str, reason: str
) -> None:
    root = Path(tree["root"])
    if url is not None:
        tree["references_url"] = url
    tree["references_query"] = query
    tree["mode"] = "delete"
    write_file(root / QUARANTINE_DIR / "2020-01-01" / "old.txt", OLD)
    before = files_under(root)
    state = DictState()

    result = run(tree, state)

    assert isinstance(result, Failure)
    error = result.failure()
    assert isinstance(error, ReferencesUnavailable)
    assert reason in str(error) and "no file was touched" in str(error)
    assert "hunter2" not in str(error)
    assert files_under(root) == before
    assert state.writes == []


def test_an_empty_reference_list_touches_nothing_unless_declared_possible(
    tree: dict[str, Any],
) -> None:
    root = Path(tree["root"])
    tree["references_query"] = "SELECT path FROM refs WHERE 1 = 0"
    before = files_under(root)

    result = run(tree)

    assert isinstance(result, Failure)
    assert isinstance(result.failure(), NoReferences)
    assert "allow_empty_references = true" in str(result.failure())
    assert files_under(root) == before

    tree["allow_empty_references"] = True
    report = run(tree).unwrap()
    assert report.moved == len(ORPHANS) + len(REFERENCED)


def test_a_per_file_os_error_is_counted_not_fatal(tree: dict[str, Any]) -> None:
    root = Path(tree["root"])
    # A plain file where the quarantine needs the directory "a": a/orphan-1.txt cannot move.
    write_file(root / QUARANTINE_DIR / DAY / "a", OLD)

    report = run(tree).unwrap()

    assert report.errors == 1 and report.moved == 3
    assert (root / "a" / "orphan-1.txt").exists()


def test_a_quarantine_folder_that_is_a_link_refuses_the_run(
    tree: dict[str, Any], tmp_path: Path
) -> None:
    root = Path(tree["root"])
    (tmp_path / "elsewhere").mkdir()
    (root / QUARANTINE_DIR).symlink_to(tmp_path / "elsewhere", target_is_directory=True)

    result = run(tree)

    assert isinstance(result, Failure) and "not a plain directory" in str(result.failure())
    assert files_under(tmp_path / "elsewhere") == set()
    assert all((root / name).exists() for name in ORPHANS)


def test_the_same_path_orphaned_twice_in_a_day_keeps_both(tree: dict[str, Any]) -> None:
    root = Path(tree["root"])
    run(tree).unwrap()
    write_file(root / ORPHANS[0], OLD, "second version\n")

    report = run(tree).unwrap()

    assert report.moved == 1
    assert (root / QUARANTINE_DIR / DAY / f"{ORPHANS[0]}.1").read_text() == "second version\n"


def test_success_value_is_a_report_of_counts(tree: dict[str, Any]) -> None:
    result = run(tree)

    assert isinstance(result, Success)
    counts = result.unwrap().as_dict()
    assert set(counts) >= {"scanned", "orphaned", "moved", "deleted", "purged", "skipped", "errors"}
